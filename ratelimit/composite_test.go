package ratelimit

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// issueComposite is a token bucket of 10 refilled 2 per second, 100 per
// sliding minute and 1000 per fixed hour on one key.
var issueComposite = Composite{Components: []Settings{
	TokenBucket{Limit: 10, TokensPerPeriod: 2, Period: time.Second},
	SlidingWindow{Limit: 100, Window: time.Minute, Segments: 10},
	FixedWindow{Limit: 1000, Window: time.Hour},
}}

// A composite admits while every component admits, refuses when any
// refuses and then consumes nothing, and its RetryAfter is the longest of
// the components' waits. Exact on miniredis. On real servers each count
// and RetryAfter is checked against the bounds the server's clock, read
// around each step, gives for every component (timing_test.go), which are
// the exact numbers when nothing stalled; the refusals are reached by
// requesting until refused (a stall may have refilled the bucket first;
// each grant is checked), so that every run checks what a refusal leaves.
func TestCompositeAdmitsOnlyWhenAllAdmit(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		c := b.Coordinator(t)
		sc := serverClock(t, b)
		l, err := newT(c, "comp", issueComposite)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		// The bucket binds: the windows (100 a minute, 1000 an hour) hold
		// far more than this part takes.
		m := newBucketModel(issueComposite.Components[0].(TokenBucket))
		sc.wantBurst(l, m, "the bucket's burst", 12, 10)
		// The bucket refuses (a whole period for one token: 1 s); the
		// windows would admit (0): RetryAfter is the longest, 1 s; a
		// refusal changes nothing.
		le := sc.refusal(l, m, "the bucket empty", 1, time.Second, b.Key("comp"))
		if le.Available() != 0 {
			t.Fatalf("Available %d, want the smallest component's 0", le.Available())
		}
		if b.IsMini() {
			// 45 more seconds at 2 per second fill the sliding minute (100);
			// then the bucket has tokens but the window refuses, for longer.
			for range 45 {
				b.Advance(time.Second)
				wantBurst(t, l, 3, 2, "2 per second")
			}
			b.Advance(time.Second)
			state := dump(t, raw, b.Key("comp"))
			le := acquire(t, l, 1)
			ra, ok := le.RetryAfter()
			if le.Acquired() || !ok || ra <= time.Second || ra > time.Minute {
				t.Fatalf("the full window: acquired=%v RetryAfter=%v, want refused for more than the bucket's wait", le.Acquired(), ra)
			}
			if after := dump(t, raw, b.Key("comp")); after != state {
				t.Fatalf("a refusal by the window consumed from the others:\n%s\n->\n%s", state, after)
			}
			b.Advance(ra)
			if !acquire(t, l, 1).Acquired() {
				t.Fatalf("refused after RetryAfter %v", ra)
			}
		}

		// The window binding on a scale real servers can wait for: a
		// bucket of 10 refilled whole every second and 12 per sliding 10 s.
		bucket := TokenBucket{Limit: 10, TokensPerPeriod: 10, Period: time.Second}
		window := SlidingWindow{Limit: 12, Window: 10 * time.Second, Segments: 10}
		s, err := newT(c, "comp-small", Composite{Components: []Settings{bucket, window}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ms := allOf{newBucketModel(bucket), newSlidingModel(window)}
		r := sc.wantBurst(s, ms, "burst", 12, 10)
		b.Advance(1050 * time.Millisecond)
		sc.wantBurst(s, ms, "the window's last 2", 3, 2)
		// The bucket has 8, the window none: the window's wait. The burst's
		// segment (1 s, aligned to server time) leaves the window 10 s
		// after it ends.
		t0 := r.first.lo // on miniredis, the instant of the burst
		back := time.UnixMicro((t0.UnixMicro()/1e6+1)*1e6 + 10e6)
		le = sc.refusal(s, ms, "the window full", 1, back.Sub(t0.Add(1050*time.Millisecond)), b.Key("comp-small"))
		if ra, _ := le.RetryAfter(); ra <= time.Second {
			t.Fatalf("the window full: RetryAfter %v, want the window's wait, longer than the bucket's", ra)
		}
		state := dump(t, raw, b.Key("comp-small"))
		// More than the smallest component's capacity (10) can never be
		// granted: an error, nothing sent.
		if _, err := s.Allow(ctx, 11); !errors.Is(err, coordination.ErrInvalidArgument) || !strings.Contains(err.Error(), "capacity is 10") {
			t.Fatalf("Allow(11) on a composite of capacity 10: %v, want ErrInvalidArgument naming the capacity", err)
		}
		if after := dump(t, raw, b.Key("comp-small")); after != state {
			t.Fatalf("an oversized request changed the state:\n%s\n->\n%s", state, after)
		}
	})
}

// A key holding another composite (other algorithms, another order,
// another number of components) is a typed error, consuming nothing; other
// numbers in the same structure are migrated, or refused with
// WithStrictSettings. The migrated bucket's tokens are exact on miniredis;
// on real servers within the bounds the server's clock gives for the
// refills since the grant (none when nothing stalled: exact too).
func TestCompositeMismatch(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		c := b.Coordinator(t)
		l, err := newT(c, "comp-mm", issueComposite)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		sc, m := serverClock(t, b), newBucketModel(issueComposite.Components[0].(TokenBucket)) // the bucket binds
		sc.wantOne(l, m, "three permits", 3, 0)
		state := dump(t, raw, b.Key("comp-mm"))
		cs := issueComposite.Components
		for name, other := range map[string][]Settings{
			"fewer":     cs[:2],
			"more":      append(append([]Settings{}, cs...), GCRA{Burst: 5, Interval: time.Second}),
			"reordered": {cs[1], cs[0], cs[2]},
			"another":   {GCRA{Burst: 10, Interval: 500 * time.Millisecond}, cs[1], cs[2]},
		} {
			o, err := newT(c, "comp-mm", Composite{Components: other})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := o.Allow(ctx, 1); !errors.Is(err, coordination.ErrConfigMismatch) {
				t.Fatalf("%s: %v, want ErrConfigMismatch", name, err)
			}
			o.Close()
			if after := dump(t, raw, b.Key("comp-mm")); after != state {
				t.Fatalf("%s: a mismatch changed the state", name)
			}
		}
		numbers := Composite{Components: []Settings{
			TokenBucket{Limit: 20, TokensPerPeriod: 2, Period: time.Second}, cs[1], cs[2],
		}}
		strict, err := newT(c, "comp-mm", numbers, WithStrictSettings(true))
		if err != nil {
			t.Fatal(err)
		}
		defer strict.Close()
		if _, err := strict.Allow(ctx, 1); !errors.Is(err, coordination.ErrConfigMismatch) {
			t.Fatalf("other numbers, strict: %v, want ErrConfigMismatch", err)
		}
		migrated, err := newT(c, "comp-mm", numbers)
		if err != nil {
			t.Fatal(err)
		}
		defer migrated.Close()
		// The bucket had 7 of 10; its limit is now 20: it keeps 7 (a
		// larger limit adds room, not tokens).
		p, at := sc.allow(migrated, 0)
		m.update(at, numbers.Components[0].(TokenBucket))
		lo, hi := m.tokens(at)
		wantCount(t, b, "available after migration", int(p.Available()), 7, lo, hi, at)
		for _, bad := range []Composite{{}, {Components: []Settings{Concurrency{Limit: 1}}}, {Components: []Settings{nil}},
			{Components: make([]Settings, 33)}, {Components: []Settings{FixedWindow{Limit: 0, Window: time.Second}}}} {
			if _, err := newT(c, "k", bad); !errors.Is(err, coordination.ErrInvalidArgument) {
				t.Fatalf("newT(%v): %v, want ErrInvalidArgument", bad, err)
			}
		}
	})
}
