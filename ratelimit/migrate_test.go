package ratelimit

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// update calls Update and fails the test on error.
func update(t testing.TB, l *tlim, s Settings) {
	t.Helper()
	if err := l.Update(context.Background(), s); err != nil {
		t.Fatalf("Update(%+v): %v", s, err)
	}
}

// Each algorithm's migration rule, with a numeric case: the state before,
// the settings after, what is expected. Exact on miniredis. On real
// servers the fixed window's case is exact (its window is 10 s), and the
// others' counts and RetryAfters are checked against the bounds the
// server's clock, read around each step, gives (timing_test.go): the move
// happens at the first decision after Update, and a stall before it or
// between the steps changes the expected numbers, not the verdict. When
// nothing stalled the bounds are the exact numbers.
func TestMigrationRules(t *testing.T) {
	t.Parallel() // sleeps on real servers
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		c := b.Coordinator(t)
		t.Run("fixed window keeps the count and the end", func(t *testing.T) {
			// Before: limit 5 per 10 s window, 3 used. After: 10 per 20 s.
			// Expected: 7 more in this window, then RetryAfter = this
			// window's end (10 s, not 20 s); the next window lasts 20 s.
			l := build(t, c, kFixed, "mig:fixed", 5, 10*time.Second)
			now := b.Now().Truncate(time.Microsecond)
			left := 10*time.Second - now.Sub(now.Truncate(time.Millisecond))
			wantBurst(t, l, 3, 3, "before")
			update(t, l, FixedWindow{Limit: 10, Window: 20 * time.Second})
			wantBurst(t, l, 8, 7, "after: the new limit, the same count")
			wantRetry(t, b, acquire(t, l, 1), left, 10*time.Second)
			if b.IsMini() {
				b.Advance(left)
				now := b.Now().Truncate(time.Microsecond)
				wantBurst(t, l, 11, 10, "the next window")
				wantRetry(t, b, acquire(t, l, 1), 20*time.Second-now.Sub(now.Truncate(time.Millisecond)), 20*time.Second)
			}
		})
		t.Run("sliding window keeps live segments", func(t *testing.T) {
			// Before: 4 per 800 ms in 4 segments of 200 ms; 3 taken in
			// segment k. After: 6 per 1.6 s in 2 segments of 800 ms.
			// Expected: 3 more; the old 3 are placed in the new segment
			// holding their segment's end T = (k+1)*200 ms, j =
			// ceil(T/800ms)-1, and return at (j+1)*800 ms + 1.6 s.
			from := SlidingWindow{Limit: 4, Window: 800 * time.Millisecond, Segments: 4}
			to := SlidingWindow{Limit: 6, Window: 1600 * time.Millisecond, Segments: 2}
			l := build(t, c, kSliding, "mig:sliding", 4, 800*time.Millisecond)
			sc, m := serverClock(t, b), newSlidingModel(from)
			before := sc.wantBurst(l, m, "before", 3, 3)
			update(t, l, to)
			after := sc.burst(l, 4)
			m.update(after.first, to) // its first request moves the state
			sc.checkBurst(m, "after", after, 3)
			const g = 800 * time.Millisecond
			// t0: on miniredis, the instant of every step.
			t0 := before.first.lo
			end := (t0.UnixMicro()/200000 + 1) * 200000 // T, µs
			j := (end+int64(g/time.Microsecond)-1)/int64(g/time.Microsecond) - 1
			back := time.UnixMicro((j+1)*int64(g/time.Microsecond) + 1600000)
			le, x := sc.allow(l, 1)
			sc.checkOne(m, "the window full", le, x, 1, back.Sub(t0))
			if !le.Acquired() {
				wantRetry(t, b, le, back.Sub(t0), 1600*time.Millisecond+g)
			}
		})
		t.Run("token bucket settles whole periods at the old rate", func(t *testing.T) {
			// Before: 10 of 10 taken, 1 per 1 s, 2.5 s ago. After: limit 5,
			// 2 per 1 s. Expected: 2 whole old periods give 2 tokens (the
			// half period carries on), so 2 now, and a third 0.5 s later
			// when a new period adds 2.
			to := TokenBucket{Limit: 5, TokensPerPeriod: 2, Period: time.Second}
			l := build(t, c, kBucket, "mig:bucket", 10, time.Second)
			sc, m := serverClock(t, b), newBucketModel(TokenBucket{Limit: 10, TokensPerPeriod: 1, Period: time.Second})
			sc.wantBurst(l, m, "before", 10, 10)
			b.Advance(2500 * time.Millisecond)
			update(t, l, to)
			le, x := sc.allow(l, 3)
			m.update(x, to) // this request moves the state
			sc.checkOne(m, "three permits", le, x, 3, 500*time.Millisecond)
			sc.wantBurst(l, m, "after", 3, 2)
			b.Advance(500 * time.Millisecond)
			sc.wantBurst(l, m, "a new period later", 3, 2)
		})
		t.Run("GCRA rescales the debt", func(t *testing.T) {
			// Before: burst 3, one per second, 3 taken 1.5 s ago: 1.5
			// permits of debt. After: burst 3 at 3 per second. Expected:
			// 1.5 × 1/3 s = 500 ms of debt, 1 available, 2 permits in
			// (1.5 + 2 - 3) / 3 s = 166.667 ms (rounded up to 166667 µs).
			from, to := GCRA{Burst: 3, Interval: time.Second}, GCRA{Burst: 3, Rate: 3, Period: time.Second}
			l := build(t, c, kGCRA, "mig:gcra", 3, time.Second)
			sc, m := serverClock(t, b), newGCRAModel(from, to)
			sc.wantBurst(l, m, "before", 3, 3)
			b.Advance(1500 * time.Millisecond)
			update(t, l, to)
			le, x := sc.allow(l, 2)
			m.update(x, to) // this request moves the state
			sc.checkOne(m, "two permits", le, x, 2, 166667*time.Microsecond)
			sc.wantBurst(l, m, "after", 2, 1)
			if !b.IsMini() {
				return // the rest needs a clock exact to the µs
			}
			// Rounding up: a third of a 3 µs permit is 1 µs of debt at 1 µs
			// per permit, not 0.
			r := build(t, c, kGCRA, "mig:gcra-round", 1, 3*time.Microsecond)
			wantBurst(t, r, 1, 1, "before")
			b.Advance(2 * time.Microsecond)
			update(t, r, GCRA{Burst: 1, Interval: time.Microsecond})
			wantRetry(t, b, acquire(t, r, 1), time.Microsecond, time.Microsecond)
		})
	})
}

// Updates that change nothing on the server: an identical update, and an
// update on an absent key (which stays absent). The algorithm cannot
// change.
func TestUpdateNoOpsAndLimits(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		c := b.Coordinator(t)
		l := build(t, c, kGCRA, "upd", 3, time.Minute)
		update(t, l, GCRA{Burst: 4, Interval: time.Minute})
		acquire(t, l, 0)
		if n, _ := raw.Exists(ctx, b.Key("upd")).Result(); n != 0 {
			t.Fatal("an update and a probe created the key")
		}
		acquire(t, l, 1)
		state := dump(t, raw, b.Key("upd"))
		update(t, l, GCRA{Burst: 4, Interval: time.Minute})
		if after := dump(t, raw, b.Key("upd")); after != state {
			t.Fatal("an identical update changed the state")
		}
		for _, s := range []Settings{nil, FixedWindow{Limit: 3, Window: time.Minute}, Composite{Components: []Settings{GCRA{Burst: 1, Interval: time.Second}}}, GCRA{Burst: 0, Interval: time.Second}} {
			if err := l.Update(ctx, s); !errors.Is(err, coordination.ErrInvalidArgument) {
				t.Fatalf("Update(%v): %v, want ErrInvalidArgument", s, err)
			}
		}
		comp := build(t, c, kComp, "upd-comp", 3, time.Minute)
		if err := comp.Update(ctx, Composite{Components: issueComposite.Components[:2]}); !errors.Is(err, coordination.ErrInvalidArgument) {
			t.Fatalf("a composite's structure changed: %v", err)
		}
		// A concurrency limiter's new limit applies to the leases held.
		conc := build(t, c, kConc, "upd-conc", 1, time.Minute)
		held := acquire(t, conc, 1)
		if acquire(t, conc, 1).Acquired() {
			t.Fatal("a second lease under limit 1")
		}
		update(t, conc, Concurrency{Limit: 2, LeaseDuration: time.Minute})
		second := acquire(t, conc, 1)
		if !second.Acquired() {
			t.Fatal("no second lease after raising the limit to 2")
		}
		_ = held.Release(ctx)
		_ = second.Release(ctx)
		l.Close()
		if err := l.Update(ctx, GCRA{Burst: 5, Interval: time.Minute}); !errors.Is(err, coordination.ErrClosed) {
			t.Fatalf("Update after Close: %v", err)
		}
	})
}

// A rolling deploy: two instances with different limits on one key both
// get decisions, never an error, whichever wrote last.
func TestRollingDeployBothDecide(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		for _, k := range every {
			key := "rolling:" + string(k)
			old := build(t, b.Coordinator(t), k, key, 5, time.Minute)
			neu := build(t, b.Coordinator(t), k, key, 10, 2*time.Minute)
			got := 0
			for i := range 30 {
				l := old
				if i%2 == 1 {
					l = neu
				}
				le, err := l.Allow(context.Background(), 1)
				if err != nil {
					t.Fatalf("%s: call %d: %v", k, i, err)
				}
				if le.Acquired() {
					got++
				}
			}
			// The old limit binds its callers, the new one its own: between
			// 5 and 10 granted.
			if got < 5 || got > 10 {
				t.Fatalf("%s: %d of 30 granted across the deploy, want 5..10", k, got)
			}
		}
	})
}

// Update waits for decisions in flight, wakes the local queue, and refuses
// queued requests larger than the new capacity; hooks see it once.
func TestUpdateWakesTheQueue(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		stop := clock(b)
		defer stop()
		ctx := context.Background()
		l := build(t, b.Coordinator(t), kFixed, "upd-queue", 2, time.Minute)
		wantBurst(t, l, 2, 2, "burst")
		out := make(chan tresult, 2)
		var wg sync.WaitGroup
		startWait(ctx, &wg, l, "small", 1, out)
		queued(t, l, 1)
		startWait(ctx, &wg, l, "large", 2, out)
		queued(t, l, 3)
		start := time.Now()
		update(t, l, FixedWindow{Limit: 3, Window: time.Minute}) // one more permit now; capacity 3
		r := <-out
		if r.name != "small" || r.err != nil || !r.le.Acquired() || time.Since(start) > 5*time.Second {
			t.Fatalf("after the update: %s %v acquired=%v, want the small waiter granted at once", r.name, r.err, r.le.Acquired())
		}
		update(t, l, FixedWindow{Limit: 1, Window: time.Minute}) // the large waiter can never pass now
		r = <-out
		wg.Wait()
		if r.name != "large" || !errors.Is(r.err, coordination.ErrInvalidArgument) || !strings.Contains(r.err.Error(), "capacity is 1") || r.le.Acquired() {
			t.Fatalf("larger than the new capacity: %s %v acquired=%v, want ErrInvalidArgument naming the capacity", r.name, r.err, r.le.Acquired())
		}
	})
}
