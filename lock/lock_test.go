package lock_test

import (
	"context"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/locktest"
	"github.com/coordkit/coordination/internal/testharness"
	"github.com/coordkit/coordination/lock"
	"github.com/coordkit/coordination/lua"
)

func TestMain(m *testing.M) { testharness.Main(m) }

func TestLock(t *testing.T) {
	locktest.Run(t, locktest.Subject{
		Primitive: "lock",
		AcquireOp: hooks.LockAcquire,
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
		BadInputs: []locktest.BadInput{
			{Arg: "key", Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := lock.TryAcquire(ctx, c, "", time.Second)
				return err
			}},
			{Arg: "key", Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := lock.Acquire(ctx, c, "", time.Second)
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
		coord := b.Coordinator(t)
		token, _ := coordination.NewOwnerToken()
		for i := range 2 {
			cmd, err := coord.Eval(ctx, lua.LockAcquire, []string{"k"}, token, 60000)
			if err != nil {
				t.Fatal(err)
			}
			if v, _ := cmd.Int64Slice(); len(v) != 2 || v[0] != 1 {
				t.Fatalf("send %d: reply %v, want acquired", i+1, v)
			}
		}
		if v, err := b.Client(t).Get(ctx, b.Key("k")).Result(); err != nil || v != token {
			t.Fatalf("lock holds %q (%v), want the one token", v, err)
		}
		other, _ := coordination.NewOwnerToken()
		cmd, err := coord.Eval(ctx, lua.LockAcquire, []string{"k"}, other, 60000)
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := cmd.Int64Slice(); len(v) != 2 || v[0] != 0 || v[1] <= 0 || v[1] > 60000 {
			t.Fatalf("other token: %v, want {0, pttl}", v)
		}
	})
}
