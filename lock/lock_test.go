package lock_test

import (
	"context"
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
