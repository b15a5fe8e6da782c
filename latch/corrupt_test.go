package latch_test

import (
	"context"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/latch"
)

// Garbage in a latch's key (another type, text, negative, empty or
// out-of-range fields) makes every operation return ErrBadState (or an
// answer), never a panic or a silent success on garbage it misreads.
func TestCorruptedStateIsTyped(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		testharness.CorruptionTest(t, b, func(t *testing.T, coord *coordination.Coordinator) []testharness.CorruptOp {
			ctx := context.Background()
			l, err := create(ctx, coord, "job", 3, latch.WithDeadline(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			return []testharness.CorruptOp{
				{Name: "Count", Fn: func(ctx context.Context) error { _, err := l.Count(ctx); return err }},
				{Name: "CountDown", Fn: func(ctx context.Context) error { _, err := l.CountDown(ctx); return err }},
				{Name: "Wait", Fn: func(ctx context.Context) error {
					ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
					defer cancel()
					_, err := l.Wait(ctx)
					return err
				}},
				{Name: "Join", Fn: func(ctx context.Context) error { _, err := join(ctx, coord, "job"); return err }},
				{Name: "Create", Fn: func(ctx context.Context) error { _, err := create(ctx, coord, "job", 2); return err }},
				{Name: "Reset", Fn: func(ctx context.Context) error { _, err := reset(ctx, coord, "job", 2); return err }},
			}
		}, nil)
	})
}
