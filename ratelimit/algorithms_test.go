package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/sentinel"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// The timed tests below are exact on miniredis, whose clock moves only
// with b.Advance. On real servers b.Advance sleeps, and a loaded machine
// may stall the test or the server for a second or more at any point:
// they read the server's clock around each step and check each count and
// RetryAfter against the bounds the server time that passed allows (see
// timing_test.go). The bounds meet at the exact numbers when nothing
// stalled.

// TestFixedWindowCountsAndReset: a window admits exactly its limit, a
// refusal inside it retries at its end, and the next window admits the
// limit again. On miniredis every count and RetryAfter is exact and the
// reset is checked to the µs (still refused 1 µs before the end). On real
// servers the window's end is bracketed by the server's clock read around
// its first grant (the window starts at that grant's whole millisecond):
// a burst certainly inside it admits exactly the limit, one a stall may
// have carried past its end at least the limit and at most the limit for
// each window it can reach; a refusal certainly inside the full window
// retries at its end (within the bracket); then the test waits on the
// server's clock for every window started so far to end, and the next
// window admits exactly the limit again.
func TestFixedWindowCountsAndReset(t *testing.T) {
	t.Parallel() // sleeps on real servers: overlap with the other timed tests
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		const lim, offered, win = 5, 7, time.Second
		c := serverClock(t, b)
		l := build(t, b.Coordinator(t), kFixed, "fw", lim, win)
		// window offers a burst with no window live: the window starts at
		// its first grant, it admits the limit, and may admit more only if
		// the burst reached past the window's end. It returns the end and
		// whether the burst certainly fits in the window.
		window := func(what string) (end stamp, inside bool) {
			t.Helper()
			r := c.burst(l, offered)
			end = stamp{r.first.lo.Truncate(time.Millisecond).Add(win), r.first.hi.Truncate(time.Millisecond).Add(win)}
			hi := lim
			if !r.all.hi.Before(end.lo) {
				hi = min(offered, lim*(2+int(r.all.hi.Sub(end.lo)/win)))
			}
			wantCount(t, b, what, r.got, lim, lim, hi, r.all)
			return end, hi == lim
		}
		end, inside := window("first window")
		le, x := c.allow(l, 1)
		switch {
		case inside && x.hi.Before(end.lo):
			// The full window, certainly: refused until its end.
			left := end.lo.Sub(x.hi)
			ra, _ := le.RetryAfter()
			wantRetry(t, b, le, left, win)
			if hi := end.hi.Sub(x.lo); ra < left || ra > hi {
				t.Fatalf("RetryAfter %v at %v, want the window's end %v: %v..%v", ra, x, end, left, hi)
			}
			if b.IsMini() {
				reachRetry(t, b, l, ra)
			} else {
				c.until(end.hi.Add(time.Millisecond)) // a server keeps a key through its expiry's millisecond
			}
		default:
			// A stall: a later window, full or not. A refusal still retries
			// within a window; then every window started by now ends.
			if b.IsMini() {
				t.Fatalf("the burst %v and the refusal %v are not inside the window ending %v on miniredis", end, x, end)
			}
			t.Logf("the first window's burst %v or the refusal %v may have passed its end %v", end, x, end)
			if !le.Acquired() {
				wantRetry(t, b, le, 0, win)
			}
			c.until(x.hi.Truncate(time.Millisecond).Add(win + time.Millisecond))
		}
		window("second window")
	})
}

// reachRetry moves the clock to the moment a refused request waiting d
// becomes admissible. On miniredis it first checks that 1 µs earlier it is
// still refused, with exactly 1 µs left; on real servers it sleeps d.
func reachRetry(t *testing.T, b *testharness.Backend, l *tlim, d time.Duration) {
	t.Helper()
	if !b.IsMini() {
		b.Advance(d)
		return
	}
	b.Advance(d - time.Microsecond)
	wantRetry(t, b, acquire(t, l, 1), time.Microsecond, time.Microsecond)
	b.Advance(time.Microsecond)
}

// TestSlidingWindowNeverEarlyAtMostOneSegmentLate: permits taken in
// segment k come back at (k+1)*seg + win, between one window and one
// window plus a segment after they were taken: never earlier, at most a
// segment later. On miniredis the RetryAfter is exact and the return is
// checked to the µs. On real servers each step is checked against the
// return instants the server's clock gives (the segment of each grant is
// bracketed by TIME read around its burst): refused while the permits are
// certainly still charged (half a window later, when nothing stalled),
// RetryAfter within the bracket of their return, and the full limit once
// they have certainly returned (a segment and 20 ms past the window).
func TestSlidingWindowNeverEarlyAtMostOneSegmentLate(t *testing.T) {
	t.Parallel() // sleeps on real servers: overlap with the other timed tests
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		const win, segs = 800 * time.Millisecond, 4
		seg := win / segs
		l := build(t, b.Coordinator(t), kSliding, "sw", 4, win)
		c, m := serverClock(t, b), newSlidingModel(SlidingWindow{Limit: 4, Window: win, Segments: segs})
		r := c.wantBurst(l, m, "burst", 6, 4)
		// Permits taken in segment k return at (k+1)*seg + win: between win
		// and win+seg after they were taken.
		t0 := r.first.lo // on miniredis, the instant of every step so far
		k := t0.UnixMicro() / seg.Microseconds()
		back := time.UnixMicro((k+1)*seg.Microseconds() + win.Microseconds())
		le, x := c.allow(l, 1)
		c.checkOne(m, "a request after the burst", le, x, 1, back.Sub(t0))
		if b.IsMini() {
			ra := wantRetry(t, b, le, back.Sub(t0), win+seg)
			if ra < win {
				t.Fatalf("RetryAfter %v is earlier than the window %v", ra, win)
			}
			reachRetry(t, b, l, ra)
		} else {
			if !le.Acquired() {
				wantRetry(t, b, le, 0, win+seg)
			}
			b.Advance(win / 2) // never early: still refused half a window later
			le, x := c.allow(l, 1)
			c.checkOne(m, "half a window later", le, x, 1, max(back.Sub(x.lo), time.Microsecond)) // planned: refused until back
			if !le.Acquired() {
				wantRetry(t, b, le, 0, win+seg)
			}
			b.Advance(win/2 + seg + 20*time.Millisecond)
		}
		c.wantBurst(l, m, "after the window", 6, 4)
	})
}

// TestSlidingWindowSpanBound checks that no span of one window ever holds
// more than the limit, and that the window refuses only when full, with
// requests spread over several windows. On miniredis the clock moves in
// random steps and admission times are exact; on real servers each
// admission is bracketed by the server's TIME read before and after it,
// and only spans that certainly fit in one window are counted (a sound
// check: it cannot report a false violation). A refusal must come when
// the limit's worth of admissions may still be charged (each charged until
// its segment's end plus the window, known from its bracket): at once on
// miniredis, and on real servers whatever a stall did to the spacing. On
// miniredis, where the requests are as dense as planned, at least 2 full
// budgets are granted over the 3 windows.
func TestSlidingWindowSpanBound(t *testing.T) {
	t.Parallel() // sleeps on real servers: overlap with the other timed tests
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		const limit = 5
		win := 600 * time.Millisecond
		c := b.Coordinator(t)
		settings := SlidingWindow{Limit: limit, Window: win, Segments: 3}
		l, err := newT(c, "span", settings)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		sc, m := serverClock(t, b), newSlidingModel(settings)
		var got []stamp
		end := sc.now().Add(3 * win)
		step := 0
		for sc.now().Before(end) {
			le, at := sc.allow(l, 1)
			if le.Acquired() {
				got = append(got, at)
				m.took(at, at, 1, 0)
			} else if _, charged := m.charged(at); charged < limit {
				t.Fatalf("refused at %v with at most %d admissions still charged (limit %d)", at, charged, limit)
			}
			step++
			if b.IsMini() {
				b.Advance(time.Duration(1+(step*37)%53) * time.Millisecond)
			} else {
				time.Sleep(10 * time.Millisecond)
			}
		}
		for i := range got {
			n := 0
			for j := i; j < len(got); j++ {
				if got[j].hi.Sub(got[i].lo) < win {
					n++
				}
			}
			if n > limit {
				t.Fatalf("%d admissions within one window starting at admission %d (limit %d)", n, i, limit)
			}
		}
		// Over 3 windows at least 2 full budgets must have been granted.
		if b.IsMini() && len(got) < 2*limit {
			t.Fatalf("only %d admissions over 3 windows, want >= %d", len(got), 2*limit)
		}
		t.Logf("%d admissions over %v", len(got), 3*win)
	})
}

// TestTokenBucketBurstRefillCap: a full bucket grants its limit, a refusal
// waits for the next period, a partial period adds nothing, one period adds
// its tokens, and any number of periods fill it to its limit, no more. On
// miniredis every count and RetryAfter is exact (still refused 1 µs before
// the period). On real servers each count and RetryAfter is checked
// against the bounds the server's clock gives: the refill periods start at
// the burst's first grant (bracketed by TIME), and a step may count only
// the periods that can have started by its instant. When nothing stalled
// they are the same numbers; a stall (a refill during the burst, a period
// passing before the refusal) changes the expected numbers, not the
// verdict.
func TestTokenBucketBurstRefillCap(t *testing.T) {
	t.Parallel() // sleeps on real servers: overlap with the other timed tests
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		const period = 500 * time.Millisecond
		l := build(t, b.Coordinator(t), kBucket, "tb", 3, period)
		c, m := serverClock(t, b), newBucketModel(TokenBucket{Limit: 3, TokensPerPeriod: 1, Period: period})
		c.wantBurst(l, m, "burst", 5, 3)
		c.wantOne(l, m, "a request after the burst", 1, period)
		reachRetry(t, b, l, period) // a partial period adds nothing
		c.wantBurst(l, m, "after one period", 3, 1)
		b.Advance(4 * period) // 4 periods, capped at the limit 3
		c.wantBurst(l, m, "after four periods (capped)", 5, 3)
	})
}

// TestTokenBucketWholePeriodsOnly: tokens come in whole periods only. On
// miniredis exactly; on real servers within the bounds the server's clock
// gives (the periods start at the burst's first grant, bracketed by TIME):
// 1.5 periods after the refusal a bucket of 2 tokens a period holds 2, not
// 3, when nothing stalled.
func TestTokenBucketWholePeriodsOnly(t *testing.T) {
	t.Parallel() // sleeps on real servers: overlap with the other timed tests
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		const period = 400 * time.Millisecond
		settings := TokenBucket{Limit: 6, TokensPerPeriod: 2, Period: period}
		l, err := newT(b.Coordinator(t), "tb2", settings)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		c, m := serverClock(t, b), newBucketModel(settings)
		c.wantBurst(l, m, "burst", 8, 6)
		// Three permits need two periods (2 tokens each).
		c.wantOne(l, m, "three permits", 3, 2*period)
		b.Advance(period + period/2) // 1.5 periods: 2 tokens, not 3
		c.wantBurst(l, m, "after 1.5 periods", 4, 2)
	})
}

// TestGCRABurstThenOnePerInterval: a fresh GCRA limiter grants its burst
// and never B+1, then one permit an interval; a batch of 2 needs one more
// interval than a single permit; a refusal leaves the stored state
// unchanged. On miniredis every count and RetryAfter is exact. On real
// servers each is checked against the bounds its theoretical arrival time
// allows, bracketed by the server's clock read around each step (never
// B+1 unless an interval may have passed during the burst), and the
// refusals are reached by requesting until refused (a stall may have
// brought a permit back first; each grant is checked), so that the
// unchanged state is checked on a refusal in every run.
func TestGCRABurstThenOnePerInterval(t *testing.T) {
	t.Parallel() // sleeps on real servers: overlap with the other timed tests
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		const iv = 500 * time.Millisecond
		l := build(t, b.Coordinator(t), kGCRA, "gcra", 3, iv)
		c, m := serverClock(t, b), newGCRAModel(GCRA{Burst: 3, Interval: iv})
		key := b.Key("gcra")
		c.wantBurst(l, m, "burst (never B+1)", 5, 3)
		c.refusal(l, m, "a request after the burst", 1, iv, key)
		b.Advance(iv)
		c.wantBurst(l, m, "after one interval", 3, 1)
		// A batch of 2 needs one more interval than a single permit, and a
		// refusal leaves the stored timestamp unchanged.
		if v, _ := c.raw.Get(context.Background(), key).Result(); v == "" {
			t.Fatal("no state stored")
		}
		c.refusal(l, m, "a batch of 2", 2, 2*iv, key)
		b.Advance(2 * iv)
		c.wantOne(l, m, "a batch of 2 after two intervals", 2, 0)
	})
}

func TestConcurrencyAtMostNLive(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		l := build(t, b.Coordinator(t), kConc, "conc", 3, 10*time.Second)
		a, c1, c2 := acquire(t, l, 2), acquire(t, l, 1), acquire(t, l, 1)
		if !a.Acquired() || !c1.Acquired() || c2.Acquired() {
			t.Fatalf("acquired %v %v %v, want true true false", a.Acquired(), c1.Acquired(), c2.Acquired())
		}
		if _, ok := c2.RetryAfter(); ok {
			t.Fatalf("concurrency refusal has a RetryAfter")
		}
		ctx := context.Background()
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := a.Release(ctx); err != nil {
			t.Fatalf("second release: %v", err)
		}
		if a.Context().Err() == nil {
			t.Fatalf("released lease's context not cancelled")
		}
		wantBurst(t, l, 3, 2, "after release")

		// Many goroutines: never more than 3 live at once.
		l2 := build(t, b.Coordinator(t), kConc, "conc2", 3, 10*time.Second)
		var live, peak, granted atomic.Int64
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 6 {
					le, err := l2.Allow(ctx, 1)
					if err != nil {
						t.Error(err)
						return
					}
					if !le.Acquired() {
						continue
					}
					granted.Add(1)
					n := live.Add(1)
					for {
						p := peak.Load()
						if n <= p || peak.CompareAndSwap(p, n) {
							break
						}
					}
					time.Sleep(2 * time.Millisecond)
					live.Add(-1)
					if err := le.Release(ctx); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		if peak.Load() > 3 || granted.Load() < 3 {
			t.Fatalf("peak live leases %d (limit 3), granted %d", peak.Load(), granted.Load())
		}
	})
}

// A concurrency lease renewed in the background holds its permit past its
// lease duration; once its holder crashes (renewal stops, nothing is
// released) the permit frees when the last renewal's lease runs out, not
// before. The lease is seconds long (renewed every second) so that a
// renewal late by a loaded machine still has two seconds of margin; the
// waits poll the server's clock and the lease's stored expiry instead of
// sleeping fixed times.
func TestConcurrencyLeaseRenewedWhileHeldExpiresAfterCrash(t *testing.T) {
	t.Parallel() // sleeps on real servers: overlap with the other timed tests
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		const lease = 3 * time.Second
		ctx := context.Background()
		raw := b.Raw(t)
		key := b.Key("renew")
		l := build(t, b.Coordinator(t), kConc, "renew", 1, lease)
		stop := clock(b)
		defer stop()
		// serverNow is the server's clock: TIME, or miniredis' set time.
		serverNow := func() time.Time {
			t.Helper()
			if b.IsMini() {
				return b.Now()
			}
			now, err := raw.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			return now
		}
		// expiry is the held lease's stored expiry (its score, server ms).
		expiry := func() time.Time {
			t.Helper()
			zs, err := raw.ZRangeWithScores(ctx, key, 0, -1).Result()
			if err != nil {
				t.Fatal(err)
			}
			var leases []redis.Z
			for _, z := range zs {
				if z.Member != "#" {
					leases = append(leases, z)
				}
			}
			if len(leases) != 1 {
				t.Fatalf("the key holds %v, want one lease", zs)
			}
			return time.UnixMilli(int64(leases[0].Score))
		}
		held := acquire(t, l, 1)
		if !held.Acquired() {
			t.Fatal("not acquired")
		}
		first := expiry()
		// Wait until the server's clock is past the lease's first expiry:
		// only its renewals (every lease/3) can have kept it.
		for deadline := time.Now().Add(lease + 10*time.Second); !serverNow().After(first.Add(time.Millisecond)); {
			if time.Now().After(deadline) {
				t.Fatalf("the server's clock did not reach %v", first)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if acquire(t, l, 1).Acquired() {
			t.Fatalf("a renewed lease lost its permit")
		}
		if held.Context().Err() != nil {
			t.Fatalf("renewed lease's context ended: %v", context.Cause(held.Context()))
		}
		if e := expiry(); !e.After(first) {
			t.Fatalf("the lease's expiry %v was never renewed past %v", e, first)
		}

		// A crash: renewal stops, nothing is released. On miniredis the
		// clock stops first, so every later step is exact.
		stop()
		h := held.cl.held.h
		dl := time.Now().Add(h.Remaining()) // the last renewal's send + lease - drift
		h.Lose(&sentinel.LostError{Reason: "simulated crash"})
		// Refresh waits for a renewal in flight (it takes the renewal lock),
		// then answers false without sending: the stored expiry is final.
		if ok, err := h.Refresh(ctx, lease); ok || err != nil {
			t.Fatalf("Refresh after the crash = %v, %v; want false, nil", ok, err)
		}
		last := expiry() // the last renewal's server time + lease
		if b.IsMini() {
			now := b.Now()
			if !last.After(now.Add(time.Millisecond)) {
				t.Fatalf("the lease expired at %v, before the crash at %v", last, now)
			}
			b.Advance(last.Add(-time.Millisecond).Sub(now))
			if acquire(t, l, 1).Acquired() {
				t.Fatalf("an abandoned lease freed its permit 1 ms before its expiry")
			}
			b.Advance(time.Millisecond)
			if !acquire(t, l, 1).Acquired() {
				t.Fatalf("an abandoned lease still holds its permit at its expiry")
			}
			return
		}
		// Real servers: poll until the permit is free. An attempt that
		// starts after the expiry must get it; one that gets it must end
		// after the expiry, and after the local deadline (the last
		// renewal's send + the lease - the drift allowance).
		for {
			lo := serverNow()
			if acquire(t, l, 1).Acquired() {
				if hi := serverNow(); hi.Before(last) {
					t.Fatalf("an abandoned lease freed its permit by %v, before its expiry %v", hi, last)
				}
				if early := dl.Sub(time.Now()); early > 0 {
					t.Fatalf("an abandoned lease freed its permit %v before the lease (minus drift) after its last renewal", early)
				}
				break
			}
			if lo.After(last.Add(time.Millisecond)) {
				t.Fatalf("an abandoned lease still holds its permit at %v, after its expiry %v", lo, last)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

func TestProbeOversizedNegative(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		c := b.Coordinator(t)
		raw := b.Raw(t)
		ctx := context.Background()
		for _, k := range kinds {
			t.Run(string(k), func(t *testing.T) {
				key := "probe:" + string(k)
				l := build(t, c, k, key, 2, 10*time.Second)
				// A probe on fresh state: granted, nothing written.
				p := acquire(t, l, 0)
				if !p.Acquired() || p.Available() != 2 {
					t.Fatalf("probe: acquired=%v available=%d, want true 2", p.Acquired(), p.Available())
				}
				if n, _ := raw.Exists(ctx, b.Key(key)).Result(); n != 0 {
					t.Fatalf("a probe created state")
				}
				if _, err := l.Allow(ctx, -1); !errors.Is(err, coordination.ErrInvalidArgument) {
					t.Fatalf("Allow(-1) = %v, want ErrInvalidArgument", err)
				}
				if got := burst(t, l, 2); got != 2 {
					t.Fatalf("admitted %d of 2", got)
				}
				state := dump(t, raw, b.Key(key))
				p = acquire(t, l, 0)
				if p.Acquired() || p.Available() != 0 {
					t.Fatalf("probe when empty: acquired=%v available=%d", p.Acquired(), p.Available())
				}
				if _, ok := p.RetryAfter(); ok == (k == kConc) {
					t.Fatalf("probe RetryAfter present=%v for %s", ok, k)
				}
				over, err := l.Allow(ctx, 3)
				if !errors.Is(err, coordination.ErrInvalidArgument) || over.Acquired() ||
					!strings.Contains(err.Error(), "permits") || !strings.Contains(err.Error(), "capacity is 2") {
					t.Fatalf("Allow(3) on a capacity of 2: %v acquired=%v, want ErrInvalidArgument naming permits and the capacity", err, over.Acquired())
				}
				if k == kBucket || k == kGCRA {
					if _, err := l.Reserve(ctx, 3); !errors.Is(err, coordination.ErrInvalidArgument) || !strings.Contains(err.Error(), "capacity is 2") {
						t.Fatalf("Reserve(3) on a capacity of 2: %v, want ErrInvalidArgument naming the capacity", err)
					}
				}
				if after := dump(t, raw, b.Key(key)); after != state {
					t.Fatalf("probe/oversized request changed the state:\n%s\n->\n%s", state, after)
				}
			})
		}
	})
}

// dump renders a key's value (string, hash or sorted set) for comparison.
func dump(t testing.TB, raw redis.UniversalClient, key string) string {
	t.Helper()
	ctx := context.Background()
	typ, err := raw.Type(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	var v any
	switch typ {
	case "string":
		v, err = raw.Get(ctx, key).Result()
	case "hash":
		v, err = raw.HGetAll(ctx, key).Result()
	case "zset":
		v, err = raw.ZRangeWithScores(ctx, key, 0, -1).Result()
	case "none":
		v = nil
	default:
		t.Fatalf("unexpected type %s", typ)
	}
	if err != nil {
		t.Fatal(err)
	}
	return typ + " " + fmt.Sprint(v)
}

func TestTwoInstancesShareTheBudget(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		c1, c2 := b.Coordinator(t), b.Coordinator(t) // two clients, two "processes"
		for _, k := range kinds {
			key := "shared:" + string(k)
			l1 := build(t, c1, k, key, 4, 10*time.Second)
			l2 := build(t, c2, k, key, 4, 10*time.Second)
			got := 0
			for i := range 6 {
				l := l1
				if i%2 == 1 {
					l = l2
				}
				if acquire(t, l, 1).Acquired() {
					got++
				}
			}
			if got != 4 {
				t.Fatalf("%s: two instances admitted %d of 6, want 4", k, got)
			}
			if s1, s2 := l1.Statistics(), l2.Statistics(); s1.Granted+s2.Granted != 4 || s1.Rejected+s2.Rejected != 2 {
				t.Fatalf("%s: statistics %+v %+v", k, s1, s2)
			}
		}
	})
}

// TestIdleStateExpires: each limiter's key carries an expiry no later than
// its state calls for, and is gone once that has passed. On real servers
// a stall between the grant and the PTTL read may let a key expire first:
// a missing key is accepted only when the server's clock, read around the
// two, says it may have expired (no state lives less than d - 1 ms).
func TestIdleStateExpires(t *testing.T) {
	t.Parallel() // sleeps on real servers: overlap with the other timed tests
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		c := b.Coordinator(t)
		raw := b.Raw(t)
		sc := serverClock(t, b)
		ctx := context.Background()
		const d = 300 * time.Millisecond
		type step struct {
			k     kind
			key   string
			after time.Duration // when the key must be gone
		}
		var steps []step
		for _, k := range []kind{kFixed, kSliding, kBucket, kGCRA, kConc} {
			key := "idle:" + string(k)
			l := build(t, c, k, key, 2, d)
			granted := sc.now()
			if !acquire(t, l, 2).Acquired() {
				t.Fatalf("%s: not acquired", k)
			}
			pttl, err := raw.PTTL(ctx, b.Key(key)).Result()
			read := sc.now()
			// Every state lives d at least from its grant (a fixed window
			// from the grant's whole millisecond).
			gone := pttl == -2 && !read.Before(granted.Add(d-time.Millisecond))
			if gone {
				t.Logf("%s: the key expired before its PTTL was read, %v after the grant", k, read.Sub(granted))
			} else if err != nil || pttl <= 0 {
				t.Fatalf("%s: PTTL %v %v, want a TTL", k, pttl, err)
			}
			after := d // window over / bucket full / burst back / lease expired
			if k == kSliding {
				after = d + d/4 // plus at most one segment
			}
			if k == kBucket {
				after = 2 * d // two tokens, one per period
			}
			if k == kGCRA {
				after = 2 * d
			}
			if pttl > after+time.Millisecond { // the expiry is rounded up to a whole ms
				t.Fatalf("%s: PTTL %v, want <= %v", k, pttl, after+time.Millisecond)
			}
			if k == kConc {
				l.Close() // stop renewing: the lease expires
			}
			steps = append(steps, step{k, key, after})
		}
		b.Advance(2*d + 50*time.Millisecond)
		for _, s := range steps {
			if n, _ := raw.Exists(ctx, b.Key(s.key)).Result(); n != 0 {
				t.Fatalf("%s: state still there after %v", s.k, 2*d)
			}
		}
	})
}

func TestConfigMismatchAndBadState(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		c := b.Coordinator(t)
		raw := b.Raw(t)
		ctx := context.Background()
		for _, k := range kinds {
			key := "cfg:" + string(k)
			l := build(t, c, k, key, 3, 10*time.Second)
			acquire(t, l, 1)
			state := dump(t, raw, b.Key(key))
			// Strict: other settings are an error, and nothing is written.
			strict := build(t, c, k, key, 4, 10*time.Second, WithStrictSettings(true))
			if _, err := strict.Allow(ctx, 1); !errors.Is(err, coordination.ErrConfigMismatch) {
				t.Fatalf("%s: other settings, strict: %v, want ErrConfigMismatch", k, err)
			}
			if after := dump(t, raw, b.Key(key)); after != state {
				t.Fatalf("%s: a mismatch changed the state", k)
			}
			// By default the state is migrated to the caller's settings.
			other := build(t, c, k, key, 4, 10*time.Second)
			if le, err := other.Allow(ctx, 1); err != nil || !le.Acquired() {
				t.Fatalf("%s: other settings: %v %v, want a grant", k, err, le.Acquired())
			}
		}
		// No failure mode masks a mismatch.
		open := build(t, c, kGCRA, "cfg:gcra", 9, 10*time.Second, WithFailureMode(FailOpen), WithStrictSettings(true))
		if _, err := open.Allow(ctx, 1); !errors.Is(err, coordination.ErrConfigMismatch) {
			t.Fatalf("FailOpen on a mismatched key: %v", err)
		}
		// Another algorithm on a key is a mismatch, even by default.
		for _, k := range []kind{kFixed, kSliding, kBucket} {
			fw := build(t, c, k, "cfg:gcra", 3, 10*time.Second)
			if _, err := fw.Allow(ctx, 1); !errors.Is(err, coordination.ErrConfigMismatch) {
				t.Fatalf("%s on a GCRA key: %v", k, err)
			}
		}
		for _, k := range kinds {
			key := "bad:" + string(k)
			raw.RPush(ctx, b.Key(key), "x")
			l := build(t, c, k, key, 3, 10*time.Second)
			if _, err := l.Allow(ctx, 1); !errors.Is(err, coordination.ErrBadState) || !strings.Contains(err.Error(), "wrong Redis type") {
				t.Fatalf("%s on a list: %v, want ErrBadState (wrong Redis type)", k, err)
			}
		}
		for _, k := range []kind{kFixed, kSliding, kBucket, kGCRA} {
			key := "garbage:" + string(k)
			raw.Set(ctx, b.Key(key), "not a limiter", 0)
			l := build(t, c, k, key, 3, 10*time.Second)
			if _, err := l.Allow(ctx, 1); !errors.Is(err, coordination.ErrBadState) {
				t.Fatalf("%s on garbage: %v, want ErrBadState", k, err)
			}
			if v, _ := raw.Get(ctx, b.Key(key)).Result(); v != "not a limiter" {
				t.Fatalf("%s: garbage overwritten: %q", k, v)
			}
			// The right settings, malformed state.
			key = "malformed:" + string(k)
			cfg := l.spec().cfg
			for _, v := range []string{cfg + "|7|", cfg + "|5|-1|", cfg + "|1|x|", cfg + "|1|2|3|4|5|6|7|", cfg + "|1|2|abc"} {
				raw.Set(ctx, b.Key(key), v, 0)
				if _, err := build(t, c, k, key, 3, 10*time.Second).Allow(ctx, 1); !errors.Is(err, coordination.ErrBadState) {
					t.Fatalf("%s on %q: %v, want ErrBadState", k, v, err)
				}
			}
		}
		raw.ZAdd(ctx, b.Key("garbage:conc"), redis.Z{Score: 1, Member: "x"})
		if _, err := build(t, c, kConc, "garbage:conc", 3, time.Second).Allow(ctx, 1); !errors.Is(err, coordination.ErrBadState) {
			t.Fatalf("concurrency on a foreign zset: %v", err)
		}
	})
}

func TestSettingsValidation(t *testing.T) {
	coord, err := coordination.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}))
	if err != nil {
		t.Fatal(err)
	}
	defer coord.Client().Close()
	bad := []func() (*tlim, error){
		func() (*tlim, error) {
			return newT(coord, "k", FixedWindow{Limit: 0, Window: time.Second})
		},
		func() (*tlim, error) { return newT(coord, "k", FixedWindow{Limit: 1, Window: 0}) },
		func() (*tlim, error) { return newT(coord, "", FixedWindow{Limit: 1, Window: time.Second}) },
		func() (*tlim, error) { return newT(nil, "k", FixedWindow{Limit: 1, Window: time.Second}) },
		func() (*tlim, error) {
			return newT(coord, "k", SlidingWindow{Limit: 1, Window: time.Second, Segments: 1025})
		},
		func() (*tlim, error) {
			return newT(coord, "k", SlidingWindow{Limit: 1, Window: time.Second, Segments: 0})
		},
		func() (*tlim, error) {
			return newT(coord, "k", TokenBucket{Limit: 1, TokensPerPeriod: 0, Period: time.Second})
		},
		func() (*tlim, error) {
			// An empty bucket would take 2^31 × 312749h to refill: beyond
			// what the script keeps exact.
			return newT(coord, "k", TokenBucket{Limit: math.MaxInt32, TokensPerPeriod: 1, Period: 312749 * time.Hour})
		},
		func() (*tlim, error) {
			return newT(coord, "k", FixedWindow{Limit: 1, Window: 1500 * time.Microsecond})
		},
		func() (*tlim, error) {
			return newT(coord, "k", SlidingWindow{Limit: 1, Window: time.Second + time.Nanosecond, Segments: 2})
		},
		func() (*tlim, error) {
			return newT(coord, "k", TokenBucket{Limit: 1, TokensPerPeriod: 1, Period: 1500 * time.Nanosecond})
		},
		func() (*tlim, error) { return newT(coord, "k", GCRA{Burst: 1}) },
		func() (*tlim, error) {
			return newT(coord, "k", GCRA{Burst: 1, Interval: time.Second, Rate: 1, Period: time.Second})
		},
		func() (*tlim, error) { return newT(coord, "k", GCRA{Burst: 1, Rate: 3}) },
		func() (*tlim, error) { return newT(coord, "k", GCRA{Burst: 1, Interval: -time.Second}) },
		func() (*tlim, error) { return newT(coord, "k", GCRA{Burst: 1 << 30, Interval: 24 * time.Hour}) },
		func() (*tlim, error) {
			return newT(coord, "k", Concurrency{Limit: 1, LeaseDuration: time.Millisecond})
		},
		func() (*tlim, error) {
			return newT(coord, "k", GCRA{Burst: 1, Interval: time.Second}, WithQueue(-1, OldestFirst))
		},
		func() (*tlim, error) {
			return newT(coord, "k", GCRA{Burst: 1, Interval: time.Second}, WithFailureMode(FailureMode(9)))
		},
	}
	for i, f := range bad {
		if _, err := f(); !errors.Is(err, coordination.ErrInvalidArgument) {
			t.Errorf("case %d: %v, want ErrInvalidArgument", i, err)
		}
	}
	// Intervals are exact fractions: never rounded.
	for _, g := range []GCRA{{Burst: 1, Interval: 1500 * time.Nanosecond}, {Burst: 3, Rate: 3, Period: time.Second}, {Burst: 1, Rate: 1000000, Period: time.Second}} {
		l, err := newT(coord, "k", g)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%+v stored as %s", g, l.spec().cfg)
		l.Close()
	}
}

// New takes every algorithm's settings, as values or pointers, and names
// "settings" for nil ones, sending nothing.
func TestNewSettings(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		client := b.Client(t)
		count := testharness.CountCommands(client)
		c := withClient(t, b, client)
		for _, s := range []Settings{nil, (*GCRA)(nil), (*Composite)(nil), Composite{Components: []Settings{(*TokenBucket)(nil)}}} {
			_, err := newT(c, "new:nil", s)
			name, _ := check.ArgumentName(err)
			if want := "settings"; s != nil && fmt.Sprintf("%T", s) == "ratelimit.Composite" {
				if name != "components" {
					t.Fatalf("newT(%T with a nil component): %v, want an argument error naming components", s, err)
				}
			} else if name != want {
				t.Fatalf("newT(%#v): %v, want an argument error naming %s", s, err, want)
			}
		}
		l, err := newT(c, "new:ptr", &GCRA{Burst: 2, Interval: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if got := count.Count(); got != 0 {
			t.Fatalf("New sent %d commands", got)
		}
		if got := burst(t, l, 3); got != 2 {
			t.Fatalf("a limiter from *GCRA{Burst: 2} admitted %d of 3", got)
		}
	})
}
