package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// logEntries reads a sliding log's stored entries' permits, oldest first,
// checking the key's layout.
func logEntries(t testing.TB, b *testharness.Backend, key, cfg string) []int64 {
	t.Helper()
	v, err := b.Raw(t).Get(context.Background(), b.Key(key)).Result()
	if err != nil {
		t.Fatal(err)
	}
	body, ok := strings.CutPrefix(v, cfg+"|")
	m := regexp.MustCompile(`^(\d+)\|(\d+)\|(\d{16})\|(\d{16}:\d+(?:,\d{16}:\d+)*)$`).FindStringSubmatch(body)
	if !ok || m == nil {
		t.Fatalf("stored %q, want %s|<n>|<entries>|<newest µs>|<µs>:<permits>,...", v, cfg)
	}
	var ks []int64
	var sum int64
	var newest string
	for _, e := range strings.Split(m[4], ",") {
		i := strings.IndexByte(e, ':')
		k, _ := strconv.ParseInt(e[i+1:], 10, 64)
		ks = append(ks, k)
		sum += k
		newest = e[:i]
	}
	if m[1] != strconv.FormatInt(sum, 10) || m[2] != strconv.Itoa(len(ks)) || m[3] != newest {
		t.Fatalf("stored %q: the header does not match the entries", v)
	}
	return ks
}

// TestSlidingLogIsExact: a sliding log admits Limit permits in any span
// of Window, each permit leaving exactly Window after its grant: on
// miniredis to the µs (refused 1 µs before the oldest grant leaves, with
// RetryAfter until then; the next grant frees only as many permits as
// the oldest entry holds). On real servers, with a window of an hour,
// the counts, the stored entries and a refusal's RetryAfter (at most the
// window, at least the window less the time the test took) are checked.
func TestSlidingLogIsExact(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		c := b.Coordinator(t)
		win := time.Hour
		if b.IsMini() {
			win = 15 * time.Minute
		}
		start := time.Now()
		l, err := New(c, "log:api", SlidingLog{Limit: 5, Window: win})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		cfg := fmt.Sprintf("l:5:%d", win.Microseconds())
		steps := []int{2, 1, 2}
		for i, n := range steps {
			d, err := l.Allow(ctx, n)
			left := []int64{3, 2, 0}[i]
			wantDecision(t, fmt.Sprint("grant ", i), d, err, true, left, -1)
			if b.IsMini() {
				b.Advance(time.Minute)
			}
		}
		if got := logEntries(t, b, "log:api", cfg); fmt.Sprint(got) != "[2 1 2]" {
			t.Fatalf("entries %v, want [2 1 2]", got)
		}
		d, err := l.Allow(ctx, 1)
		if !b.IsMini() {
			ra, ok := d.RetryAfter()
			if err != nil || d.Allowed() || d.Available() != 0 || !ok || ra > win || ra < win-time.Since(start) {
				t.Fatalf("refusal %+v %v: RetryAfter %v, want about %v", d, err, ra, win)
			}
			if got := logEntries(t, b, "log:api", cfg); fmt.Sprint(got) != "[2 1 2]" {
				t.Fatalf("a refusal wrote: entries %v", got)
			}
			return
		}
		// 3 minutes after the first grant: it leaves 12 minutes later.
		wantDecision(t, "refused", d, err, false, 0, 12*time.Minute)
		d, err = l.Allow(ctx, 3)
		wantDecision(t, "3 need the second entry too", d, err, false, 0, 13*time.Minute)
		b.Advance(12*time.Minute - time.Microsecond)
		d, err = l.Allow(ctx, 1)
		wantDecision(t, "1 µs before", d, err, false, 0, time.Microsecond)
		b.Advance(time.Microsecond)
		d, err = l.Allow(ctx, 2)
		wantDecision(t, "the oldest left", d, err, true, 0, -1)
		d, err = l.Allow(ctx, 1)
		wantDecision(t, "the next leaves a minute later", d, err, false, 0, time.Minute)
		if got := logEntries(t, b, "log:api", cfg); fmt.Sprint(got) != "[1 2 2]" {
			t.Fatalf("entries %v, want [1 2 2]", got)
		}
		pt, err := b.Raw(t).PTTL(ctx, b.Key("log:api")).Result()
		if err != nil || pt != win {
			t.Fatalf("PTTL %v, %v; want the window (the newest entry is now)", pt, err)
		}
		b.Advance(win)
		d, err = l.Peek(ctx)
		wantDecision(t, "a window later", d, err, true, 5, -1)
	})
}

// TestSlidingLogAdmin: Update keeps the entries under the new limit,
// Reserve / Settle gives back from the grant's own entry, Penalize adds
// an entry (merged into the oldest ones past Limit entries), Reward takes
// from the newest, Reset empties; bad input and foreign state change
// nothing; on every server.
func TestSlidingLogAdmin(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		c := b.Coordinator(t)
		raw := b.Raw(t)
		l, err := New(c, "log:admin", SlidingLog{Limit: 3, Window: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		cfg := "l:3:3600000000"
		for i := range 3 {
			d, err := l.Allow(ctx, 1)
			wantDecision(t, "grant", d, err, true, int64(2-i), -1)
			b.Advance(time.Millisecond) // distinct entries
		}
		if err := l.Update(ctx, SlidingLog{Limit: 4, Window: time.Hour}); err != nil {
			t.Fatal(err)
		}
		cfg = "l:4:3600000000"
		r, err := l.Reserve(ctx, 1)
		wantDecision(t, "reserve under limit 4", r.Decision, err, true, 0, -1)
		if n, err := r.Settle(ctx, 0); n != 1 || err != nil {
			t.Fatalf("Settle(0) = %d, %v", n, err)
		}
		if got := logEntries(t, b, "log:admin", cfg); len(got) != 3 {
			t.Fatalf("entries %v after the give-back, want 3 of 1", got)
		}
		if a, err := l.Penalize(ctx, 5); a != 0 || err != nil {
			t.Fatalf("Penalize(5) = %d, %v", a, err)
		}
		b.Advance(time.Millisecond)
		if a, err := l.Penalize(ctx, 1); a != 0 || err != nil {
			t.Fatalf("Penalize(1) = %d, %v", a, err)
		}
		// 5 entries for limit 4: the two oldest merged.
		if got := logEntries(t, b, "log:admin", cfg); fmt.Sprint(got) != "[2 1 5 1]" {
			t.Fatalf("entries %v, want [2 1 5 1]", got)
		}
		if a, err := l.Reward(ctx, 6); a != 1 || err != nil {
			t.Fatalf("Reward(6) = %d, %v; want 1 (3 left of 4)", a, err)
		}
		if got := logEntries(t, b, "log:admin", cfg); fmt.Sprint(got) != "[2 1]" {
			t.Fatalf("entries %v after the reward, want [2 1]", got)
		}
		before, _ := raw.Get(ctx, b.Key("log:admin")).Result()
		g, _ := New(c, "log:admin", FixedWindow{Limit: 2, Window: time.Second})
		defer g.Close()
		strict, _ := New(c, "log:admin", SlidingLog{Limit: 9, Window: time.Hour}, WithStrictSettings(true))
		defer strict.Close()
		if _, err := g.Allow(ctx, 1); !errors.Is(err, coordination.ErrConfigMismatch) {
			t.Fatalf("fixed window on a log: %v", err)
		}
		if _, err := strict.Allow(ctx, 1); !errors.Is(err, coordination.ErrConfigMismatch) {
			t.Fatalf("strict other limit: %v", err)
		}
		// A decision reads the entries it needs: these are malformed in
		// them (out of order, 0 permits, a bad form, a newest time past
		// 2^53, an entry newer than the newest, a total below an entry).
		for _, bad := range []string{cfg + "|2|2|5|5:1,4:1", cfg + "|1|1|1|1:0", cfg + "|1|1|1|1:1;", cfg + "|x", cfg + "|1|1|9999999999999999|1:1",
			cfg + "|1|1|8999999999999998|8999999999999999:1", cfg + "|1|1|8999999999999999|8999999999999999:2"} {
			if err := raw.Set(ctx, b.Key("log:bad"), bad, 0).Err(); err != nil {
				t.Fatal(err)
			}
			lb, _ := New(c, "log:bad", SlidingLog{Limit: 4, Window: time.Hour})
			if _, err := lb.Allow(ctx, 1); !errors.Is(err, coordination.ErrBadState) && !errors.Is(err, coordination.ErrConfigMismatch) {
				t.Fatalf("state %q: %v, want ErrBadState", bad, err)
			}
			lb.Close()
			if v, _ := raw.Get(ctx, b.Key("log:bad")).Result(); v != bad {
				t.Fatalf("state %q changed to %q", bad, v)
			}
		}
		// A give-back reads every entry: a header counting fewer entries
		// than the key holds is found.
		bad := cfg + "|2|1|8999999999999999|8999999999999998:1,8999999999999999:1"
		if err := raw.Set(ctx, b.Key("log:bad"), bad, 0).Err(); err != nil {
			t.Fatal(err)
		}
		lb, _ := New(c, "log:bad", SlidingLog{Limit: 4, Window: time.Hour})
		if _, err := lb.Reward(ctx, 1); !errors.Is(err, coordination.ErrBadState) {
			t.Fatalf("Reward on %q: %v, want ErrBadState", bad, err)
		}
		lb.Close()
		if after, _ := raw.Get(ctx, b.Key("log:admin")).Result(); after != before {
			t.Fatalf("refusals wrote: %q, was %q", after, before)
		}
		if _, err := New(c, "k", Composite{Components: []Settings{SlidingLog{Limit: 2, Window: time.Hour}}}); !isInvalid(err, "components") {
			t.Fatalf("composite: %v", err)
		}
		for name, s := range map[string]SlidingLog{"limit": {Limit: 1001, Window: time.Hour}, "window": {Limit: 1, Window: time.Millisecond + time.Nanosecond}} {
			if _, err := New(c, "k", s); !isInvalid(err, name) {
				t.Fatalf("%+v: %v, want naming %s", s, err, name)
			}
		}
		if err := l.Reset(ctx); err != nil {
			t.Fatal(err)
		}
		d, err := l.Peek(ctx)
		wantDecision(t, "after Reset", d, err, true, 4, -1)
		// WithBatch: a block of 2 taken as one entry, the unused permit
		// given back on Close.
		bl, err := New(c, "log:batch", SlidingLog{Limit: 4, Window: time.Hour}, WithBatch(2, time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if d, err := bl.Allow(ctx, 1); err != nil || !d.Allowed() {
			t.Fatal(d, err)
		}
		if got := logEntries(t, b, "log:batch", "l:4:3600000000"); fmt.Sprint(got) != "[2]" {
			t.Fatalf("batch entries %v, want [2]", got)
		}
		bl.Close()
		if got := logEntries(t, b, "log:batch", "l:4:3600000000"); fmt.Sprint(got) != "[1]" {
			t.Fatalf("batch entries %v after Close, want [1]", got)
		}
		if n, err := raw.Exists(ctx, b.Key("k")).Result(); err != nil || n != 0 {
			t.Fatalf("key k exists: %d, %v", n, err)
		}
	})
}
