package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// maxN is 2^53: the scripts keep every stored number below it.
const maxN = int64(1) << 53

// The decision scripts never write a state they would refuse to read: an
// adjustment (operation a: a settlement) that would take a key's state out
// of its range (a GCRA arrival time, or the end of a token bucket's debt,
// at 2^53 µs or beyond; a sliding window's total at 2^53) is refused with
// COORD_BADARG before anything is written, alone or as a composite's
// component, and the key keeps deciding. A fixed window's count stops
// below 10^14 instead (it refuses until its window ends either way).
func TestAdjustmentOutOfRangeIsRefused(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord := b.Coordinator(t)
		e, err := engine.Of(coord)
		if err != nil {
			t.Fatal(err)
		}
		raw := b.Raw(t)
		const most = math.MaxInt32 // the most permits a script call takes
		min10 := TokenBucket{Limit: 10, TokensPerPeriod: 10, Period: time.Minute}
		g10 := GCRA{Burst: 10, Rate: 10, Period: time.Minute}
		run := func(sp *spec, key, op string, permits int) (any, error) {
			k := e.Key(key)
			if op == "d" {
				return sp.scripts.decide.Run(ctx, e, k, sp.args(op, permits)...)
			}
			return sp.scripts.adjust.Run(ctx, e, k, sp.args(op, permits)...)
		}
		specOf := func(s Settings) *spec {
			sp, err := s.spec()
			if err != nil {
				t.Fatal(err)
			}
			return sp
		}

		// One charge of 2^31 - 1 permits: the user's case at the script.
		for _, c := range []struct {
			name string
			s    Settings
		}{
			{"gcra", g10},
			{"bucket", min10},
			{"composite", Composite{Components: []Settings{min10, SlidingWindow{Limit: 20, Window: time.Minute, Segments: 4}, FixedWindow{Limit: 30, Window: time.Minute}}}},
			{"composite-gcra", Composite{Components: []Settings{FixedWindow{Limit: 30, Window: time.Minute}, g10}}},
		} {
			sp := specOf(c.s)
			key := "once:" + c.name
			if r, err := run(sp, key, "d", 1); err != nil || !r.(decideReply).Acquired {
				t.Fatalf("%s: grant: %+v %v", c.name, r, err)
			}
			before := dump(t, raw, b.Key(key))
			_, err := run(sp, key, "a", most)
			wantOutOfRange(t, c.name+": a charge of 2^31-1", err)
			if after := dump(t, raw, b.Key(key)); after != before {
				t.Fatalf("%s: the refused charge changed the key: %s, was %s", c.name, after, before)
			}
			lim, err := New(coord, key, c.s)
			if err != nil {
				t.Fatal(err)
			}
			d, err := lim.Allow(ctx, 1)
			if err != nil || !d.Allowed() || d.Available() != 8 {
				t.Fatalf("%s: Allow(1) after the refused charge: allowed=%v available=%d %v, want 8 available", c.name, d.Allowed(), d.Available(), err)
			}
			_ = lim.Close()
		}

		// At the edge: the last state in range is written, the next charge
		// refused, and the key decides on (refusing for some 229 years).
		serverNow := func() int64 {
			tm, err := raw.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			return tm.UnixMicro()
		}
		centuries := [2]time.Duration{200 * 365 * 24 * time.Hour, math.MaxInt64 - 1}
		edge := func(name string, s Settings, seed string, stored func(v string) string, wantStored string, retry [2]time.Duration) {
			t.Helper()
			sp := specOf(s)
			key := "edge:" + name
			if err := raw.Set(ctx, b.Key(key), seed, time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
			if r, err := run(sp, key, "a", 1); err != nil || !r.(adjustReply).Applied {
				t.Fatalf("%s: the charge up to the edge: %+v %v", name, r, err)
			}
			v, err := raw.Get(ctx, b.Key(key)).Result()
			if err != nil {
				t.Fatal(err)
			}
			if got := stored(v); got != wantStored {
				t.Fatalf("%s: stored %q (%s), want %s", name, v, got, wantStored)
			}
			_, err = run(sp, key, "a", 1)
			wantOutOfRange(t, name+": the charge past the edge", err)
			if after := dump(t, raw, b.Key(key)); after != "string "+v {
				t.Fatalf("%s: the refused charge changed the key: %s, was %s", name, after, v)
			}
			lim, err := New(coord, key, s)
			if err != nil {
				t.Fatal(err)
			}
			defer lim.Close()
			d, err := lim.Allow(ctx, 1)
			ra, ok := d.RetryAfter()
			if err != nil || d.Allowed() || !ok || ra < retry[0] || ra > retry[1] {
				t.Fatalf("%s: Allow(1) at the edge: allowed=%v RetryAfter=%v,%v %v, want refused for %v to %v", name, d.Allowed(), ra, ok, err, retry[0], retry[1])
			}
		}
		field := func(i int) func(string) string {
			return func(v string) string { return strings.Split(v, "|")[i] }
		}

		// GCRA, one permit a second: the arrival time 1 s before 2^53, then
		// at 2^53 - 1.
		edge("gcra", GCRA{Burst: 10, Interval: time.Second}, fmt.Sprintf("g:10:1000000:1|%d|0", maxN-1_000_001), field(1), strconv.FormatInt(maxN-1, 10), centuries)

		// A token bucket of 1, one token a second: a debt whose refill ends
		// 1 to 2 s before 2^53, then 0 to 1 s before (the end, refill + (1
		// - tokens) s, does not move as whole periods pass).
		now := serverNow()
		n := (maxN-now+999_999)/1_000_000 - 2
		end := now + n*1_000_000
		edge("bucket", TokenBucket{Limit: 1, TokensPerPeriod: 1, Period: time.Second}, fmt.Sprintf("b:1:1:1000000|%d|%d", 1-n, now), func(v string) string {
			f := strings.Split(v, "|")
			tk, _ := strconv.ParseInt(f[1], 10, 64)
			r, _ := strconv.ParseInt(f[2], 10, 64)
			return strconv.FormatInt(r+(1-tk)*1_000_000, 10)
		}, strconv.FormatInt(end+1_000_000, 10), centuries)

		// A sliding window holding 2^53 - 2 in the segment of now: its
		// permits return at most a window and a segment later.
		now = serverNow()
		g := int64(15_000_000) // a minute in 4 segments
		edge("sliding", SlidingWindow{Limit: 10, Window: time.Minute, Segments: 4}, fmt.Sprintf("s:10:60000000:4|%d|%d|%d|%d", maxN-2, now/g, now/g, maxN-2), field(1), strconv.FormatInt(maxN-1, 10),
			[2]time.Duration{time.Microsecond, 75 * time.Second})

		// A fixed window's count stops just below 10^14: in range, no
		// refusal.
		sp := specOf(FixedWindow{Limit: 10, Window: time.Minute})
		endMs := serverNow()/1000 + 60_000
		if err := raw.Set(ctx, b.Key("edge:fixed"), fmt.Sprintf("f:10:60000|%d|%d", endMs, int64(1e14)-10), time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if r, err := run(sp, "edge:fixed", "a", most); err != nil || !r.(adjustReply).Applied {
			t.Fatalf("fixed: a charge of 2^31-1 on a count of 10^14-10: %+v %v", r, err)
		}
		if v, _ := raw.Get(ctx, b.Key("edge:fixed")).Result(); v != fmt.Sprintf("f:10:60000|%d|99999999999999", endMs) {
			t.Fatalf("fixed: stored %q, want the count at 10^14 - 1", v)
		}

		// A refund on a GCRA state whose lead over now, in thirds of a µs,
		// is past 2^53 (an earlier release wrote such states) is refused
		// rather than computed inexactly.
		sp = specOf(GCRA{Burst: 3, Rate: 3, Period: time.Second}) // g:3:1000000:3
		legacy := fmt.Sprintf("g:3:1000000:3|%d|0", serverNow()+3_100_000_000_000_000)
		if err := raw.Set(ctx, b.Key("legacy"), legacy, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		_, err = sp.scripts.adjust.Run(ctx, e, e.Key("legacy"), sp.args("r"+strconv.FormatInt(serverNow()+1_000_000, 10), 1)...) // a grant a second from now: given back whole
		wantOutOfRange(t, "gcra: a refund on a lead past 2^53", err)
		wantValue(t, b, "legacy", legacy)
	})
}

// wantOutOfRange checks a script's refusal of an adjustment out of range.
func wantOutOfRange(t testing.TB, what string, err error) {
	t.Helper()
	const want = "coordination: the adjustment would take the limiter state out of range (COORD_BADARG)"
	if err == nil || !strings.HasSuffix(err.Error(), want) || !errors.Is(err, coordination.ErrInvalidArgument) {
		t.Fatalf("%s: %v, want ErrInvalidArgument ...%s", what, err, want)
	}
}

// wantValue checks that key holds v.
func wantValue(t testing.TB, b *testharness.Backend, key, v string) {
	t.Helper()
	if got := dump(t, b.Raw(t), b.Key(key)); got != "string "+v {
		t.Fatalf("%s holds %q, want %q", key, got, v)
	}
}
