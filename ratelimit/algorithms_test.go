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

// The tests below are exact on miniredis, whose clock moves only with
// b.Advance. On real servers b.Advance sleeps; every burst there takes a
// few milliseconds, far below the windows used, so the counts are exact too.

func TestFixedWindowCountsAndReset(t *testing.T) {
	t.Parallel() // sleeps on real servers: overlap with the other timed tests
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		const win = time.Second
		l := build(t, b.Coordinator(t), kFixed, "fw", 5, win)
		// The window starts at the first grant's whole millisecond.
		now := b.Now().Truncate(time.Microsecond)
		left := win - now.Sub(now.Truncate(time.Millisecond))
		wantBurst(t, l, 7, 5, "first window")
		wantRetry(t, b, acquire(t, l, 1), left, win)
		reachRetry(t, b, l, left)
		wantBurst(t, l, 7, 5, "second window")
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

func TestSlidingWindowNeverEarlyAtMostOneSegmentLate(t *testing.T) {
	t.Parallel() // sleeps on real servers: overlap with the other timed tests
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		const win, segs = 800 * time.Millisecond, 4
		seg := win / segs
		l := build(t, b.Coordinator(t), kSliding, "sw", 4, win)
		t0 := b.Now().Truncate(time.Microsecond) // server time in whole µs
		wantBurst(t, l, 6, 4, "burst")
		// Permits taken in segment k return at (k+1)*seg + win: between win
		// and win+seg after they were taken.
		k := t0.UnixMicro() / seg.Microseconds()
		back := time.UnixMicro((k+1)*seg.Microseconds() + win.Microseconds())
		ra := wantRetry(t, b, acquire(t, l, 1), back.Sub(t0), win+seg)
		if b.IsMini() {
			if ra < win {
				t.Fatalf("RetryAfter %v is earlier than the window %v", ra, win)
			}
			reachRetry(t, b, l, ra)
		} else {
			b.Advance(win / 2) // never early: still refused half a window later
			wantRetry(t, b, acquire(t, l, 1), 0, win+seg)
			b.Advance(win/2 + seg + 20*time.Millisecond)
		}
		wantBurst(t, l, 6, 4, "after the window")
	})
}

// TestSlidingWindowSpanBound checks that no span of one window ever holds
// more than the limit, with requests spread over several windows. On
// miniredis the clock moves in random steps and admission times are exact;
// on real servers each admission is bracketed by the server's TIME read
// before and after it, and only spans that certainly fit in one window are
// counted (a sound check: it cannot report a false violation).
func TestSlidingWindowSpanBound(t *testing.T) {
	t.Parallel() // sleeps on real servers: overlap with the other timed tests
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		const limit = 5
		win := 600 * time.Millisecond
		c := b.Coordinator(t)
		l, err := newT(c, "span", SlidingWindow{Limit: limit, Window: win, Segments: 3})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		raw := b.Raw(t)
		ctx := context.Background()
		type adm struct{ lo, hi time.Time }
		var got []adm
		end := b.Now().Add(3 * win)
		step := 0
		for b.Now().Before(end) {
			var lo time.Time
			if b.IsMini() {
				lo = b.Now()
			} else {
				lo, _ = raw.Time(ctx).Result()
			}
			le := acquire(t, l, 1)
			hi := lo
			if !b.IsMini() {
				hi, _ = raw.Time(ctx).Result()
			}
			if le.Acquired() {
				got = append(got, adm{lo, hi})
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
		if len(got) < 2*limit {
			t.Fatalf("only %d admissions over 3 windows, want >= %d", len(got), 2*limit)
		}
		t.Logf("%d admissions over %v", len(got), 3*win)
	})
}

func TestTokenBucketBurstRefillCap(t *testing.T) {
	t.Parallel() // sleeps on real servers: overlap with the other timed tests
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		const period = 500 * time.Millisecond
		l := build(t, b.Coordinator(t), kBucket, "tb", 3, period)
		wantBurst(t, l, 5, 3, "burst")
		wantRetry(t, b, acquire(t, l, 1), period, period)
		reachRetry(t, b, l, period) // a partial period adds nothing
		wantBurst(t, l, 3, 1, "after one period")
		b.Advance(4 * period) // 4 periods, capped at the limit 3
		wantBurst(t, l, 5, 3, "after four periods (capped)")
	})
}

func TestTokenBucketWholePeriodsOnly(t *testing.T) {
	t.Parallel() // sleeps on real servers: overlap with the other timed tests
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		const period = 400 * time.Millisecond
		l, err := newT(b.Coordinator(t), "tb2", TokenBucket{Limit: 6, TokensPerPeriod: 2, Period: period})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		wantBurst(t, l, 8, 6, "burst")
		// Three permits need two periods (2 tokens each).
		wantRetry(t, b, acquire(t, l, 3), 2*period, 2*period)
		b.Advance(period + period/2) // 1.5 periods: 2 tokens, not 3
		wantBurst(t, l, 4, 2, "after 1.5 periods")
	})
}

func TestGCRABurstThenOnePerInterval(t *testing.T) {
	t.Parallel() // sleeps on real servers: overlap with the other timed tests
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		const iv = 500 * time.Millisecond
		c := b.Coordinator(t)
		l := build(t, c, kGCRA, "gcra", 3, iv)
		wantBurst(t, l, 5, 3, "burst (never B+1)")
		wantRetry(t, b, acquire(t, l, 1), iv, iv)
		b.Advance(iv)
		wantBurst(t, l, 3, 1, "after one interval")
		// A batch of 2 needs one more interval than a single permit, and a
		// refusal leaves the stored timestamp unchanged.
		raw := b.Raw(t)
		before, _ := raw.Get(context.Background(), b.Key("gcra")).Result()
		wantRetry(t, b, acquire(t, l, 2), 2*iv, 2*iv)
		after, _ := raw.Get(context.Background(), b.Key("gcra")).Result()
		if before == "" || before != after {
			t.Fatalf("refused batch changed the state: %q -> %q", before, after)
		}
		b.Advance(2 * iv)
		le := acquire(t, l, 2)
		if !le.Acquired() {
			t.Fatalf("batch of 2 refused after two intervals")
		}
		if _, ok := le.RetryAfter(); ok {
			t.Fatalf("acquired lease has a RetryAfter")
		}
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

func TestIdleStateExpires(t *testing.T) {
	t.Parallel() // sleeps on real servers: overlap with the other timed tests
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		c := b.Coordinator(t)
		raw := b.Raw(t)
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
			if !acquire(t, l, 2).Acquired() {
				t.Fatalf("%s: not acquired", k)
			}
			pttl, err := raw.PTTL(ctx, b.Key(key)).Result()
			if err != nil || pttl <= 0 {
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
