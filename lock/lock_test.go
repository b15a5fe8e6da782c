package lock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/lockcore"
	"github.com/coordkit/coordination/internal/testkit/contract"
	"github.com/coordkit/coordination/internal/testkit/locktest"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/lock"
)

func TestMain(m *testing.M) { testharness.Main(m) }

func TestLock(t *testing.T) {
	locktest.Run(t, locktest.Subject{
		Primitive: "lock",
		AcquireOp: hooks.LockAcquire, RenewOp: hooks.LockRenew, VerifyOp: hooks.LockVerify, ReleaseOp: hooks.LockRelease,
		AcquireSHA: lockcore.Acquire.Hash(), RefreshSHA: lockcore.Refresh.Hash(), FirstCommand: "set",
		Metrics: []string{"coordination.lock.contention", "coordination.lock.hold_time", "coordination.lock.acquire_wait"},
		Acquire: func(ctx context.Context, c *coordination.Coordinator, name string, ttl time.Duration, block bool) (locktest.Handle, error) {
			m, err := lock.New(c, name)
			if err != nil {
				return nil, err
			}
			var l *lock.Lock
			if block {
				l, err = m.Acquire(ctx, ttl)
			} else {
				l, err = m.TryAcquire(ctx, ttl)
			}
			if l == nil {
				return nil, err
			}
			return l, err
		},
		LeaseKey: func(name string) string { return name },
		BadInputs: []contract.BadInput{
			{Arg: "key", Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := lock.New(c, "")
				return err
			}},
			{Arg: "key", Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := lock.New(c, strings.Repeat("k", check.MaxKeyBytes+1))
				return err
			}},
			{Arg: "ttl", Op: hooks.LockAcquire, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				m, err := lock.New(c, "k")
				if err != nil {
					return err
				}
				_, err = m.TryAcquire(ctx, 0)
				return err
			}},
			{Arg: "ttl", Op: hooks.LockAcquire, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				m, err := lock.New(c, "k")
				if err != nil {
					return err
				}
				_, err = m.Acquire(ctx, 999*time.Microsecond)
				return err
			}},
			{Arg: "coord", Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := lock.New(nil, "k")
				return err
			}},
			{Arg: "mutex", Op: hooks.LockAcquire, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				var m *lock.Mutex
				_, err := m.TryAcquire(ctx, time.Second)
				return err
			}},
			{Arg: "mutex", Op: hooks.LockAcquire, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := new(lock.Mutex).Acquire(ctx, time.Second)
				return err
			}},
		},
	})
}

// A re-sent acquire (go-redis re-sends after a lost reply) with the same
// owner token yields one lock held by that token: the first attempt's
// SET NX GET finds the token its first send stored (marked by a waiter or
// not), and so does a waiter's acquire script.
func TestReSentAcquireIsOneLock(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		e, _ := engine.Of(b.Coordinator(t))
		raw := b.Client(t)
		token, _ := engine.NewToken()
		other, _ := engine.NewToken()
		for i := range 2 {
			g, err := lockcore.Try.Run(ctx, e, e.Key("k"), token, 60000)
			if err != nil || !g.Acquired {
				t.Fatalf("SET NX GET send %d: %+v, %v; want acquired", i+1, g, err)
			}
		}
		if v, err := raw.Get(ctx, b.Key("k")).Result(); err != nil || v != token {
			t.Fatalf("lock holds %q (%v), want the one token", v, err)
		}
		// A waiter's attempt finds it held, marks it and learns its TTL.
		g, err := lockcore.Acquire.Run(ctx, e, e.Key("k"), other, 60000)
		if err != nil || g.Acquired || g.RetryIn <= 0 || g.RetryIn > time.Minute {
			t.Fatalf("other token: %+v, %v; want not acquired with the holder's TTL", g, err)
		}
		if v, err := raw.Get(ctx, b.Key("k")).Result(); err != nil || v != token+"+" {
			t.Fatalf("lock holds %q (%v), want the token marked by a waiter", v, err)
		}
		// The marked value is still the holder's, for every way in.
		if g, err := lockcore.Try.Run(ctx, e, e.Key("k"), token, 60000); err != nil || !g.Acquired {
			t.Fatalf("SET NX GET re-send on the marked lock: %+v, %v; want acquired", g, err)
		}
		if g, err := lockcore.Acquire.Run(ctx, e, e.Key("k"), token, 60000); err != nil || !g.Acquired {
			t.Fatalf("script re-send on the marked lock: %+v, %v; want acquired", g, err)
		}
		if g, err := lockcore.Try.Run(ctx, e, e.Key("k"), other, 60000); err != nil || g.Acquired || g.RetryIn != 0 {
			t.Fatalf("other token's SET NX GET: %+v, %v; want not acquired, retry time unknown", g, err)
		}
		if v, err := raw.Get(ctx, b.Key("k")).Result(); err != nil || v != token+"+" {
			t.Fatalf("lock holds %q (%v) after the re-sends, want the marked token", v, err)
		}
	})
}

// Through the public API: a TryAcquire re-sent by go-redis (a lost reply)
// holds the lock once, with its token and TTL; a release re-sent the same
// way reports Released (the engine counted two sends, and the lease was
// held when Release began) although its second send found the key gone,
// and leaves no key behind.
func TestReSentTryAcquireAndReleaseThroughTheAPI(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord, hook := b.Resending(t)
		raw := b.Client(t)
		mu, err := lock.New(coord, "k")
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 { // the first round loads the scripts
			hook.Arm()
			l, err := mu.TryAcquire(ctx, time.Minute)
			if n, name := hook.Sent(); err != nil || n != 2 || name != "set" {
				t.Fatalf("round %d: TryAcquire sent %d times (%s): %v; want acquired after 2 sends of SET", i, n, name, err)
			}
			if v, err := raw.Get(ctx, b.Key("k")).Result(); err != nil || v != l.Token() {
				t.Fatalf("lock holds %q (%v), want the one token %q", v, err, l.Token())
			}
			if d, err := raw.PTTL(ctx, b.Key("k")).Result(); err != nil || d <= 0 || d > time.Minute {
				t.Fatalf("lock PTTL %v (%v), want within the TTL", d, err)
			}
			// A waiter's attempt marks it; the holder's re-sent release still
			// reports Released.
			if _, err := mu.TryAcquire(ctx, time.Minute); !errors.Is(err, coordination.ErrNotAcquired) {
				t.Fatalf("second holder: %v, want ErrNotAcquired", err)
			}
			hook.Arm()
			if out, err := l.Release(ctx); err != nil || out != coordination.Released {
				t.Fatalf("re-sent Release = %v, %v; want Released", out, err)
			}
			if n, _ := hook.Sent(); n != 2 {
				t.Fatalf("Release sent %d times, want 2", n)
			}
			if n, err := raw.Exists(ctx, b.Key("k")).Result(); err != nil || n != 0 {
				t.Fatalf("released lock: EXISTS %d (%v), want no key left", n, err)
			}
		}
	})
}
