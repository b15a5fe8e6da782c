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

// "3 per second" is exact: one second after a burst of 3 is spent, 3 more
// are admitted (with intervals rounded to whole milliseconds, 334 ms each,
// only 2 were). Likewise an interval given as time.Second/3. Exact on
// miniredis; on real servers each burst is checked against the bounds the
// server's clock, read around it, gives (timing_test.go), which are 3 and
// 3 when nothing stalled.
func TestThreePerSecondIsExact(t *testing.T) {
	t.Parallel() // sleeps on real servers
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		c := b.Coordinator(t)
		sc := serverClock(t, b)
		for i, g := range []GCRA{{Burst: 3, Rate: 3, Period: time.Second}, {Burst: 3, Interval: time.Second / 3}} {
			l, err := newT(c, "three:"+itoa(int64(i)), g)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			m := newGCRAModel(g)
			sc.wantBurst(l, m, "burst", 4, 3)
			b.Advance(time.Second)
			sc.wantBurst(l, m, "one second later", 4, 3)
		}
	})
}

// 1,000,000 permits per second per key is accepted, and holds over 10 s
// within 0.1%: the permits granted plus those still free equal the burst
// plus the rate times the server time elapsed.
func TestMillionPerSecondHolds(t *testing.T) {
	t.Parallel() // 10 s on each real server
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		const rate = 1_000_000
		c := b.Coordinator(t)
		raw := b.Raw(t)
		ctx := context.Background()
		serverNow := func() time.Time {
			if b.IsMini() {
				return b.Now().Truncate(time.Microsecond)
			}
			now, err := raw.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			return now
		}
		// The burst is 20 s of the rate, and the test drains it with its
		// first call: from then on permits accrue for the whole 10-s run
		// without reaching the cap, so a consumer that falls behind (a
		// loaded machine under the race detector, calls taking a second
		// or more) loses nothing and the count below is exact whatever the
		// speed of the loop. (With a burst of 1 s of the rate, a consumer
		// more than a second behind lost the excess and the count fell
		// short: TestMillionPerSecondHolds failed at load 20.)
		const burst = 20 * rate
		for _, s := range []Settings{
			GCRA{Burst: burst, Rate: rate, Period: time.Second},
			TokenBucket{Limit: burst, TokensPerPeriod: rate / 1000, Period: time.Millisecond},
		} {
			var (
				l   *tlim
				err error
			)
			switch s := s.(type) {
			case GCRA:
				l, err = newT(c, "million:gcra", s)
			case TokenBucket:
				l, err = newT(c, "million:bucket", s)
			}
			if err != nil {
				t.Fatalf("%T at 1,000,000 per second: %v", s, err)
			}
			defer l.Close()
			const batch = 100_000
			// The drain happens somewhere in [t0, t0b]; the final probe
			// reads the state somewhere in [t1a, t1].
			t0 := serverNow()
			if le := acquire(t, l, burst); !le.Acquired() {
				t.Fatalf("%T: draining the full burst of %d was refused", s, burst)
			}
			t0b := serverNow()
			granted := int64(burst)
			for {
				if b.IsMini() {
					b.Advance(10 * time.Millisecond)
					if b.Now().Sub(t0) > 10*time.Second {
						break
					}
				} else if time.Since(t0) > 10*time.Second {
					break
				}
				le := acquire(t, l, batch)
				if le.Acquired() {
					granted += batch
				} else if ra, ok := le.RetryAfter(); ok && !b.IsMini() {
					time.Sleep(ra)
				}
			}
			t1a := serverNow()
			left := acquire(t, l, 0).Available()
			t1 := serverNow()
			got := float64(granted + left)
			lo := float64(burst) + rate*t1a.Sub(t0b).Seconds()
			hi := float64(burst) + rate*t1.Sub(t0).Seconds()
			if got < lo*0.999 || got > hi*1.001 {
				t.Fatalf("%T: %.0f permits over about %v, want %.0f..%.0f within 0.1%%", s, got, t1.Sub(t0), lo, hi)
			}
			t.Logf("%T: %.0f permits over about %v, want %.0f..%.0f", s, got, t1.Sub(t0), lo, hi)
		}
	})
}

// Wait fails fast: when the server's retry time is past the context's
// deadline it returns a WaitError at once, with its RetryAfter, instead of
// sleeping until the deadline; more permits than the capacity are an
// argument error at once. A deadline the retry time meets is waited for.
// "At once" is checked against the context: it has not ended when Wait
// returns (the deadline is 30 s, the retry time about a minute; a Wait
// that slept until either would find it ended), and not against a wall
// clock bound a stall of the machine could exceed.
func TestWaitFailsFast(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		stop := clock(b)
		defer stop()
		ctx := context.Background()
		l := build(t, b.Coordinator(t), kGCRA, "fast", 2, time.Minute)
		wantBurst(t, l, 2, 2, "burst")
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		start := time.Now()
		le, err := l.Wait(dctx, 1)
		ended := dctx.Err()
		if we := wantWaitError(t, "Wait past its deadline", le, err, 1, true); !we.PastDeadline || we.RetryAfter < 50*time.Second || we.Err != nil {
			t.Fatalf("Wait past its deadline: %+v, want PastDeadline and RetryAfter about a minute", we)
		}
		if ended != nil {
			t.Fatalf("Wait returned after its context ended (%v, after %v), want it to return at once", ended, time.Since(start))
		}
		if q := l.Statistics().QueuedPermits; q != 0 {
			t.Fatalf("%d permits queued", q)
		}
		if _, err := l.Wait(dctx, 3); !errors.Is(err, coordination.ErrInvalidArgument) || dctx.Err() != nil {
			t.Fatalf("Wait for more than the capacity: %v (context ended: %v), want an argument error at once", err, dctx.Err())
		} else if name, _ := check.ArgumentName(err); name != "permits" {
			t.Fatalf("the error names %q, want permits", name)
		}
		short := build(t, b.Coordinator(t), kGCRA, "fast-short", 1, 100*time.Millisecond)
		acquire(t, short, 1)
		dctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if le, err := short.Wait(dctx, 1); err != nil || !le.Acquired() {
			t.Fatalf("Wait whose deadline the retry time meets: %v acquired=%v", err, le.Acquired())
		}
	})
}
