package idempotency_test

import (
	"context"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/idempotency"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// Garbage in a claim's key makes Begin, Complete, Abandon and Forget return
// ErrBadState or an answer, never a panic.
func TestIdempotencyCorruptedStateIsTyped(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		testharness.CorruptionTest(t, b, func(t *testing.T, coord *coordination.Coordinator) []testharness.CorruptOp {
			ctx := context.Background()
			s, err := idempotency.New(coord)
			if err != nil {
				t.Fatal(err)
			}
			done, err := s.Begin(ctx, "done", time.Minute, idempotency.WithFingerprint("fp"))
			if err != nil {
				t.Fatal(err)
			}
			if ok, err := s.Complete(ctx, "done", done.Owner, []byte("result")); err != nil || !ok {
				t.Fatal(ok, err)
			}
			c, err := s.Begin(ctx, "pending", time.Minute, idempotency.WithFingerprint("fp"))
			if err != nil {
				t.Fatal(err)
			}
			ops := []testharness.CorruptOp{
				{Name: "Complete", Fn: func(ctx context.Context) error {
					_, err := s.Complete(ctx, "pending", c.Owner, []byte("r"))
					return err
				}},
				{Name: "Abandon", Fn: func(ctx context.Context) error { _, err := s.Abandon(ctx, "pending", c.Owner); return err }},
			}
			for _, key := range []string{"done", "pending"} {
				ops = append(ops, testharness.CorruptOp{Name: "Begin " + key, Fn: func(ctx context.Context) error {
					_, err := s.Begin(ctx, key, time.Minute, idempotency.WithFingerprint("fp"))
					return err
				}}, testharness.CorruptOp{Name: "Forget " + key, Fn: func(ctx context.Context) error {
					_, err := s.Forget(ctx, key)
					return err
				}})
			}
			return ops
		}, nil)
	})
}
