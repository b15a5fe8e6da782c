package ratelimit

import (
	"context"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// Garbage in a limiter's or a deny list's keys makes every operation
// return ErrBadState (or an answer), never a panic, for every algorithm.
func TestCorruptedStateIsTyped(t *testing.T) {
	for name, s := range map[string]Settings{
		"fixed":       FixedWindow{Limit: 5, Window: time.Minute},
		"sliding":     SlidingWindow{Limit: 5, Window: time.Minute, Segments: 4},
		"bucket":      TokenBucket{Limit: 5, TokensPerPeriod: 1, Period: time.Second},
		"gcra":        GCRA{Burst: 5, Interval: time.Second},
		"composite":   Composite{Components: []Settings{FixedWindow{Limit: 5, Window: time.Minute}, GCRA{Burst: 3, Interval: time.Second}}},
		"concurrency": Concurrency{Limit: 3, LeaseDuration: time.Minute},
	} {
		t.Run(name, func(t *testing.T) {
			testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
				testharness.CorruptionTest(t, b, func(t *testing.T, coord *coordination.Coordinator) []testharness.CorruptOp {
					ctx := context.Background()
					list, err := NewDenyList(coord, "deny")
					if err != nil {
						t.Fatal(err)
					}
					if err := list.Deny(ctx, "mallory"); err != nil {
						t.Fatal(err)
					}
					var l *tlim
					if c, ok := s.(Concurrency); ok {
						l, err = newT(coord, "api", c, WithQueue(4, OldestFirst), WithDenyList(list, "alice"))
					} else {
						l, err = newT(coord, "api", s, WithQueue(4, OldestFirst), WithDenyList(list, "alice"))
					}
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { _ = l.Close() })
					held, err := l.Allow(ctx, 1)
					if err != nil || !held.Acquired() {
						t.Fatalf("Allow: %v %v", held, err)
					}
					ops := []testharness.CorruptOp{
						{Name: "Allow", Fn: func(ctx context.Context) error { _, err := l.Allow(ctx, 1); return err }},
						// Bounded, as every operation, by CorruptionTest's
						// 5 s: no corruption makes it wait (a 50-ms deadline
						// of its own ended its first attempt when the
						// machine stalled, an error that is no answer).
						{Name: "Wait", Fn: func(ctx context.Context) error { _, err := l.Wait(ctx, 1); return err }},
						{Name: "Update", Fn: func(ctx context.Context) error { return l.Update(ctx, s) }},
						{Name: "Release", Fn: func(ctx context.Context) error { return held.Release(ctx) }},
						{Name: "Denied", Fn: func(ctx context.Context) error { list.Invalidate(); _, err := list.Denied(ctx, "mallory"); return err }},
						{Name: "Deny", Fn: func(ctx context.Context) error { return list.Deny(ctx, "eve") }},
						{Name: "Remove", Fn: func(ctx context.Context) error { return list.Remove(ctx, "mallory") }},
					}
					switch s.(type) {
					case TokenBucket, GCRA:
						ops = append(ops, testharness.CorruptOp{Name: "Reserve+Settle", Fn: func(ctx context.Context) error {
							r, err := l.Reserve(ctx, 2)
							if err != nil || !r.Acquired() {
								return err
							}
							_, err = r.Settle(ctx, 1)
							return err
						}})
					}
					return ops
				}, nil)
			})
		})
	}
}
