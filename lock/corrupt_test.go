package lock_test

import (
	"context"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// Garbage in the hash of named field leases makes every operation return
// ErrBadState (or an answer), never a panic.
func TestFieldLeaseCorruptedStateIsTyped(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		testharness.CorruptionTest(t, b, func(t *testing.T, coord *coordination.Coordinator) []testharness.CorruptOp {
			ctx := context.Background()
			l, err := tryAcquireField(ctx, coord, "jobs", "job-1", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			return []testharness.CorruptOp{
				{Name: "Refresh", Fn: func(ctx context.Context) error { _, err := l.Refresh(ctx, time.Minute); return err }},
				{Name: "Verify", Fn: func(ctx context.Context) error { _, err := l.Verify(ctx); return err }},
				{Name: "FieldSet.TryAcquire same", Fn: func(ctx context.Context) error {
					_, err := tryAcquireField(ctx, coord, "jobs", "job-1", time.Minute)
					return err
				}},
				{Name: "FieldSet.TryAcquire other", Fn: func(ctx context.Context) error {
					_, err := tryAcquireField(ctx, coord, "jobs", "job-2", time.Minute)
					return err
				}},
				{Name: "Release", Fn: func(ctx context.Context) error { _, err := l.Release(ctx); return err }},
			}
		}, nil)
	}, testharness.HashFieldTTLOnly())
}
