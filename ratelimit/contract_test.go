package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/contract"
	"github.com/coordkit/coordination/ratelimit"
)

// algorithm is one limiter constructor under the contract suite, with
// capacity 2 and a time scale of a minute (nothing returns during a
// scenario).
type algorithm struct {
	name string
	new  func(c *coordination.Coordinator, key string, opts ...ratelimit.Option) (*ratelimit.Limiter, error)
	conc bool
	// bad are its invalid settings, by the argument they must name.
	bad map[string]func(c *coordination.Coordinator) error
}

func constructorErr(_ *ratelimit.Limiter, err error) error { return err }

var algorithms = []algorithm{
	{name: "fixed window",
		new: func(c *coordination.Coordinator, key string, opts ...ratelimit.Option) (*ratelimit.Limiter, error) {
			return ratelimit.New(c, key, ratelimit.FixedWindow{Limit: 2, Window: time.Minute}, opts...)
		},
		bad: map[string]func(c *coordination.Coordinator) error{
			"limit": func(c *coordination.Coordinator) error {
				return constructorErr(ratelimit.New(c, "k", ratelimit.FixedWindow{Limit: 0, Window: time.Minute}))
			},
			"window": func(c *coordination.Coordinator) error {
				return constructorErr(ratelimit.New(c, "k", ratelimit.FixedWindow{Limit: 1, Window: time.Microsecond}))
			},
		}},
	{name: "sliding window",
		new: func(c *coordination.Coordinator, key string, opts ...ratelimit.Option) (*ratelimit.Limiter, error) {
			return ratelimit.New(c, key, ratelimit.SlidingWindow{Limit: 2, Window: time.Minute, Segments: 6}, opts...)
		},
		bad: map[string]func(c *coordination.Coordinator) error{
			"limit": func(c *coordination.Coordinator) error {
				return constructorErr(ratelimit.New(c, "k", ratelimit.SlidingWindow{Limit: -1, Window: time.Minute, Segments: 2}))
			},
			"window": func(c *coordination.Coordinator) error {
				return constructorErr(ratelimit.New(c, "k", ratelimit.SlidingWindow{Limit: 1, Segments: 2}))
			},
			"segments": func(c *coordination.Coordinator) error {
				return constructorErr(ratelimit.New(c, "k", ratelimit.SlidingWindow{Limit: 1, Window: time.Minute, Segments: 1025}))
			},
		}},
	{name: "token bucket",
		new: func(c *coordination.Coordinator, key string, opts ...ratelimit.Option) (*ratelimit.Limiter, error) {
			return ratelimit.New(c, key, ratelimit.TokenBucket{Limit: 2, TokensPerPeriod: 1, Period: time.Minute}, opts...)
		},
		bad: map[string]func(c *coordination.Coordinator) error{
			"limit": func(c *coordination.Coordinator) error {
				return constructorErr(ratelimit.New(c, "k", ratelimit.TokenBucket{TokensPerPeriod: 1, Period: time.Minute}))
			},
			"tokensPerPeriod": func(c *coordination.Coordinator) error {
				return constructorErr(ratelimit.New(c, "k", ratelimit.TokenBucket{Limit: 1, Period: time.Minute}))
			},
			"period": func(c *coordination.Coordinator) error {
				return constructorErr(ratelimit.New(c, "k", ratelimit.TokenBucket{Limit: 1, TokensPerPeriod: 1, Period: -time.Second}))
			},
		}},
	{name: "GCRA",
		new: func(c *coordination.Coordinator, key string, opts ...ratelimit.Option) (*ratelimit.Limiter, error) {
			return ratelimit.New(c, key, ratelimit.GCRA{Burst: 2, Interval: time.Minute}, opts...)
		},
		bad: map[string]func(c *coordination.Coordinator) error{
			"burst": func(c *coordination.Coordinator) error {
				return constructorErr(ratelimit.New(c, "k", ratelimit.GCRA{Interval: time.Minute}))
			},
			"interval": func(c *coordination.Coordinator) error {
				return constructorErr(ratelimit.New(c, "k", ratelimit.GCRA{Burst: 1}))
			},
		}},
	{name: "composite",
		new: func(c *coordination.Coordinator, key string, opts ...ratelimit.Option) (*ratelimit.Limiter, error) {
			return ratelimit.New(c, key, ratelimit.Composite{Components: []ratelimit.Settings{
				ratelimit.TokenBucket{Limit: 2, TokensPerPeriod: 1, Period: time.Minute},
				ratelimit.SlidingWindow{Limit: 5, Window: time.Minute, Segments: 6},
				ratelimit.FixedWindow{Limit: 9, Window: time.Hour},
			}}, opts...)
		},
		bad: map[string]func(c *coordination.Coordinator) error{
			"components": func(c *coordination.Coordinator) error {
				return constructorErr(ratelimit.New(c, "k", ratelimit.Composite{}))
			},
		}},
	{name: "concurrency", conc: true,
		new: func(c *coordination.Coordinator, key string, opts ...ratelimit.Option) (*ratelimit.Limiter, error) {
			return ratelimit.New(c, key, ratelimit.Concurrency{Limit: 2, LeaseDuration: time.Minute}, opts...)
		},
		bad: map[string]func(c *coordination.Coordinator) error{
			"limit": func(c *coordination.Coordinator) error {
				return constructorErr(ratelimit.New(c, "k", ratelimit.Concurrency{}))
			},
			"leaseDuration": func(c *coordination.Coordinator) error {
				return constructorErr(ratelimit.New(c, "k", ratelimit.Concurrency{Limit: 1, LeaseDuration: 10 * time.Millisecond}))
			},
		}},
}

func TestContract(t *testing.T) {
	for _, a := range algorithms {
		t.Run(a.name, func(t *testing.T) { contract.Run(t, a.spec()) })
	}
}

// check returns an error unless le is as wanted.
func check(le ratelimit.Lease, acquired bool, available int64, retry bool) error {
	_, hasRetry := le.RetryAfter()
	if le.Acquired() != acquired || le.Available() != available || hasRetry != retry {
		return fmt.Errorf("lease acquired=%v available=%d RetryAfter=%v, want %v %d %v",
			le.Acquired(), le.Available(), hasRetry, acquired, available, retry)
	}
	return nil
}

func (a algorithm) spec() contract.Spec {
	metrics := []string{"coordination.rate_limit.allowed", "coordination.rate_limit.blocked"}
	if a.conc {
		metrics = append(metrics, "coordination.rate_limit.concurrency.contention",
			"coordination.rate_limit.concurrency.hold_time", "coordination.rate_limit.concurrency.acquire_wait")
	}
	s := contract.Spec{
		Primitive: "rate_limit",
		Keys:      func(name string) []string { return []string{name} },
		Metrics:   metrics,
		Scenario:  a.scenario,
	}
	s.BadInputs = []contract.BadInput{
		{Arg: "coord", Call: func(ctx context.Context, c *coordination.Coordinator) error {
			return constructorErr(a.new(nil, "k"))
		}},
		{Arg: "key", Call: func(ctx context.Context, c *coordination.Coordinator) error {
			return constructorErr(a.new(c, ""))
		}},
		{Arg: "queueLimit", Call: func(ctx context.Context, c *coordination.Coordinator) error {
			return constructorErr(a.new(c, "k", ratelimit.WithQueue(-1, ratelimit.OldestFirst)))
		}},
		{Arg: "queueOrder", Call: func(ctx context.Context, c *coordination.Coordinator) error {
			return constructorErr(a.new(c, "k", ratelimit.WithQueue(1, ratelimit.QueueOrder(7))))
		}},
		{Arg: "failureMode", Call: func(ctx context.Context, c *coordination.Coordinator) error {
			return constructorErr(a.new(c, "k", ratelimit.WithFailureMode(ratelimit.FailureMode(7))))
		}},
	}
	for _, verb := range []string{"Allow", "Wait"} {
		s.BadInputs = append(s.BadInputs, contract.BadInput{Arg: "permits", Call: func(ctx context.Context, c *coordination.Coordinator) error {
			l, err := a.new(c, "k")
			if err != nil {
				return err
			}
			defer l.Close()
			if verb == "Allow" {
				_, err = l.Allow(ctx, -1)
			} else {
				_, err = l.Wait(ctx, -1)
			}
			return err
		}})
	}
	for arg, call := range a.bad {
		s.BadInputs = append(s.BadInputs, contract.BadInput{Arg: arg, Call: func(ctx context.Context, c *coordination.Coordinator) error {
			return call(c)
		}})
	}
	if !a.conc {
		s.NoLostReply = "a consumptive decision holds nothing to undo; a re-send is recognised by its id (TestLostReplyConsumesOnce)"
	} else {
		s.LostReply = &contract.LostReply{
			Op: func(ctx context.Context, c *coordination.Coordinator, name string) error {
				l, err := a.new(c, name)
				if err != nil {
					return err
				}
				defer l.Close()
				le, err := l.Allow(ctx, 1)
				if err == nil {
					return fmt.Errorf("Allow with a lost reply returned a lease (acquired=%v)", le.Acquired())
				}
				return err
			},
			Clean: func(ctx context.Context, raw redis.UniversalClient, key func(string) string, name string) (bool, error) {
				n, err := raw.Exists(ctx, key(name)).Result()
				return n == 0, err
			},
		}
	}
	return s
}

// scenario is one use of a limiter of capacity 2 named name: Allow
// granted, a probe, Wait granted, Allow refused (exhausted), a Wait whose
// deadline comes before the retry time (returns at once; a concurrency
// Wait gives up at its deadline); for concurrency limiters then the two
// releases.
func (a algorithm) scenario(name string) []contract.Step {
	// One limiter per coordinator: the suite may run later steps on
	// another coordinator (same prefix, another client).
	lims := map[*coordination.Coordinator]*ratelimit.Limiter{}
	lim := func(c *coordination.Coordinator) (*ratelimit.Limiter, error) {
		if l, ok := lims[c]; ok {
			return l, nil
		}
		l, err := a.new(c, name)
		if err == nil {
			lims[c] = l
		}
		return l, err
	}
	var first, second ratelimit.Lease
	steps := []contract.Step{
		{Name: "Allow granted", Op: hooks.RateLimitAcquire, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
			l, err := lim(c)
			if err != nil {
				return err
			}
			if first, err = l.Allow(ctx, 1); err != nil {
				return err
			}
			return check(first, true, 1, false)
		}},
		{Name: "probe", Op: hooks.RateLimitAcquire, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
			l, err := lim(c)
			if err != nil {
				return err
			}
			le, err := l.Allow(ctx, 0)
			if err != nil {
				return err
			}
			return check(le, true, 1, false)
		}},
		{Name: "Wait granted", Op: hooks.RateLimitAcquire, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
			l, err := lim(c)
			if err != nil {
				return err
			}
			if second, err = l.Wait(ctx, 1); err != nil {
				return err
			}
			return check(second, true, 0, false)
		}},
		{Name: "Allow refused (exhausted)", Op: hooks.RateLimitAcquire, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
			l, err := lim(c)
			if err != nil {
				return err
			}
			le, err := l.Allow(ctx, 1)
			if err != nil {
				return err
			}
			// Window, bucket and GCRA refusals carry RetryAfter; a
			// concurrency refusal cannot know when a holder finishes.
			return check(le, false, 0, !a.conc)
		}},
	}
	if a.conc {
		// Nobody knows when a holder finishes: Wait waits until its
		// context ends.
		steps = append(steps, contract.Step{Name: "Wait giving up", Op: hooks.RateLimitAcquire, Outcome: hooks.Canceled, Run: func(ctx context.Context, c *coordination.Coordinator) error {
			l, err := lim(c)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			if _, err := l.Wait(ctx, 1); !errors.Is(err, coordination.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("want ErrNotAcquired and DeadlineExceeded, got %v", err)
			}
			if q := l.Statistics().QueuedPermits; q != 0 {
				return fmt.Errorf("%d permits still queued after giving up", q)
			}
			return nil
		}})
	} else {
		// The server's retry time (a minute) is past the deadline: Wait
		// returns the refusal at once instead of sleeping.
		steps = append(steps, contract.Step{Name: "Wait past its deadline", Op: hooks.RateLimitAcquire, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
			l, err := lim(c)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			start := time.Now()
			le, err := l.Wait(ctx, 1)
			if d := time.Since(start); d > 2*time.Second {
				return fmt.Errorf("Wait took %v; want it to return at once", d)
			}
			var we *ratelimit.WaitError
			switch {
			case !errors.As(err, &we):
				return fmt.Errorf("Wait past its deadline: %v (acquired=%v), want a *ratelimit.WaitError", err, le.Acquired())
			case !errors.Is(err, coordination.ErrNotAcquired) || !we.PastDeadline || we.Denied || we.Err != nil:
				return fmt.Errorf("Wait past its deadline: %+v, want PastDeadline matching ErrNotAcquired", we)
			case we.RetryAfter < 3*time.Second || we.RetryAfter > 2*time.Minute || we.Permits != 1:
				return fmt.Errorf("Wait past its deadline: RetryAfter %v permits %d, want more than the 5 s deadline left and 1", we.RetryAfter, we.Permits)
			case le != (ratelimit.Lease{}):
				return fmt.Errorf("Wait past its deadline returned a lease with its error")
			}
			return nil
		}})
	}
	if !a.conc {
		return steps
	}
	release := func(le *ratelimit.Lease) func(ctx context.Context, c *coordination.Coordinator) error {
		return func(ctx context.Context, c *coordination.Coordinator) error {
			if err := le.Release(ctx); err != nil {
				return err
			}
			if !errors.Is(context.Cause(le.Context()), coordination.ErrReleased) {
				return fmt.Errorf("released lease's context cause %v, want ErrReleased", context.Cause(le.Context()))
			}
			return nil
		}
	}
	return append(steps,
		contract.Step{Name: "Release", Op: hooks.RateLimitRelease, OneCommand: true, Run: release(&first)},
		contract.Step{Name: "Release the other", Op: hooks.RateLimitRelease, OneCommand: true, Run: release(&second)},
		contract.Step{Name: "Allow granted after the releases", Op: hooks.RateLimitAcquire, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
			l, err := lim(c)
			if err != nil {
				return err
			}
			if first, err = l.Allow(ctx, 2); err != nil {
				return err
			}
			return check(first, true, 0, false)
		}},
		contract.Step{Name: "Release both permits", Op: hooks.RateLimitRelease, OneCommand: true, Run: release(&first)},
	)
}
