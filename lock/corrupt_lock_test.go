package lock_test

import (
	"context"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// Garbage in the lock's key makes every operation return ErrBadState or
// an answer (ErrNotAcquired, false, NotOwned), never a panic.
func TestLockCorruptedStateIsTyped(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		testharness.CorruptionTest(t, b, func(t *testing.T, coord *coordination.Coordinator) []testharness.CorruptOp {
			l, err := tryAcquire(context.Background(), coord, "job", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			return []testharness.CorruptOp{
				{Name: "Refresh", Fn: func(ctx context.Context) error { _, err := l.Refresh(ctx, time.Minute); return err }},
				{Name: "Verify", Fn: func(ctx context.Context) error { _, err := l.Verify(ctx); return err }},
				{Name: "TryAcquire", Fn: func(ctx context.Context) error { _, err := tryAcquire(ctx, coord, "job", time.Minute); return err }},
				{Name: "Acquire", Fn: func(ctx context.Context) error {
					ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
					defer cancel()
					_, err := acquire(ctx, coord, "job", time.Minute)
					if ctx.Err() != nil {
						return nil // waited: the garbage was read as a holder
					}
					return err
				}},
				{Name: "Release", Fn: func(ctx context.Context) error { _, err := l.Release(ctx); return err }},
			}
		}, nil)
	})
}
