package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/testkit/contract"
	"github.com/coordkit/coordination/ratelimit"
)

// algorithm is one limiter constructor under the contract suite, with
// capacity 2 and a time scale of a minute (nothing returns during a
// scenario).
type algorithm struct {
	name string
	new  func(c *coordination.Coordinator, key string, opts ...ratelimit.Option) (*ratelimit.Limiter, error)
	// newConc, set instead of new, builds a concurrency limiter.
	newConc func(c *coordination.Coordinator, key string, opts ...ratelimit.Option) (*ratelimit.ConcurrencyLimiter, error)
	conc    bool
	// bad are its invalid settings, by the argument they must name.
	bad map[string]func(c *coordination.Coordinator) error
}

func constructorErr(_ *ratelimit.Limiter, err error) error { return err }

func concErr(_ *ratelimit.ConcurrencyLimiter, err error) error { return err }

// construct builds a's limiter and closes it, returning the error.
func (a algorithm) construct(c *coordination.Coordinator, key string, opts ...ratelimit.Option) error {
	if a.conc {
		l, err := a.newConc(c, key, opts...)
		if err == nil {
			_ = l.Close()
		}
		return err
	}
	l, err := a.new(c, key, opts...)
	if err == nil {
		_ = l.Close()
	}
	return err
}

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
	{name: "throttle",
		new: func(c *coordination.Coordinator, key string, opts ...ratelimit.Option) (*ratelimit.Limiter, error) {
			return ratelimit.New(c, key, ratelimit.Throttle{Limit: 2, Quiet: time.Minute}, opts...)
		},
		bad: map[string]func(c *coordination.Coordinator) error{
			"limit": func(c *coordination.Coordinator) error {
				return constructorErr(ratelimit.New(c, "k", ratelimit.Throttle{Quiet: time.Minute}))
			},
			"quiet": func(c *coordination.Coordinator) error {
				return constructorErr(ratelimit.New(c, "k", ratelimit.Throttle{Limit: 1, Quiet: 1500 * time.Microsecond}))
			},
		}},
	{name: "sliding log",
		new: func(c *coordination.Coordinator, key string, opts ...ratelimit.Option) (*ratelimit.Limiter, error) {
			return ratelimit.New(c, key, ratelimit.SlidingLog{Limit: 2, Window: time.Minute}, opts...)
		},
		bad: map[string]func(c *coordination.Coordinator) error{
			"limit": func(c *coordination.Coordinator) error {
				return constructorErr(ratelimit.New(c, "k", ratelimit.SlidingLog{Limit: 1001, Window: time.Minute}))
			},
			"window": func(c *coordination.Coordinator) error {
				return constructorErr(ratelimit.New(c, "k", ratelimit.SlidingLog{Limit: 1, Window: time.Millisecond - time.Microsecond}))
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
		newConc: func(c *coordination.Coordinator, key string, opts ...ratelimit.Option) (*ratelimit.ConcurrencyLimiter, error) {
			return ratelimit.NewConcurrency(c, key, 2, append([]ratelimit.Option{ratelimit.WithLeaseDuration(time.Minute)}, opts...)...)
		},
		bad: map[string]func(c *coordination.Coordinator) error{
			"limit": func(c *coordination.Coordinator) error {
				return concErr(ratelimit.NewConcurrency(c, "k", 0))
			},
			"leaseDuration": func(c *coordination.Coordinator) error {
				return concErr(ratelimit.NewConcurrency(c, "k", 1, ratelimit.WithLeaseDuration(10*time.Millisecond)))
			},
		}},
}

func TestContract(t *testing.T) {
	for _, a := range algorithms {
		t.Run(a.name, func(t *testing.T) { contract.Run(t, a.spec()) })
	}
}

// check returns an error unless le is as wanted.
func check(le ratelimit.Decision, acquired bool, available int64, retry bool) error {
	_, hasRetry := le.RetryAfter()
	if le.Allowed() != acquired || le.Available() != available || hasRetry != retry {
		return fmt.Errorf("decision allowed=%v available=%d RetryAfter=%v, want %v %d %v",
			le.Allowed(), le.Available(), hasRetry, acquired, available, retry)
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
			return a.construct(nil, "k")
		}},
		{Arg: "key", Call: func(ctx context.Context, c *coordination.Coordinator) error {
			return a.construct(c, "")
		}},
		{Arg: "queueLimit", Call: func(ctx context.Context, c *coordination.Coordinator) error {
			return a.construct(c, "k", ratelimit.WithQueue(-1, ratelimit.OldestFirst))
		}},
		{Arg: "queueOrder", Call: func(ctx context.Context, c *coordination.Coordinator) error {
			return a.construct(c, "k", ratelimit.WithQueue(1, ratelimit.QueueOrder(7)))
		}},
		{Arg: "failureMode", Call: func(ctx context.Context, c *coordination.Coordinator) error {
			return a.construct(c, "k", ratelimit.WithFailureMode(ratelimit.FailureMode(7)))
		}},
	}
	if !a.conc {
		s.BadInputs = append(s.BadInputs, contract.BadInput{Arg: "leaseDuration", Call: func(ctx context.Context, c *coordination.Coordinator) error {
			return a.construct(c, "k", ratelimit.WithLeaseDuration(time.Minute)) // NewConcurrency's option
		}})
	}
	for _, verb := range []string{"Allow", "Wait"} {
		for _, permits := range []int{-1, 0} {
			if permits == 0 && !a.conc {
				continue // a consumptive probe
			}
			s.BadInputs = append(s.BadInputs, contract.BadInput{Arg: "permits", Op: hooks.RateLimitAcquire, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				if a.conc {
					l, err := a.newConc(c, "k")
					if err != nil {
						return err
					}
					defer l.Close()
					if verb == "Allow" {
						_, err = l.TryAcquire(ctx, permits)
					} else {
						_, err = l.Acquire(ctx, permits)
					}
					return err
				}
				l, err := a.new(c, "k")
				if err != nil {
					return err
				}
				defer l.Close()
				if verb == "Allow" {
					_, err = l.Allow(ctx, permits)
				} else {
					_, err = l.Wait(ctx, permits)
				}
				return err
			}})
		}
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
				l, err := a.newConc(c, name)
				if err != nil {
					return err
				}
				defer l.Close()
				if _, err := l.TryAcquire(ctx, 1); err != nil {
					return err
				}
				return errors.New("TryAcquire with a lost reply returned a lease")
			},
			Clean: func(ctx context.Context, raw redis.UniversalClient, key func(string) string, name string) (bool, error) {
				// Clean: no lease left; the cleanup's tombstones ("0:...!")
				// and the settings member hold nothing.
				ms, err := raw.ZRange(ctx, key(name), 0, -1).Result()
				for _, m := range ms {
					if m != "#" && !(strings.HasPrefix(m, "0:") && strings.HasSuffix(m, "!")) {
						return false, err
					}
				}
				return err == nil, err
			},
		}
	}
	return s
}

// scenario is one use of a limiter of capacity 2 named name: Allow
// granted, a probe, Wait granted, Allow refused (exhausted), a Wait whose
// deadline comes before the retry time (returns at once). A concurrency
// limiter runs concScenario.
func (a algorithm) scenario(name string) []contract.Step {
	if a.conc {
		return a.concScenario(name)
	}
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
	return []contract.Step{
		{Name: "Allow granted", Op: hooks.RateLimitAcquire, OneCommand: true, SentOnce: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
			l, err := lim(c)
			if err != nil {
				return err
			}
			d, err := l.Allow(ctx, 1)
			if err != nil {
				return err
			}
			return check(d, true, 1, false)
		}},
		{Name: "probe", Op: hooks.RateLimitAcquire, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
			l, err := lim(c)
			if err != nil {
				return err
			}
			d, err := l.Allow(ctx, 0)
			if err != nil {
				return err
			}
			return check(d, true, 1, false)
		}},
		{Name: "Wait granted", Op: hooks.RateLimitAcquire, OneCommand: true, SentOnce: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
			l, err := lim(c)
			if err != nil {
				return err
			}
			d, err := l.Wait(ctx, 1)
			if err != nil {
				return err
			}
			return check(d, true, 0, false)
		}},
		{Name: "Allow refused (exhausted)", Op: hooks.RateLimitAcquire, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
			l, err := lim(c)
			if err != nil {
				return err
			}
			d, err := l.Allow(ctx, 1)
			if err != nil {
				return err
			}
			// Window, bucket and GCRA refusals carry RetryAfter.
			return check(d, false, 0, true)
		}},
		// The server's retry time (a minute) is past the deadline: Wait
		// returns the refusal at once instead of sleeping.
		{Name: "Wait past its deadline", Op: hooks.RateLimitAcquire, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
			l, err := lim(c)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			start := time.Now()
			d, err := l.Wait(ctx, 1)
			// At once: before the deadline, which a Wait that slept (until
			// the deadline or the retry time) would have reached; a wall
			// clock bound shorter than it, a stall could exceed.
			if ended := ctx.Err(); ended != nil {
				return fmt.Errorf("Wait returned after its context ended (%v, after %v); want it to return at once", ended, time.Since(start))
			}
			var we *ratelimit.WaitError
			switch {
			case !errors.As(err, &we):
				return fmt.Errorf("Wait past its deadline: %v (allowed=%v), want a *ratelimit.WaitError", err, d.Allowed())
			case !errors.Is(err, coordination.ErrNotAcquired) || !we.PastDeadline || we.Denied || we.Err != nil:
				return fmt.Errorf("Wait past its deadline: %+v, want PastDeadline matching ErrNotAcquired", we)
			case we.RetryAfter < 3*time.Second || we.RetryAfter > 2*time.Minute || we.Permits != 1:
				return fmt.Errorf("Wait past its deadline: RetryAfter %v permits %d, want more than the 5 s deadline left and 1", we.RetryAfter, we.Permits)
			case d != (ratelimit.Decision{}):
				return fmt.Errorf("Wait past its deadline returned a decision with its error")
			}
			return nil
		}},
	}
}

// concScenario is one use of a concurrency limiter of 2 named name:
// TryAcquire granted, Acquire granted, TryAcquire refused (exhausted), an
// Acquire giving up at its deadline, a Refresh and a Verify of a lease,
// the two releases, TryAcquire of both permits and its release.
func (a algorithm) concScenario(name string) []contract.Step {
	lims := map[*coordination.Coordinator]*ratelimit.ConcurrencyLimiter{}
	lim := func(c *coordination.Coordinator) (*ratelimit.ConcurrencyLimiter, error) {
		if l, ok := lims[c]; ok {
			return l, nil
		}
		l, err := a.newConc(c, name)
		if err == nil {
			lims[c] = l
		}
		return l, err
	}
	// held checks a granted lease of n permits and the permits the
	// limiter saw free.
	held := func(l *ratelimit.ConcurrencyLimiter, le *ratelimit.ConcurrencyLease, n int, available int64) error {
		if le.N() != n || le.FailedOpen() || le.Remaining() <= 0 || le.Key() != name || len(le.Token()) != 22 {
			return fmt.Errorf("lease N=%d failedOpen=%v remaining=%v key=%q token=%q, want %d permits held on %q", le.N(), le.FailedOpen(), le.Remaining(), le.Key(), le.Token(), n, name)
		}
		if got := l.Statistics().AvailablePermits; got != available {
			return fmt.Errorf("available %d, want %d", got, available)
		}
		return nil
	}
	var first, second *ratelimit.ConcurrencyLease
	release := func(le **ratelimit.ConcurrencyLease) func(ctx context.Context, c *coordination.Coordinator) error {
		return func(ctx context.Context, c *coordination.Coordinator) error {
			out, err := (*le).Release(ctx)
			if err != nil {
				return err
			}
			// A re-sent release finds its entry gone: AlreadyReleased (the
			// script keeps no release mark).
			if out != coordination.Released && out != coordination.AlreadyReleased {
				return fmt.Errorf("Release = %v, want Released", out)
			}
			if !errors.Is(context.Cause((*le).Context()), coordination.ErrReleased) {
				return fmt.Errorf("released lease's context cause %v, want ErrReleased", context.Cause((*le).Context()))
			}
			return nil
		}
	}
	return []contract.Step{
		{Name: "TryAcquire granted", Op: hooks.RateLimitAcquire, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
			l, err := lim(c)
			if err != nil {
				return err
			}
			if first, err = l.TryAcquire(ctx, 1); err != nil {
				return err
			}
			return held(l, first, 1, 1)
		}},
		{Name: "Acquire granted", Op: hooks.RateLimitAcquire, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
			l, err := lim(c)
			if err != nil {
				return err
			}
			if second, err = l.Acquire(ctx, 1); err != nil {
				return err
			}
			return held(l, second, 1, 0)
		}},
		{Name: "TryAcquire refused (exhausted)", Op: hooks.RateLimitAcquire, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
			l, err := lim(c)
			if err != nil {
				return err
			}
			le, err := l.TryAcquire(ctx, 1)
			var we *ratelimit.WaitError
			// A concurrency refusal cannot know when a holder finishes.
			if le != nil || !errors.As(err, &we) || !errors.Is(err, coordination.ErrNotAcquired) || we.RetryAfter != 0 || we.Denied || we.Err != nil {
				return fmt.Errorf("TryAcquire refused: %v, %v; want a *ratelimit.WaitError without RetryAfter", le, err)
			}
			if got := l.Statistics().AvailablePermits; got != 0 {
				return fmt.Errorf("available %d, want 0", got)
			}
			return nil
		}},
		// Nobody knows when a holder finishes: Acquire waits until its
		// context ends.
		{Name: "Acquire giving up", Op: hooks.RateLimitAcquire, Outcome: hooks.Canceled, Run: func(ctx context.Context, c *coordination.Coordinator) error {
			l, err := lim(c)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			if _, err := l.Acquire(ctx, 1); !errors.Is(err, coordination.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("want ErrNotAcquired and DeadlineExceeded, got %v", err)
			}
			if q := l.Statistics().QueuedPermits; q != 0 {
				return fmt.Errorf("%d permits still queued after giving up", q)
			}
			return nil
		}},
		{Name: "Refresh", Op: hooks.RateLimitRenew, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
			ok, err := first.Refresh(ctx, time.Minute)
			if err == nil && !ok {
				return errors.New("Refresh of a held lease = false")
			}
			return err
		}},
		{Name: "Verify", Op: hooks.RateLimitVerify, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
			ok, err := second.Verify(ctx)
			if err == nil && !ok {
				return errors.New("Verify of a held lease = false")
			}
			return err
		}},
		{Name: "Release", Op: hooks.RateLimitRelease, OneCommand: true, Run: release(&first)},
		{Name: "Release the other", Op: hooks.RateLimitRelease, OneCommand: true, Run: release(&second)},
		{Name: "TryAcquire granted after the releases", Op: hooks.RateLimitAcquire, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
			l, err := lim(c)
			if err != nil {
				return err
			}
			if first, err = l.TryAcquire(ctx, 2); err != nil {
				return err
			}
			return held(l, first, 2, 0)
		}},
		{Name: "Release both permits", Op: hooks.RateLimitRelease, OneCommand: true, Run: release(&first)},
	}
}
