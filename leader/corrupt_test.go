package leader_test

import (
	"context"
	"errors"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/leader"
)

// Garbage in an election's keys (the lease and the fence counter) makes
// Get, Leader and a new contender's campaign return ErrBadState (or an
// answer), never a panic; the sitting leader's renewal ends its term with
// a typed cause.
func TestCorruptedStateIsTyped(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		testharness.CorruptionTest(t, b, func(t *testing.T, coord *coordination.Coordinator) []testharness.CorruptOp {
			ctx, cancel := context.WithCancel(context.Background())
			elected := make(chan struct{})
			el, err := leader.New(coord, leaseKey, fenceKey, "node-a", leader.WithLeaseDuration(time.Minute),
				leader.OnElected(func(ctx context.Context, _ *leader.Term) error {
					close(elected)
					<-ctx.Done()
					return nil
				}))
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- el.Run(ctx) }()
			t.Cleanup(func() {
				cancel()
				if err := <-done; err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, coordination.ErrBadState) {
					t.Errorf("Run: %v", err)
				}
			})
			select {
			case <-elected:
			case <-time.After(10 * time.Second):
				t.Fatal("not elected")
			}
			return []testharness.CorruptOp{
				{Name: "Get", Fn: func(ctx context.Context) error { _, err := leader.Get(ctx, coord, leaseKey); return err }},
				{Name: "Leader", Fn: func(ctx context.Context) error { _, err := el.Leader(ctx); return err }},
				{Name: "campaign", Fn: func(ctx context.Context) error {
					other, err := leader.New(coord, leaseKey, fenceKey, "node-b", leader.WithRetryDelay(10*time.Millisecond))
					if err != nil {
						return err
					}
					ctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
					defer cancel()
					if err := other.Run(ctx); !errors.Is(err, context.DeadlineExceeded) {
						return err
					}
					return nil
				}},
			}
		}, nil)
	})
}
