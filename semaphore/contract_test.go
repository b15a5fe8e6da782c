package semaphore_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/testkit/contract"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/semaphore"
)

// The contract suite on a semaphore of capacity 2: two holders fill it, a
// third is refused (at once, and after waiting), the first renews,
// verifies, reads the state and both release.
func TestContract(t *testing.T) { contract.Run(t, contractSpec()) }

// The same on a first-in first-out semaphore (WithFIFO): every acquisition
// is semaphore_fifo_acquire, every release semaphore_fifo_release.
func TestContractFIFO(t *testing.T) { contract.Run(t, contractSpec(semaphore.WithFIFO(true))) }

// contractSpec is the contract suite's semaphore, made with opts.
func contractSpec(opts ...semaphore.Option) contract.Spec {
	return contract.Spec{
		Primitive: "semaphore",
		Keys:      func(name string) []string { return []string{name} },
		Metrics: []string{
			"coordination.semaphore.contention",   // the refused TryAcquire and Acquire
			"coordination.semaphore.acquire_wait", // the blocking Acquires (acquired, gave_up)
			"coordination.semaphore.hold_time",    // the releases
		},
		Scenario: func(name string) []contract.Step {
			var p, q *semaphore.Permit
			sem := func(c *coordination.Coordinator) (*semaphore.Semaphore, error) {
				return semaphore.New(c, name, 2, opts...)
			}
			return []contract.Step{
				{Name: "TryAcquireN", Op: hooks.SemaphoreAcquire, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
					s, err := sem(c)
					if err == nil {
						p, err = s.TryAcquireN(ctx, 1, time.Minute)
					}
					return err
				}},
				{Name: "Acquire of the free permit", Op: hooks.SemaphoreAcquire, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
					s, err := sem(c)
					if err == nil {
						q, err = s.Acquire(ctx, time.Minute)
					}
					return err
				}},
				{Name: "contended TryAcquire", Op: hooks.SemaphoreAcquire, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
					s, err := sem(c)
					if err != nil {
						return err
					}
					if _, err := s.TryAcquire(ctx, time.Minute); !errors.Is(err, coordination.ErrNotAcquired) {
						return fmt.Errorf("want ErrNotAcquired, got %v", err)
					}
					return nil
				}},
				{Name: "Acquire giving up", Op: hooks.SemaphoreAcquire, Outcome: hooks.Canceled, Run: func(ctx context.Context, c *coordination.Coordinator) error {
					s, err := sem(c)
					if err != nil {
						return err
					}
					ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
					defer cancel()
					if _, err := s.Acquire(ctx, time.Minute); !errors.Is(err, coordination.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
						return fmt.Errorf("want ErrNotAcquired and DeadlineExceeded, got %v", err)
					}
					return nil
				}},
				{Name: "Refresh", Op: hooks.SemaphoreRenew, OneCommand: true, Run: func(ctx context.Context, _ *coordination.Coordinator) error {
					ok, err := p.Refresh(ctx, time.Minute)
					if err == nil && !ok {
						err = errors.New("Refresh = false for the holder")
					}
					return err
				}},
				{Name: "Verify", Op: hooks.SemaphoreVerify, OneCommand: true, Run: func(ctx context.Context, _ *coordination.Coordinator) error {
					ok, err := p.Verify(ctx)
					if err == nil && !ok {
						err = errors.New("Verify = false for the holder")
					}
					return err
				}},
				{Name: "State", Op: hooks.SemaphoreRead, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
					s, err := sem(c)
					if err != nil {
						return err
					}
					st, err := s.State(ctx)
					if err == nil {
						err = contract.Expect("State", st, semaphore.State{Capacity: 2, Used: 2, Holders: 2})
					}
					return err
				}},
				{Name: "Release", Op: hooks.SemaphoreRelease, OneCommand: true, Run: func(ctx context.Context, _ *coordination.Coordinator) error {
					out, err := p.Release(ctx)
					if err == nil {
						err = contract.Expect("Release", out, coordination.Released)
					}
					return err
				}},
				{Name: "Release of the last permit", Op: hooks.SemaphoreRelease, OneCommand: true, Run: func(ctx context.Context, _ *coordination.Coordinator) error {
					out, err := q.Release(ctx)
					if err == nil {
						err = contract.Expect("Release", out, coordination.Released)
					}
					return err
				}},
				{Name: "SetCapacity", Op: hooks.SemaphoreUpdate, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
					s, err := sem(c)
					if err == nil {
						err = s.SetCapacity(ctx, 3)
					}
					return err
				}},
				{Name: "Drain with no permit held", Op: hooks.SemaphoreDrain, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
					s, err := sem(c)
					if err == nil {
						err = s.Drain(ctx)
					}
					return err
				}},
				{Name: "Resume", Op: hooks.SemaphoreUpdate, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
					s, err := sem(c)
					if err != nil {
						return err
					}
					return s.Resume(ctx)
				}},
				{Name: "State of a capacity set", Op: hooks.SemaphoreRead, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
					s, err := sem(c)
					if err != nil {
						return err
					}
					st, err := s.State(ctx)
					if err == nil {
						err = contract.Expect("State", st, semaphore.State{Capacity: 3, CapacitySet: true})
					}
					return err
				}},
			}
		},
		// An acquisition whose reply is lost took its permits on the server:
		// the owner-checked background cleanup gives them back, leaving a
		// tombstone (no permit).
		LostReply: &contract.LostReply{
			Op: func(ctx context.Context, c *coordination.Coordinator, name string) error {
				s, err := semaphore.New(c, name, 2, opts...)
				if err == nil {
					_, err = s.TryAcquireN(ctx, 2, time.Minute)
				}
				return err
			},
			Clean: func(ctx context.Context, raw redis.UniversalClient, key func(string) string, name string) (bool, error) {
				return noPermit(ctx, raw, key(name))
			},
		},
		BadInputs: []contract.BadInput{
			{Arg: "coord", Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := semaphore.New(nil, "k", 1)
				return err
			}},
			{Arg: "key", Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := semaphore.New(c, "", 1)
				return err
			}},
			{Arg: "capacity", Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := semaphore.New(c, "k", 0)
				return err
			}},
			{Arg: "capacity", Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := semaphore.New(c, "k", semaphore.MaxCapacity+1)
				return err
			}},
			{Arg: "recheck", Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := semaphore.New(c, "k", 1, semaphore.WithRecheck(0))
				return err
			}},
			{Arg: "n", Op: hooks.SemaphoreAcquire, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				s, err := semaphore.New(c, "k", 2)
				if err == nil {
					_, err = s.TryAcquireN(ctx, 3, time.Minute)
				}
				return err
			}},
			{Arg: "n", Op: hooks.SemaphoreAcquire, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				s, err := semaphore.New(c, "k", 2)
				if err == nil {
					_, err = s.AcquireN(ctx, 0, time.Minute)
				}
				return err
			}},
			{Arg: "ttl", Op: hooks.SemaphoreAcquire, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				s, err := semaphore.New(c, "k", 2)
				if err == nil {
					_, err = s.TryAcquire(ctx, -time.Second)
				}
				return err
			}},
			{Arg: "ttl", Op: hooks.SemaphoreAcquire, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				s, err := semaphore.New(c, "k", 2)
				if err == nil {
					_, err = s.Acquire(ctx, 500*time.Microsecond)
				}
				return err
			}},
			{Arg: "semaphore", Op: hooks.SemaphoreAcquire, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				var s *semaphore.Semaphore
				_, err := s.TryAcquire(ctx, time.Minute)
				return err
			}},
			{Arg: "semaphore", Op: hooks.SemaphoreRead, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				var s *semaphore.Semaphore
				_, err := s.State(ctx)
				return err
			}},
			{Arg: "capacity", Op: hooks.SemaphoreUpdate, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				s, err := semaphore.New(c, "k", 2)
				if err == nil {
					err = s.SetCapacity(ctx, 0)
				}
				return err
			}},
			{Arg: "capacity", Op: hooks.SemaphoreUpdate, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				s, err := semaphore.New(c, "k", 2)
				if err == nil {
					err = s.SetCapacity(ctx, -1)
				}
				return err
			}},
			{Arg: "capacity", Op: hooks.SemaphoreUpdate, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				s, err := semaphore.New(c, "k", 2)
				if err == nil {
					err = s.SetCapacity(ctx, semaphore.MaxCapacity+1)
				}
				return err
			}},
			{Arg: "semaphore", Op: hooks.SemaphoreUpdate, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				var s *semaphore.Semaphore
				return s.SetCapacity(ctx, 2)
			}},
			{Arg: "semaphore", Op: hooks.SemaphoreDrain, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				return new(semaphore.Semaphore).Drain(ctx)
			}},
			{Arg: "semaphore", Op: hooks.SemaphoreUpdate, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				var s *semaphore.Semaphore
				return s.Resume(ctx)
			}},
		},
	}
}

// faultCoord returns a coordinator over a fresh client with a fault
// injector, and optionally a meter provider.
func faultCoord(t *testing.T, b *testharness.Backend, mp *sdkmetric.MeterProvider, modify ...func(*redis.Options)) (*coordination.Coordinator, *testharness.ScriptFaults) {
	t.Helper()
	client := b.Client(t, modify...)
	faults := &testharness.ScriptFaults{}
	client.AddHook(faults)
	opts := []coordination.Option{coordination.WithKeyPrefix(b.Prefix())}
	if mp != nil {
		opts = append(opts, coordination.WithMeterProvider(mp))
	}
	coord, err := coordination.New(client, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return coord, faults
}

// warm caches the scripts on the node of name's slot (a fault injected into
// an EVALSHA that would get NOSCRIPT keeps go-redis from falling back to
// EVAL: the command would never run).
func warm(t *testing.T, coord *coordination.Coordinator, name string) {
	t.Helper()
	ctx := context.Background()
	s, err := semaphore.New(coord, name+"warm", 1)
	if err != nil {
		t.Fatal(err)
	}
	p := mustAcquireN(t, s, 1, time.Minute)
	if ok, err := p.Refresh(ctx, time.Minute); !ok || err != nil {
		t.Fatalf("warm-up Refresh = %v, %v", ok, err)
	}
	release(t, p)
}

// waitGone waits up to 5 s for the prefixed key to hold no permit (the
// cleanup of an ambiguous acquisition leaves a tombstone, no permit).
func waitGone(t *testing.T, b *testharness.Backend, name, what string) {
	t.Helper()
	raw := b.Raw(t)
	eventually(t, 5*time.Second, what, func() bool {
		ok, err := noPermit(context.Background(), raw, b.Key(name))
		return err == nil && ok
	})
}

// noPermit reports whether the semaphore key full holds no permit, live or
// expired: it does not exist, or holds only records and tombstones (scored
// below 0).
func noPermit(ctx context.Context, raw redis.UniversalClient, full string) (bool, error) {
	n, err := raw.ZCount(ctx, full, "0", "+inf").Result()
	return n == 0, err
}

// A keep-alive renewal in flight while Release runs (its reply delayed, or
// the renewal itself delayed until after the release) never turns the
// release into a loss: the cause stays ErrReleased and
// coordination.semaphore.lost counts nothing.
func TestRenewalInFlightDuringRelease(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		for _, mode := range []string{"reply delayed", "renewal sent after the release"} {
			t.Run(mode, func(t *testing.T) {
				ctx := context.Background()
				reader := sdkmetric.NewManualReader()
				client := b.Client(t)
				// The first renewal is held in the hook (before it is sent,
				// or with its reply) until the permit is released.
				gate := &renewalGate{sha: semaphore.RefreshScript.Hash(), before: mode != "reply delayed",
					held: make(chan struct{}), open: make(chan struct{}), done: make(chan struct{})}
				client.AddHook(gate)
				t.Cleanup(gate.release)
				coord, err := coordination.New(client, coordination.WithKeyPrefix(b.Prefix()),
					coordination.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
				if err != nil {
					t.Fatal(err)
				}
				const name = "{rr}"
				warm(t, coord, name) // its Refresh passes the gate, not yet armed
				gate.armed.Store(true)
				s, err := semaphore.New(coord, name, 1)
				if err != nil {
					t.Fatal(err)
				}
				// The first renewal comes after a second, with two seconds
				// left on the permit.
				p := mustAcquireN(t, s, 1, 3*time.Second)
				p.KeepAlive()
				select {
				case <-gate.held:
				case <-time.After(10 * time.Second):
					t.Fatal("the keep-alive never renewed")
				}
				if out := release(t, p); out != coordination.Released {
					t.Fatalf("Release = %v", out)
				}
				gate.release()
				select {
				case <-gate.done:
				case <-time.After(10 * time.Second):
					t.Fatal("the held renewal never returned")
				}
				// A Refresh waits for the keep-alive's renewal to be dealt
				// with (a loss would be counted by then), and finds the
				// permit released.
				refreshed := make(chan error, 1)
				go func() {
					ok, err := p.Refresh(ctx, time.Minute)
					if err == nil && ok {
						err = errors.New("Refresh of a released permit succeeded")
					}
					refreshed <- err
				}()
				select {
				case err := <-refreshed:
					if err != nil {
						t.Fatal(err)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("Refresh still waits for the keep-alive's renewal")
				}
				if cause := context.Cause(p.Context()); !errors.Is(cause, coordination.ErrReleased) {
					t.Errorf("cause = %v, want ErrReleased", cause)
				}
				var rm metricdata.ResourceMetrics
				if err := reader.Collect(ctx, &rm); err != nil {
					t.Fatal(err)
				}
				for _, sm := range rm.ScopeMetrics {
					for _, m := range sm.Metrics {
						if m.Name == semaphore.LeaseMetrics.Lost.Name {
							t.Errorf("%s recorded a loss that did not happen", m.Name)
						}
					}
				}
				if mode != "reply delayed" {
					// The late renewal found nothing to revive.
					if n, err := b.Raw(t).Exists(ctx, b.Key(name)).Result(); err != nil || n != 0 {
						t.Fatalf("the released semaphore's key: EXISTS = %v, %v; want 0", n, err)
					}
				}
			})
		}
	}, testharness.RealOnly())
}

// renewalGate is a go-redis hook that, once armed, holds the first call of
// one script (EVALSHA of it, or EVAL of its source) until release: before
// sending it (before) or with its reply. held is closed when the call is
// held, done when it returns to its caller.
type renewalGate struct {
	sha             string
	before          bool
	armed           atomic.Bool
	held, open      chan struct{}
	done            chan struct{}
	taken, released sync.Once
}

func (g *renewalGate) release() { g.released.Do(func() { close(g.open) }) }

func (g *renewalGate) matches(cmd redis.Cmder) bool {
	args := cmd.Args()
	if len(args) < 2 {
		return false
	}
	switch strings.ToLower(cmd.Name()) {
	case "evalsha":
		return fmt.Sprint(args[1]) == g.sha
	case "eval":
		sum := sha1.Sum([]byte(fmt.Sprint(args[1])))
		return hex.EncodeToString(sum[:]) == g.sha
	}
	return false
}

func (g *renewalGate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *renewalGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		first := false
		if g.armed.Load() && g.matches(cmd) {
			g.taken.Do(func() { first = true })
		}
		if !first {
			return next(ctx, cmd)
		}
		defer close(g.done)
		if g.before {
			close(g.held)
			<-g.open
			return next(ctx, cmd)
		}
		err := next(ctx, cmd)
		close(g.held)
		<-g.open
		return err
	}
}

func (g *renewalGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// The acquisition ran but its reply was lost, and go-redis' re-send got
// LOADING (or READONLY): the caller sees that transient error, and the
// permit the first send took is given back all the same.
func TestLostReplyThenLoadingIsCleanedUp(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		for _, fault := range []error{testharness.LoadingError, testharness.ReadOnlyError} {
			t.Run(fault.Error()[:8], func(t *testing.T) {
				ctx := context.Background()
				coord, faults := faultCoord(t, b, nil)
				const name = "{ld}"
				warm(t, coord, name)
				s, err := semaphore.New(coord, name, 3)
				if err != nil {
					t.Fatal(err)
				}
				faults.Add(testharness.Fault{SHA: semaphore.AcquireScript.Hash(), Forward: true, Err: fault})
				_, err = s.TryAcquireN(ctx, 2, time.Minute)
				if err == nil || !coordination.IsTransient(err) || !coordination.IsAmbiguous(err) {
					t.Fatalf("acquire: %v, want a transient, ambiguous error", err)
				}
				waitGone(t, b, name, "cleanup after a lost reply and "+fault.Error()[:8])
			})
		}
	})
}

// A blocking AcquireN whose first attempt's reply was lost (it took the
// permits) and whose later attempts get an error reply until its context
// ends leaves no orphan, even on a client that never re-sends (MaxRetries
// -1, where one error reply alone proves nothing ran).
func TestBlockingAcquireKeepsAmbiguity(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord, faults := faultCoord(t, b, nil, func(o *redis.Options) { o.MaxRetries = -1 })
		const name = "{ba}"
		warm(t, coord, name)
		s, err := semaphore.New(coord, name, 2)
		if err != nil {
			t.Fatal(err)
		}
		faults.Add(testharness.Fault{SHA: semaphore.AcquireScript.Hash(), Forward: true, Err: testharness.ErrLostReply})
		faults.Add(testharness.Fault{SHA: semaphore.AcquireScript.Hash(), Times: -1, Err: testharness.LoadingError})
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		_, err = s.AcquireN(cctx, 2, time.Minute)
		cancel()
		if errors.Is(err, coordination.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, testharness.LoadingError) {
			t.Fatalf("blocking acquire: %v, want it to give up at its deadline with the last attempt's LOADING, not as contention", err)
		}
		if faults.Hits() < 2 {
			t.Fatalf("only %d faulted attempts", faults.Hits())
		}
		waitGone(t, b, name, "cleanup after an ambiguous first attempt")
		faults.Clear()
	})
}
