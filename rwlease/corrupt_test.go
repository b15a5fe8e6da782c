package rwlease_test

import (
	"context"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/rwlease"
)

// Garbage in a read-write lease's keys makes every operation return
// ErrBadState (or an answer), never a panic.
func TestCorruptedStateIsTyped(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		testharness.CorruptionTest(t, b, func(t *testing.T, coord *coordination.Coordinator) []testharness.CorruptOp {
			ctx := context.Background()
			doc, err := rwlease.New(coord, "doc")
			if err != nil {
				t.Fatal(err)
			}
			r, err := doc.TryRead(ctx, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			return []testharness.CorruptOp{
				{Name: "Refresh", Fn: func(ctx context.Context) error { _, err := r.Refresh(ctx, time.Minute); return err }},
				{Name: "Verify", Fn: func(ctx context.Context) error { _, err := r.Verify(ctx); return err }},
				{Name: "TryRead", Fn: func(ctx context.Context) error { _, err := doc.TryRead(ctx, time.Minute); return err }},
				{Name: "TryWrite", Fn: func(ctx context.Context) error {
					_, err := doc.TryWrite(ctx, time.Minute)
					return err
				}},
				{Name: "Release", Fn: func(ctx context.Context) error { _, err := r.Release(ctx); return err }},
			}
		}, nil)
	})
}
