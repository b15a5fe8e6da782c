package lock_test

import (
	"context"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/contract"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/locktest"
	"github.com/coordkit/coordination/internal/testharness"
	"github.com/coordkit/coordination/lock"
)

func TestMain(m *testing.M) { testharness.Main(m) }

func TestLock(t *testing.T) {
	locktest.Run(t, locktest.Subject{
		Primitive: "lock",
		AcquireOp: hooks.LockAcquire, RenewOp: hooks.LockRenew, VerifyOp: hooks.LockVerify, ReleaseOp: hooks.LockRelease,
		AcquireSHA: engine.LockAcquire.Hash(), RefreshSHA: engine.LockRefresh.Hash(),
		Metrics: []string{"coordination.lock.contention", "coordination.lock.hold_time", "coordination.lock.acquire_wait"},
		Acquire: func(ctx context.Context, c *coordination.Coordinator, name string, ttl time.Duration, block bool) (locktest.Handle, error) {
			var l *lock.Lock
			var err error
			if block {
				l, err = lock.Acquire(ctx, c, name, ttl)
			} else {
				l, err = lock.TryAcquire(ctx, c, name, ttl)
			}
			if l == nil {
				return nil, err
			}
			return l, err
		},
		LeaseKey: func(name string) string { return name },
		BadInputs: []contract.BadInput{
			{Arg: "key", Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := lock.TryAcquire(ctx, c, "", time.Second)
				return err
			}},
			{Arg: "key", Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := lock.Acquire(ctx, c, "", time.Second)
				return err
			}},
			{Arg: "ttl", Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := lock.TryAcquire(ctx, c, "k", 0)
				return err
			}},
			{Arg: "coord", Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := lock.TryAcquire(ctx, nil, "k", time.Second)
				return err
			}},
		},
	})
}

// A re-sent acquire (go-redis re-sends after a lost reply) with the same
// owner token yields one lock held by that token.
func TestReSentAcquireIsOneLock(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		e, _ := engine.Of(b.Coordinator(t))
		token, _ := engine.NewToken()
		for i := range 2 {
			g, err := engine.LockAcquire.Run(ctx, e, e.Key("k"), token, 60000)
			if err != nil {
				t.Fatal(err)
			}
			if !g.Acquired {
				t.Fatalf("send %d: %+v, want acquired", i+1, g)
			}
		}
		if v, err := b.Client(t).Get(ctx, b.Key("k")).Result(); err != nil || v != token {
			t.Fatalf("lock holds %q (%v), want the one token", v, err)
		}
		other, _ := engine.NewToken()
		g, err := engine.LockAcquire.Run(ctx, e, e.Key("k"), other, 60000)
		if err != nil {
			t.Fatal(err)
		}
		if g.Acquired || g.RetryIn <= 0 || g.RetryIn > time.Minute {
			t.Fatalf("other token: %+v, want not acquired with the holder's TTL", g)
		}
	})
}
