package ratelimit

import (
	"context"
	"errors"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// Reserve then Settle, on a GCRA limiter and a token bucket: settling
// below the estimate returns the difference; above it, the excess is debt
// that delays later admissions by exactly that many intervals; a second
// Settle, or one after the reservation's timeout, is refused.
func TestReserveThenSettle(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		c := b.Coordinator(t)
		for _, k := range []kind{kGCRA, kBucket} {
			t.Run(string(k), func(t *testing.T) {
				// Reserve 10 then Settle 4: 6 come back.
				l := build(t, c, k, "res:"+string(k), 20, time.Minute)
				r := reserve(t, l, 10)
				if n := available(t, l); n != 10 {
					t.Fatalf("after reserving 10 of 20: %d available", n)
				}
				if back, err := r.Settle(ctx, 4); err != nil || back != 6 {
					t.Fatalf("Settle(4) of 10: %d %v, want 6", back, err)
				}
				if n := available(t, l); n != 16 {
					t.Fatalf("after settling at 4: %d available, want 16", n)
				}
				if _, err := r.Settle(ctx, 4); !errors.Is(err, ErrSettled) {
					t.Fatalf("a second Settle: %v, want ErrSettled", err)
				}

				// Reserve 10 then Settle 15: 5 more are charged; the next
				// permit waits 5 intervals longer (6 instead of 1). The
				// interval is far longer than the calls between (nothing
				// waits for it), and on real servers each RetryAfter is
				// bounded below by the time measured since the reservation.
				const iv = time.Minute
				d := build(t, c, k, "res-debt:"+string(k), 10, iv)
				start := time.Now() // before the reservation's server time
				r = reserve(t, d, 10)
				wantRetrySince(t, b, acquire(t, d, 1), iv, start)
				if back, err := r.Settle(ctx, 15); err != nil || back != -5 {
					t.Fatalf("Settle(15) of 10: %d %v, want -5", back, err)
				}
				wantRetrySince(t, b, acquire(t, d, 1), 6*iv, start)

				// Unsettled past its timeout: settled at the estimate.
				e := build(t, c, k, "res-exp:"+string(k), 20, time.Minute, WithReservationTimeout(50*time.Millisecond))
				r = reserve(t, e, 10)
				time.Sleep(60 * time.Millisecond)
				if _, err := r.Settle(ctx, 2); !errors.Is(err, ErrReservationExpired) {
					t.Fatalf("Settle after the timeout: %v, want ErrReservationExpired", err)
				}
				if n := available(t, e); n != 10 {
					t.Fatalf("after an expired reservation of 10: %d available, want 10", n)
				}
			})
		}
		// Windows and composites (issue 23 item 7): a give-back names the
		// grant, so it returns only what the window still holds of it; an
		// excess is charged to the current window.
		for _, k := range []kind{kFixed, kSliding, kComp} {
			t.Run(string(k), func(t *testing.T) {
				l := build(t, c, k, "res-w:"+string(k), 20, time.Minute)
				capacity := int64(l.spec().capacity)
				r := reserve(t, l, 10)
				if back, err := r.Settle(ctx, 4); err != nil || back != 6 {
					t.Fatalf("Settle(4) of 10: %d %v, want 6", back, err)
				}
				if n := available(t, l); n != capacity-4 {
					t.Fatalf("after settling at 4: %d available, want %d", n, capacity-4)
				}
				r = reserve(t, l, 5)
				if back, err := r.Settle(ctx, 8); err != nil || back != -3 {
					t.Fatalf("Settle(8) of 5: %d %v, want -3", back, err)
				}
				if n := available(t, l); n != capacity-12 {
					t.Fatalf("after an excess of 3: %d available, want %d", n, capacity-12)
				}
				if k != kFixed || !b.IsMini() {
					return // the window's end needs the server's clock
				}
				// A fixed window's grant whose window ended: its permits
				// came back with the new window; nothing is given back
				// to the new one.
				r = reserve(t, l, 6)
				b.Advance(time.Minute)
				if back, err := r.Settle(ctx, 1); err != nil || back != 0 {
					t.Fatalf("Settle(1) of 6 after its window: %d %v, want 0", back, err)
				}
				if n := available(t, l); n != capacity {
					t.Fatalf("the new window after a late settlement: %d available, want %d", n, capacity)
				}
			})
		}
		g := build(t, c, kGCRA, "res-bad", 5, time.Minute)
		le := acquire(t, g, 1)
		if _, err := le.Settle(ctx, 1); !errors.Is(err, coordination.ErrInvalidArgument) {
			t.Fatalf("Settle of an Allow lease: %v", err)
		}
		r := reserve(t, g, 1)
		if _, err := r.Settle(ctx, -1); !errors.Is(err, coordination.ErrInvalidArgument) {
			t.Fatalf("Settle(-1): %v", err)
		} else if name, _ := check.ArgumentName(err); name != "actual" {
			t.Fatalf("Settle(-1) names %q", name)
		}
		if back, err := r.Settle(ctx, 1); err != nil || back != 0 {
			t.Fatalf("Settle at the estimate: %d %v", back, err)
		}
	})
}

// wantRetrySince checks a refusal whose permit comes back exactly want
// after a grant made after start: RetryAfter is exactly want on miniredis
// (its clock stands still), and on real servers in [want - elapsed, want],
// elapsed being the time measured from start to now (the server's clock
// cannot have moved more meanwhile; 1 ms covers rounding).
func wantRetrySince(t testing.TB, b *testharness.Backend, le Lease, want time.Duration, start time.Time) {
	t.Helper()
	elapsed := time.Since(start)
	ra := wantRetry(t, b, le, want, want)
	if lo := want - elapsed - time.Millisecond; ra < lo {
		t.Fatalf("RetryAfter = %v, want at least %v (%v less %v elapsed since the reservation)", ra, lo, want, elapsed)
	}
}

func reserve(t testing.TB, l *tlim, n int) Lease {
	t.Helper()
	le, err := l.Reserve(context.Background(), n)
	if err != nil || !le.Acquired() {
		t.Fatalf("Reserve(%d): %v acquired=%v", n, err, le.Acquired())
	}
	return le
}
