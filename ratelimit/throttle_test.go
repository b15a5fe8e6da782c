package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// wantDecision checks a decision's allowed, available and RetryAfter
// (retry < 0: none).
func wantDecision(t testing.TB, what string, d Decision, err error, allowed bool, avail int64, retry time.Duration) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	ra, ok := d.RetryAfter()
	if d.Allowed() != allowed || d.Available() != avail || ok != (retry >= 0) || (ok && ra != retry) {
		t.Fatalf("%s: allowed=%v available=%d RetryAfter=%v,%v; want %v %d %v", what, d.Allowed(), d.Available(), ra, ok, allowed, avail, retry)
	}
}

// TestThrottleBlocksUntilQuiet: a throttle grants Limit permits, then
// refuses with RetryAfter exactly Quiet (the refused attempt moved the end
// of the block to Quiet after it, on the server's clock: exact on every
// server); probes do not move it; the stored state is what the script's
// header says. On miniredis every step is exact: attempts while blocked
// keep it blocked, and the count starts over exactly Quiet after the
// latest attempt (still refused 1 ms before). On real servers, a
// limiter of 200 ms is granted again after sleeping 300 ms (a stall only
// lengthens the quiet).
func TestThrottleBlocksUntilQuiet(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		c := b.Coordinator(t)
		l, err := New(c, "throttle:login", Throttle{Limit: 3, Quiet: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		for i := range 3 {
			d, err := l.Allow(ctx, 1)
			wantDecision(t, fmt.Sprint("attempt ", i+1), d, err, true, int64(2-i), -1)
		}
		d, err := l.Allow(ctx, 1)
		wantDecision(t, "attempt 4", d, err, false, 0, time.Minute)
		raw := b.Raw(t)
		v, err := raw.Get(ctx, b.Key("throttle:login")).Result()
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`^t:3:60000\|3\|(\d+)\|(\d+)$`).FindStringSubmatch(v)
		if m == nil || len(m[1]) != 16 || m[1] > m[2] {
			t.Fatalf("stored %q, want t:3:60000|3|<first µs>|<latest µs>", v)
		}
		if pt, err := raw.PTTL(ctx, b.Key("throttle:login")).Result(); err != nil || pt <= 0 || pt > time.Minute+time.Millisecond {
			t.Fatalf("PTTL %v, %v: want at most the quiet period", pt, err)
		}
		if !b.IsMini() {
			// A short throttle comes back after a quiet spell.
			s, err := New(c, "throttle:short", Throttle{Limit: 1, Quiet: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			d, err := s.Allow(ctx, 1)
			wantDecision(t, "short 1", d, err, true, 0, -1)
			d, err = s.Allow(ctx, 1)
			wantDecision(t, "short 2", d, err, false, 0, 200*time.Millisecond)
			b.Advance(300 * time.Millisecond)
			d, err = s.Allow(ctx, 1)
			wantDecision(t, "short after quiet", d, err, true, 0, -1)
			return
		}
		b.Advance(10 * time.Second)
		d, err = l.Peek(ctx)
		wantDecision(t, "peek 10 s later", d, err, false, 0, 50*time.Second)
		d, err = l.Allow(ctx, 0)
		wantDecision(t, "probe 10 s later", d, err, false, 0, 50*time.Second)
		b.Advance(50*time.Second - time.Millisecond)
		d, err = l.Allow(ctx, 1)
		wantDecision(t, "attempt 1 ms before the end", d, err, false, 0, time.Minute)
		for i := range 3 {
			b.Advance(time.Minute - time.Millisecond)
			d, err = l.Allow(ctx, 1)
			wantDecision(t, fmt.Sprint("blocked attempt ", i), d, err, false, 0, time.Minute)
		}
		b.Advance(time.Minute - time.Millisecond)
		d, err = l.Peek(ctx)
		wantDecision(t, "peek 1 ms before the end", d, err, false, 0, time.Millisecond)
		b.Advance(time.Millisecond)
		d, err = l.Peek(ctx)
		wantDecision(t, "peek at the end", d, err, true, 3, -1)
		if n, err := raw.Exists(ctx, b.Key("throttle:login")).Result(); err != nil || n != 0 {
			t.Fatalf("key exists %d, %v after the run ended", n, err)
		}
		// Granted attempts extend the run too: 3 attempts 59 s apart, then
		// the 4th is refused.
		for i := range 3 {
			d, err = l.Allow(ctx, 1)
			wantDecision(t, fmt.Sprint("spread attempt ", i+1), d, err, true, int64(2-i), -1)
			b.Advance(59 * time.Second)
		}
		d, err = l.Allow(ctx, 1)
		wantDecision(t, "spread attempt 4", d, err, false, 0, time.Minute)
	})
}

// TestThrottleAdmin: Update keeps the count (the new limit applies at
// once), Reserve / Settle gives an unused estimate back to the run that
// holds it (reserve 1, settle 0: "count only failed logins") and charges
// an excess, Penalize counts as an attempt, Reward gives back, Reset
// empties the key; on every server.
func TestThrottleAdmin(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		c := b.Coordinator(t)
		l, err := New(c, "throttle:admin", Throttle{Limit: 2, Quiet: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		for i := range 2 {
			d, err := l.Allow(ctx, 1)
			wantDecision(t, "grant", d, err, true, int64(1-i), -1)
		}
		if err := l.Update(ctx, Throttle{Limit: 4, Quiet: time.Hour}); err != nil {
			t.Fatal(err)
		}
		d, err := l.Allow(ctx, 2)
		wantDecision(t, "2 more under limit 4", d, err, true, 0, -1)
		d, err = l.Allow(ctx, 1)
		wantDecision(t, "refused under limit 4", d, err, false, 0, time.Hour)
		if err := l.Reset(ctx); err != nil {
			t.Fatal(err)
		}
		d, err = l.Peek(ctx)
		wantDecision(t, "after Reset", d, err, true, 4, -1)

		// Reserve 1, settle 0: nothing counted.
		for range 5 {
			r, err := l.Reserve(ctx, 1)
			wantDecision(t, "reserve", r.Decision, err, true, 3, -1)
			if n, err := r.Settle(ctx, 0); n != 1 || err != nil {
				t.Fatalf("Settle(0) = %d, %v; want 1 given back", n, err)
			}
		}
		r, err := l.Reserve(ctx, 1)
		wantDecision(t, "reserve", r.Decision, err, true, 3, -1)
		if n, err := r.Settle(ctx, 3); n != -2 || err != nil {
			t.Fatalf("Settle(3) = %d, %v; want -2", n, err)
		}
		d, err = l.Allow(ctx, 1)
		wantDecision(t, "after the excess", d, err, true, 0, -1)
		if a, err := l.Reward(ctx, 3); a != 3 || err != nil {
			t.Fatalf("Reward(3) = %d, %v; want 3", a, err)
		}
		if a, err := l.Penalize(ctx, 6); a != 0 || err != nil {
			t.Fatalf("Penalize(6) = %d, %v; want 0", a, err)
		}
		d, err = l.Allow(ctx, 1)
		wantDecision(t, "after the penalty", d, err, false, 0, time.Hour)
		if a, err := l.Reward(ctx, 5); a != 2 || err != nil {
			t.Fatalf("Reward(5) = %d, %v; want 2 (7 counted, limit 4)", a, err)
		}
	})
}

// TestThrottleRefusals: another algorithm's key, other settings under
// WithStrictSettings and malformed state are errors that change nothing
// in Redis; WithBatch and a composite component are refused naming the
// argument, before anything is sent.
func TestThrottleRefusals(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		c := b.Coordinator(t)
		raw := b.Raw(t)
		l, err := New(c, "throttle:x", Throttle{Limit: 2, Quiet: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if _, err := l.Allow(ctx, 1); err != nil {
			t.Fatal(err)
		}
		before, err := raw.Get(ctx, b.Key("throttle:x")).Result()
		if err != nil {
			t.Fatal(err)
		}
		g, _ := New(c, "throttle:x", GCRA{Burst: 2, Interval: time.Second})
		defer g.Close()
		strict, _ := New(c, "throttle:x", Throttle{Limit: 3, Quiet: time.Hour}, WithStrictSettings(true))
		defer strict.Close()
		for what, call := range map[string]func() error{
			"GCRA on a throttle": func() error { _, err := g.Allow(ctx, 1); return err },
			"strict other limit": func() error { _, err := strict.Allow(ctx, 1); return err },
		} {
			if err := call(); !errors.Is(err, coordination.ErrConfigMismatch) {
				t.Fatalf("%s: %v, want ErrConfigMismatch", what, err)
			}
		}
		if after, err := raw.Get(ctx, b.Key("throttle:x")).Result(); err != nil || after != before {
			t.Fatalf("key %q, %v after refusals; want %q unchanged", after, err, before)
		}
		if err := raw.Set(ctx, b.Key("throttle:x"), "t:2:3600000|1|9|8", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Allow(ctx, 1); !errors.Is(err, coordination.ErrBadState) {
			t.Fatalf("first attempt after the latest: %v, want ErrBadState", err)
		}
		if v, _ := raw.Get(ctx, b.Key("throttle:x")).Result(); v != "t:2:3600000|1|9|8" {
			t.Fatalf("malformed state changed to %q", v)
		}
		if _, err := New(c, "k", Throttle{Limit: 2, Quiet: time.Hour}, WithBatch(1, time.Millisecond)); !isInvalid(err, "block") {
			t.Fatalf("WithBatch: %v, want ErrInvalidArgument naming block", err)
		}
		if _, err := New(c, "k", Composite{Components: []Settings{GCRA{Burst: 1, Interval: time.Second}, &Throttle{Limit: 2, Quiet: time.Hour}}}); !isInvalid(err, "components") {
			t.Fatalf("composite: %v, want ErrInvalidArgument naming components", err)
		}
		for name, s := range map[string]Throttle{"limit": {Quiet: time.Second}, "quiet": {Limit: 1, Quiet: time.Millisecond + time.Microsecond}} {
			if _, err := New(c, "k", s); !isInvalid(err, name) {
				t.Fatalf("%+v: %v, want ErrInvalidArgument naming %s", s, err, name)
			}
		}
		if err := l.Update(ctx, GCRA{Burst: 1, Interval: time.Second}); !isInvalid(err, "settings") {
			t.Fatalf("Update to GCRA: %v", err)
		}
		if n, err := raw.Exists(ctx, b.Key("k")).Result(); err != nil || n != 0 {
			t.Fatalf("key k exists: %d, %v", n, err)
		}
	})
}

// isInvalid reports an ErrInvalidArgument naming arg.
func isInvalid(err error, arg string) bool {
	name, _ := check.ArgumentName(err)
	return errors.Is(err, coordination.ErrInvalidArgument) && name == arg
}

// The per-replica share of WithLocalFallback divides a throttle's and a
// sliding log's Limit (rounded up), keeping Quiet and Window.
func TestLocalShareOfThrottleAndSlidingLog(t *testing.T) {
	a := newLocalState(nil, &fallbackSwitch{replicas: 3})
	for s, want := range map[Settings]string{
		Throttle{Limit: 5, Quiet: time.Minute}:              "t:2:60000",
		&SlidingLog{Limit: 7, Window: 15 * time.Minute}:     "l:3:900000000",
		SlidingLog{Limit: 1, Window: 15 * time.Millisecond}: "l:1:15000",
	} {
		sp, err := s.spec()
		if err != nil {
			t.Fatal(err)
		}
		sh, err := a.share(sp)
		if err != nil || sh.cfg != want {
			t.Fatalf("share of %+v = %v, %v; want %s", s, sh, err, want)
		}
	}
}
