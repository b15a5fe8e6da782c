package ratelimit

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	_ "time/tzdata" // the zones below, on any machine

	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/localrate"
	"github.com/coordkit/coordination/internal/sentinel"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

func zone(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// calClock makes l's calendar boundaries come from clock (before the
// limiter's first use).
func calClock(t testing.TB, l *tlim, clock func() time.Time) {
	t.Helper()
	sp := l.spec()
	if sp.cal == nil {
		t.Fatalf("limiter %q has no calendar", sp.cfg)
	}
	sp.cal.clock = clock
}

// to moves miniredis' clock forward to at.
func to(t testing.TB, b *testharness.Backend, at time.Time) {
	t.Helper()
	d := at.Sub(b.Now())
	if d < 0 {
		t.Fatalf("cannot move the clock back to %v from %v", at, b.Now())
	}
	b.Advance(d)
}

// stored reads a fixed window's key: its cfg, end (ms) and count.
func stored(t testing.TB, b *testharness.Backend, key string) (cfg string, end, used int64) {
	t.Helper()
	v, err := b.Raw(t).Get(context.Background(), b.Key(key)).Result()
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	p := strings.Split(v, "|")
	if len(p) != 3 {
		t.Fatalf("GET %s = %q, want <cfg>|<end>|<used>", key, v)
	}
	end, err1 := strconv.ParseInt(p[1], 10, 64)
	used, err2 := strconv.ParseInt(p[2], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("GET %s = %q", key, v)
	}
	return p[0], end, used
}

// exhaust takes all n permits of l and checks that the next request is
// refused; it returns that refusal's RetryAfter.
func exhaust(t testing.TB, l *tlim, n int) time.Duration {
	t.Helper()
	wantBurst(t, l, n, n, "fresh window")
	le := acquire(t, l, 1)
	ra, ok := le.RetryAfter()
	if le.Acquired() || !ok {
		t.Fatalf("request %d: acquired %v, RetryAfter %v %v; want refused with RetryAfter", n+1, le.Acquired(), ra, ok)
	}
	return ra
}

func lastSunday(year int, month time.Month, loc *time.Location) time.Time {
	d := time.Date(year, month+1, 0, 0, 0, 0, 0, loc) // the month's last day
	for d.Weekday() != time.Sunday {
		d = time.Date(d.Year(), d.Month(), d.Day()-1, 0, 0, 0, 0, loc)
	}
	return d
}

func TestFixedWindowAlignmentBadInput(t *testing.T) {
	berlin := zone(t, "Europe/Berlin")
	coord := testharness.Get(t, "miniredis").Coordinator(t)
	for _, c := range []struct {
		s    Settings
		name string
	}{
		{FixedWindow{Limit: 1, Window: time.Minute, Align: -1}, "align"},
		{FixedWindow{Limit: 1, Window: time.Minute, Align: AlignMonth + 1}, "align"},
		{FixedWindow{Limit: 1, Align: AlignEpoch}, "window"},
		{FixedWindow{Limit: 1, Window: 1500 * time.Microsecond, Align: AlignEpoch}, "window"},
		{FixedWindow{Limit: 1, Window: time.Hour, Align: AlignDay}, "window"},
		{FixedWindow{Limit: 1, Window: time.Minute, Location: berlin}, "location"},
		{FixedWindow{Limit: 1, Window: time.Minute, Align: AlignEpoch, Location: berlin}, "location"},
		{FixedWindow{Limit: 1, Align: AlignDay, Location: time.Local}, "location"},
		{FixedWindow{Limit: 1, Align: AlignDay, Location: time.FixedZone("a|b", 3600)}, "location"},
		{FixedWindow{Limit: 1, Align: AlignDay, Location: time.FixedZone("", 3600)}, "location"},
		// A zone is stored and loaded by name: a FixedZone named as a tz
		// zone with other offsets would be another zone on every replica.
		{FixedWindow{Limit: 1, Align: AlignDay, Location: time.FixedZone("UTC", 5*3600)}, "location"},
		{FixedWindow{Limit: 1, Align: AlignDay, Location: time.FixedZone("Europe/Berlin", 0)}, "location"},
		{FixedWindow{Limit: 1, Align: AlignDay, Location: time.FixedZone("Mars/Olympus", 0)}, "location"},
		{FixedWindow{Limit: 0, Align: AlignDay}, "limit"},
		{Composite{Components: []Settings{GCRA{Burst: 1, Interval: time.Second}, FixedWindow{Limit: 1, Window: time.Hour, Align: AlignHour}}}, "window"},
	} {
		_, err := New(coord, "k", c.s)
		if name, _ := check.ArgumentName(err); name != c.name || !isErr(err, sentinel.ErrInvalidArgument) {
			t.Errorf("New(%+v) = %v, want an invalid argument naming %q", c.s, err, c.name)
		}
	}
}

// The stored settings name the alignment: the same limit and window
// aligned otherwise, or a calendar period in another zone, are other
// settings.
func TestFixedWindowAlignmentSettings(t *testing.T) {
	berlin, ny := zone(t, "Europe/Berlin"), zone(t, "America/New_York")
	for _, c := range []struct {
		s   FixedWindow
		cfg string
	}{
		{FixedWindow{Limit: 5, Window: time.Minute}, "f:5:60000"},
		{FixedWindow{Limit: 5, Window: time.Minute, Align: AlignEpoch}, "f:5:60000:e"},
		{FixedWindow{Limit: 5, Align: AlignMinute}, "f:5:60000:e"},
		{FixedWindow{Limit: 5, Align: AlignDay}, "f:5:86400000:e"},
		{FixedWindow{Limit: 5, Align: AlignDay, Location: time.UTC}, "f:5:86400000:e"},
		{FixedWindow{Limit: 5, Align: AlignMonth}, "f:5:0:M:UTC"},
		{FixedWindow{Limit: 5, Align: AlignDay, Location: berlin}, "f:5:0:d:Europe/Berlin"},
		{FixedWindow{Limit: 5, Align: AlignHour, Location: ny}, "f:5:0:h:America/New_York"},
		{FixedWindow{Limit: 5, Align: AlignMinute, Location: ny}, "f:5:0:m:America/New_York"},
	} {
		sp, err := specOf("settings", c.s)
		if err != nil || sp.cfg != c.cfg || (sp.cal != nil) != strings.Contains(c.cfg, "/") && c.s.Align != AlignMonth {
			t.Errorf("%+v: cfg %q (calendar %v), %v; want %q", c.s, sp.cfg, sp.cal != nil, err, c.cfg)
		}
	}
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		coord := b.Coordinator(t)
		plain := build(t, coord, kFixed, "fw", 5, time.Minute)
		wantBurst(t, plain, 2, 2, "unaligned")
		for _, s := range []FixedWindow{
			{Limit: 5, Window: time.Minute, Align: AlignEpoch},
			{Limit: 5, Align: AlignDay, Location: berlin},
		} {
			strict, err := newT(coord, "fw", s, WithStrictSettings(true))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := strict.Allow(context.Background(), 1); !isErr(err, sentinel.ErrConfigMismatch) {
				t.Fatalf("strict %+v on an unaligned key: %v, want ErrConfigMismatch", s, err)
			}
			_ = strict.Close()
		}
		// Update migrates: the count and the window's end stay, the
		// alignment applies from the next window.
		_, end0, _ := stored(t, b, "fw")
		if err := plain.Update(context.Background(), FixedWindow{Limit: 5, Window: time.Minute, Align: AlignEpoch}); err != nil {
			t.Fatal(err)
		}
		if le := acquire(t, plain, 1); !le.Acquired() || le.Available() != 2 {
			t.Fatalf("after Update: acquired %v, available %d; want granted, 2 left", le.Acquired(), le.Available())
		}
		if cfg, end, used := stored(t, b, "fw"); cfg != "f:5:60000:e" || end != end0 || used != 3 {
			t.Fatalf("after Update: %q|%d|%d, want f:5:60000:e|%d|3", cfg, end, used, end0)
		}
	})
}

// On miniredis (whose clock is set): a calendar day in Europe/Berlin ends
// at local midnight, across both daylight-saving changes (23- and 25-hour
// days); a month ends on the 1st; an epoch-aligned window at a multiple of
// its length; RetryAfter runs exactly to the boundary.
func TestFixedWindowCalendarBoundaries(t *testing.T) {
	berlin := zone(t, "Europe/Berlin")
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		coord := b.Coordinator(t)
		y := b.Now().Year() + 1
		ctx := context.Background()

		// Epoch alignment: a 7 s window ends at the next multiple of 7 s.
		ep, err := newT(coord, "epoch", FixedWindow{Limit: 2, Window: 7 * time.Second, Align: AlignEpoch})
		if err != nil {
			t.Fatal(err)
		}
		nowUs := b.Now().UnixMicro()
		nowMs := nowUs / 1000
		endMs := nowMs - nowMs%7000 + 7000
		if ra := exhaust(t, ep, 2); ra != time.Duration(endMs*1000-nowUs)*time.Microsecond {
			t.Fatalf("epoch: RetryAfter %v, want %v", ra, time.Duration(endMs*1000-nowUs)*time.Microsecond)
		}
		if _, end, _ := stored(t, b, "epoch"); end != endMs {
			t.Fatalf("epoch: window ends at %d, want %d", end, endMs)
		}

		// A month of UTC: 1 s before February, then February (28 or 29 days).
		feb := time.Date(y, 2, 1, 0, 0, 0, 0, time.UTC)
		to(t, b, feb.Add(-time.Second))
		mo, err := newT(coord, "month", FixedWindow{Limit: 3, Align: AlignMonth})
		if err != nil {
			t.Fatal(err)
		}
		calClock(t, mo, b.Now)
		if ra := exhaust(t, mo, 3); ra != time.Second {
			t.Fatalf("January's last second: RetryAfter %v, want 1s", ra)
		}
		to(t, b, feb)
		mar := time.Date(y, 3, 1, 0, 0, 0, 0, time.UTC)
		if ra := exhaust(t, mo, 3); ra != mar.Sub(feb) {
			t.Fatalf("February: RetryAfter %v, want %v", ra, mar.Sub(feb))
		}
		if _, end, used := stored(t, b, "month"); end != mar.UnixMilli() || used != 3 {
			t.Fatalf("February: window ends at %d with %d used, want %d with 3", end, used, mar.UnixMilli())
		}

		// A Berlin day: half a second before the midnight that starts the
		// 23-hour day of the spring change, then that day.
		spring := lastSunday(y, time.March, berlin)
		to(t, b, spring.Add(-500*time.Millisecond))
		day, err := newT(coord, "day", FixedWindow{Limit: 3, Align: AlignDay, Location: berlin})
		if err != nil {
			t.Fatal(err)
		}
		calClock(t, day, b.Now)
		if ra := exhaust(t, day, 3); ra != 500*time.Millisecond {
			t.Fatalf("before midnight: RetryAfter %v, want 500ms", ra)
		}
		if _, end, _ := stored(t, b, "day"); end != spring.UnixMilli() {
			t.Fatalf("before midnight: window ends at %d, want %d (%v)", end, spring.UnixMilli(), spring)
		}
		to(t, b, spring)
		if ra := exhaust(t, day, 3); ra != 23*time.Hour {
			t.Fatalf("the spring day: RetryAfter %v, want 23h", ra)
		}
		// The autumn change: a 25-hour day, from 1 h after its midnight.
		autumn := lastSunday(y, time.October, berlin)
		to(t, b, autumn.Add(time.Hour))
		if ra := exhaust(t, day, 3); ra != 24*time.Hour {
			t.Fatalf("the autumn day, 1 h in: RetryAfter %v, want 24h", ra)
		}
		if _, end, _ := stored(t, b, "day"); end != time.Date(y, time.October, autumn.Day()+1, 0, 0, 0, 0, berlin).UnixMilli() {
			t.Fatalf("the autumn day: window ends at %d", end)
		}

		// A composite's calendar component: the same boundary.
		to(t, b, time.Date(y, 11, 5, 23, 59, 59, 0, berlin))
		comp, err := newT(coord, "comp", Composite{Components: []Settings{
			GCRA{Burst: 10, Interval: time.Millisecond},
			FixedWindow{Limit: 2, Align: AlignDay, Location: berlin},
		}})
		if err != nil {
			t.Fatal(err)
		}
		calClock(t, comp, b.Now)
		if ra := exhaust(t, comp, 2); ra != time.Second {
			t.Fatalf("composite: RetryAfter %v, want 1s", ra)
		}
		mid := time.Date(y, 11, 6, 0, 0, 0, 0, berlin)
		if v, err := b.Raw(t).HGet(ctx, b.Key("comp"), "2").Result(); err != nil || v != strconv.FormatInt(mid.UnixMilli(), 10)+"|2" {
			t.Fatalf("composite component 2 = %q, %v; want %d|2", v, err, mid.UnixMilli())
		}
		// A refund in the grant's calendar window gives the permit back.
		to(t, b, mid)
		le := grantRefundable(t, comp, 1)
		if ok, err := le.r.refund(ctx); err != nil || !ok {
			t.Fatalf("refund in the same day: %v, %v; want given back", ok, err)
		}
		if v, _ := b.Raw(t).HGet(ctx, b.Key("comp"), "2").Result(); !strings.HasSuffix(v, "|0") {
			t.Fatalf("after the refund, component 2 = %q, want 0 used", v)
		}
	}, testharness.Only("miniredis"))
}

// A process whose clock is more than a period off the server's gets an
// error naming the clocks, and nothing is written.
func TestFixedWindowCalendarClockSkew(t *testing.T) {
	berlin := zone(t, "Europe/Berlin")
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		coord := b.Coordinator(t)
		for _, off := range []time.Duration{-49 * time.Hour, 49 * time.Hour} {
			l, err := newT(coord, "skew", FixedWindow{Limit: 3, Align: AlignDay, Location: berlin})
			if err != nil {
				t.Fatal(err)
			}
			calClock(t, l, func() time.Time { return b.Now().Add(off) })
			_, err = l.Allow(context.Background(), 1)
			if err == nil || !strings.Contains(err.Error(), "COORD_CLOCK") {
				t.Fatalf("clock %v off: %v, want a COORD_CLOCK error", off, err)
			}
			if n, _ := b.Raw(t).Exists(context.Background(), b.Key("skew")).Result(); n != 0 {
				t.Fatalf("clock %v off: the key was written", off)
			}
			// A probe needs no window: it answers.
			if le, err := l.Allow(context.Background(), 0); err != nil || !le.Acquired() || le.Available() != 3 {
				t.Fatalf("probe with the clock off: %v, %v", le, err)
			}
			_ = l.Close()
		}
	})
}

// On every server, at any time of day: an aligned window ends at the
// boundary after the server's time of its first grant (computed here from
// TIME around it), and a refusal's RetryAfter runs to it.
func TestFixedWindowAlignedEndsAtBoundary(t *testing.T) {
	kolkata, ny := zone(t, "Asia/Kolkata"), zone(t, "America/New_York")
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		coord := b.Coordinator(t)
		c := serverClock(t, b)
		for i, s := range []FixedWindow{
			{Limit: 3, Window: 10 * time.Second, Align: AlignEpoch},
			{Limit: 3, Align: AlignMinute},
			{Limit: 3, Align: AlignHour, Location: kolkata}, // +05:30: hours start at :30 UTC
			{Limit: 3, Align: AlignDay, Location: ny},
			{Limit: 3, Align: AlignMonth, Location: kolkata},
		} {
			next := func(at time.Time) time.Time {
				if s.Align == AlignEpoch {
					return at.Truncate(s.Window).Add(s.Window)
				}
				loc := s.Location
				if loc == nil {
					loc = time.UTC
				}
				p := localrate.NewPeriod(periodLetter[s.Align], loc)
				return p.Next(p.Start(at))
			}
			for try := 0; ; try++ {
				key := "al" + strconv.Itoa(i) + "-" + strconv.Itoa(try)
				l, err := newT(coord, key, s)
				if err != nil {
					t.Fatal(err)
				}
				if b.IsMini() && l.spec().cal != nil {
					calClock(t, l, b.Now)
				}
				var ra time.Duration
				st := c.around(func() { ra = exhaust(t, l, 3) })
				_ = l.Close()
				lo, hi := next(st.lo), next(st.hi)
				if lo != hi && try < 3 {
					continue // a boundary passed during the calls: again
				}
				if _, end, used := stored(t, b, key); end != lo.UnixMilli() || used != 3 {
					t.Fatalf("%+v: window ends at %d with %d used, want %d (%v) with 3", s, end, used, lo.UnixMilli(), lo)
				}
				if ra > lo.Sub(st.lo) || ra < lo.Sub(st.hi) {
					t.Fatalf("%+v: RetryAfter %v, want between %v and %v", s, ra, lo.Sub(st.hi), lo.Sub(st.lo))
				}
				break
			}
		}
	})
}

// An in-process limiter (NewLocal) aligns its windows as the scripts do,
// with its own clock: an epoch-aligned window and a Berlin day end at
// their boundaries across the spring change; RetryAfter runs to them.
func TestLocalFixedWindowAligned(t *testing.T) {
	berlin := zone(t, "Europe/Berlin")
	spring := lastSunday(2027, time.March, berlin)
	var now atomic.Int64
	clock := func() int64 { return now.Load() }
	at := func(tm time.Time) { now.Store(tm.UnixMicro()) }
	ctx := context.Background()

	at(spring.Add(-500 * time.Millisecond))
	day, err := NewLocal(FixedWindow{Limit: 2, Align: AlignDay, Location: berlin}, withLocalClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	defer day.Close()
	ep, err := NewLocal(FixedWindow{Limit: 2, Window: 7 * time.Second, Align: AlignEpoch}, withLocalClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	refusal := func(l *Limiter, what string) time.Duration {
		t.Helper()
		for i := range 2 {
			if d, err := l.Allow(ctx, 1); err != nil || !d.Allowed() {
				t.Fatalf("%s: request %d: %+v, %v; want granted", what, i+1, d, err)
			}
		}
		d, err := l.Allow(ctx, 1)
		ra, ok := d.RetryAfter()
		if err != nil || d.Allowed() || !ok {
			t.Fatalf("%s: request 3: %+v, %v; want refused with RetryAfter", what, d, err)
		}
		return ra
	}
	if ra := refusal(day, "before midnight"); ra != 500*time.Millisecond {
		t.Fatalf("before midnight: RetryAfter %v, want 500ms", ra)
	}
	nowMs := now.Load() / 1000
	if ra, want := refusal(ep, "epoch"), time.Duration((nowMs-nowMs%7000+7000)*1000-now.Load())*time.Microsecond; ra != want {
		t.Fatalf("epoch: RetryAfter %v, want %v", ra, want)
	}
	at(spring)
	if ra := refusal(day, "the spring day"); ra != 23*time.Hour {
		t.Fatalf("the spring day: RetryAfter %v, want 23h", ra)
	}
}
