package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// A reservation settled below its estimate after its grant has left a
// sliding window or a sliding log gives nothing back: the permits left
// with the grant, and the window now holds only later grants, which a
// give-back must not free (a new user's finding: the log gave back a
// later grant's permit and 4 were granted within 1 ms against a limit of
// 3 a second). Redis and the in-process limiter alike.
func TestSettleAfterTheGrantLeftGivesNothing(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		const win = 400 * time.Millisecond
		for _, tc := range []struct {
			name string
			s    Settings
		}{
			{"log", SlidingLog{Limit: 3, Window: win}},
			{"sliding", SlidingWindow{Limit: 3, Window: win, Segments: 4}},
		} {
			for _, local := range []bool{false, true} {
				name := tc.name
				var l *Limiter
				var err error
				if local {
					name += "/local"
					l, err = NewLocal(tc.s)
				} else {
					l, err = New(b.Coordinator(t), "late:"+tc.name, tc.s)
				}
				if err != nil {
					t.Fatal(err)
				}
				t.Run(name, func(t *testing.T) {
					r, err := l.Reserve(ctx, 1)
					if err != nil || !r.Allowed() {
						t.Fatalf("Reserve: %v %v", r, err)
					}
					if local {
						time.Sleep(win + 150*time.Millisecond)
					} else {
						b.Advance(win + 150*time.Millisecond)
					}
					for i := range 3 {
						if res, err := l.Allow(ctx, 1); err != nil || !res.Allowed() {
							t.Fatalf("grant %d of 3 after the reservation left: %+v %v", i+1, res, err)
						}
					}
					if back, err := r.Settle(ctx, 0); err != nil || back != 0 {
						t.Fatalf("Settle(0) after the grant left = %d, %v; want 0", back, err)
					}
					if res, err := l.Allow(ctx, 1); err != nil || res.Allowed() {
						t.Fatalf("a fourth grant within the window: %+v %v; want a refusal", res, err)
					}
				})
			}
		}
	})
}
