package fencing_test

import (
	"context"
	"errors"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/fencing"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// Garbage in the lease, the counter or a guarded resource makes every
// operation return ErrBadState (a wrong Redis type and an overflowing counter included)
// or an answer, never a panic.
func TestFencingCorruptedStateIsTyped(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		testharness.CorruptionTest(t, b, func(t *testing.T, coord *coordination.Coordinator) []testharness.CorruptOp {
			ctx := context.Background()
			m, err := fencing.New(coord, "{job}:lease", "{job}:fence")
			if err != nil {
				t.Fatal(err)
			}
			res, err := fencing.NewGuarded(coord, "res")
			if err != nil {
				t.Fatal(err)
			}
			l, err := m.TryAcquire(ctx, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := res.Set(ctx, l.FencingToken(), []byte("v"), time.Minute); err != nil {
				t.Fatal(err)
			}
			return []testharness.CorruptOp{
				{Name: "Refresh", Fn: func(ctx context.Context) error { _, err := l.Refresh(ctx, time.Minute); return err }},
				{Name: "Verify", Fn: func(ctx context.Context) error { _, err := l.Verify(ctx); return err }},
				{Name: "TryAcquire", Fn: func(ctx context.Context) error {
					_, err := m.TryAcquire(ctx, time.Minute)
					return err
				}},
				{Name: "Guarded.Set", Fn: func(ctx context.Context) error {
					_, _, err := res.Set(ctx, l.FencingToken()+1, []byte("w"), time.Minute)
					return err
				}},
				{Name: "Guarded.Get", Fn: func(ctx context.Context) error { _, _, _, err := res.Get(ctx); return err }},
				{Name: "Release", Fn: func(ctx context.Context) error { _, err := l.Release(ctx); return err }},
			}
		}, func(err error) bool { return errors.Is(err, coordination.ErrBadState) })
	})
}
