package ratelimit

import (
	"context"
	"slices"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/sentinel"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// Reset, Peek, Penalize and Reward on every consumptive algorithm, with
// exact values (capacity 5, time scale 1 h: nothing comes back by itself
// during the test), each one command, admitted under its own name, and
// never counted as a grant or a refusal.
func TestAdminOperations(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		rec := &testharness.HookRecorder{}
		c := b.Coordinator(t, coordination.WithHooks(rec))
		counter := testharness.CountCommands(c.Client())
		const n = 5
		for _, k := range consumptive {
			l := build(t, c, k, "admin:"+string(k), n, time.Hour)
			one := func(what string, f func() error) {
				t.Helper()
				counter.Reset()
				before := len(rec.Ops())
				if err := f(); err != nil {
					t.Fatalf("%s: %s: %v", k, what, err)
				}
				// One round trip (a script's first run on a server adds
				// EVAL after NOSCRIPT).
				if got := counter.Count(); got != 1 && !slices.Equal(counter.Names(), []string{"EVALSHA", "EVAL"}) {
					t.Fatalf("%s: %s sent %d commands %v, want 1", k, what, got, counter.Names())
				}
				if got := rec.Ops()[before:]; len(got) != 1 {
					t.Fatalf("%s: %s admitted %v, want once", k, what, got)
				}
			}
			wantAvail := func(what string, got, want int64) {
				t.Helper()
				if got != want {
					t.Fatalf("%s: %s: available %d, want %d", k, what, got, want)
				}
			}
			// Peek on a fresh key, then after 2 grants: nothing consumed.
			var d Decision
			one("Peek", func() (err error) { d, err = l.Peek(ctx); return err })
			if !d.Allowed() || d.Available() != n {
				t.Fatalf("%s: Peek of a fresh key = %+v, want allowed, %d available", k, d, n)
			}
			wantBurst(t, l, 2, 2, "two grants")
			stats := l.Statistics()
			for range 2 {
				one("Peek", func() (err error) { d, err = l.Peek(ctx); return err })
				wantAvail("Peek after 2 grants", d.Available(), n-2)
			}
			if s := l.Statistics(); s.Granted != stats.Granted || s.Rejected != stats.Rejected {
				t.Fatalf("%s: Peek counted: %+v, was %+v", k, s, stats)
			}
			// Penalty past empty, rewards back up, never beyond full.
			var av int64
			one("Penalize", func() (err error) { av, err = l.Penalize(ctx, n+1); return err })
			wantAvail("Penalize(n+1) after 2 grants", av, 0) // n+3 taken
			one("Peek", func() (err error) { d, err = l.Peek(ctx); return err })
			if r, ok := d.RetryAfter(); d.Allowed() || !ok || r <= 0 {
				t.Fatalf("%s: Peek past empty = %+v, want refused with RetryAfter", k, d)
			}
			if le := acquire(t, l, 1); le.Acquired() {
				t.Fatalf("%s: granted after the penalty", k)
			}
			one("Reward", func() (err error) { av, err = l.Reward(ctx, 2); return err })
			wantAvail("Reward(2), n+1 taken", av, 0)
			one("Reward", func() (err error) { av, err = l.Reward(ctx, 1); return err })
			wantAvail("Reward(1), n taken", av, 0)
			one("Reward", func() (err error) { av, err = l.Reward(ctx, 1); return err })
			wantAvail("Reward(1), n-1 taken", av, 1)
			one("Reward", func() (err error) { av, err = l.Reward(ctx, 3*n); return err })
			wantAvail("Reward(3n)", av, n)
			wantBurst(t, l, n+1, n, "after the rewards")
			// Reset: full again; the key is gone; a second Reset is harmless.
			one("Reset", func() error { return l.Reset(ctx) })
			if got, _ := b.Raw(t).Exists(ctx, b.Key("admin:"+string(k))).Result(); got != 0 {
				t.Fatalf("%s: the key survived Reset", k)
			}
			one("Reset", func() error { return l.Reset(ctx) })
			wantBurst(t, l, n+1, n, "after Reset")
			ops := rec.Ops()
			for _, want := range []string{"rate_limit:RATE LIMIT RESET:succeeded", "rate_limit:RATE LIMIT PEEK:succeeded", "rate_limit:RATE LIMIT ADJUST:succeeded"} {
				if !slices.Contains(ops, want) {
					t.Fatalf("%s: hooks saw %v, want %s among them", k, ops, want)
				}
			}
		}
	})
}

// Bad input names the argument and sends nothing; Reset refuses a key of
// another algorithm and leaves it.
func TestAdminOperationsRefuse(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		c := b.Coordinator(t)
		counter := testharness.CountCommands(c.Client())
		l := build(t, c, kGCRA, "admin:bad", 3, time.Hour)
		counter.Reset()
		for _, p := range []int{0, -1, maxLimit + 1} {
			for name, f := range map[string]func(context.Context, int) (int64, error){"Penalize": l.Penalize, "Reward": l.Reward} {
				_, err := f(ctx, p)
				if got, _ := check.ArgumentName(err); got != "permits" || !isErr(err, sentinel.ErrInvalidArgument) {
					t.Fatalf("%s(%d) = %v, want an invalid argument naming permits", name, p, err)
				}
			}
		}
		var nilLim *Limiter
		if err := nilLim.Reset(ctx); !isErr(err, sentinel.ErrInvalidArgument) {
			t.Fatalf("Reset on a nil limiter: %v", err)
		}
		if n := counter.Count(); n != 0 {
			t.Fatalf("bad input sent %d commands %v", n, counter.Names())
		}
		wantBurst(t, l, 1, 1, "GCRA")
		other := build(t, c, kFixed, "admin:bad", 3, time.Hour)
		if err := other.Reset(ctx); !isErr(err, sentinel.ErrConfigMismatch) {
			t.Fatalf("Reset of a GCRA key by a fixed window: %v, want ErrConfigMismatch", err)
		}
		if _, err := other.Peek(ctx); !isErr(err, sentinel.ErrConfigMismatch) {
			t.Fatalf("Peek of a GCRA key by a fixed window: %v, want ErrConfigMismatch", err)
		}
		if d, err := l.Peek(ctx); err != nil || d.Available() != 2 {
			t.Fatalf("the GCRA key after the refused Reset: %+v, %v; want 2 available", d, err)
		}
		if err := b.Raw(t).Set(ctx, b.Key("admin:foreign"), "hello", 0).Err(); err != nil {
			t.Fatal(err)
		}
		foreign := build(t, c, kFixed, "admin:foreign", 3, time.Hour)
		if err := foreign.Reset(ctx); !isErr(err, sentinel.ErrBadState) {
			t.Fatalf("Reset of a foreign string: %v, want ErrBadState", err)
		}
		comp := build(t, c, kComp, "admin:foreign", 3, time.Hour)
		if err := comp.Reset(ctx); !isErr(err, sentinel.ErrBadState) {
			t.Fatalf("Reset of a string by a composite: %v, want ErrBadState", err)
		}
		// A composite's Reset checks the stored structure, as its
		// decisions do: another composite's key, or a hash with a field c
		// that is no signature, is left alone (it deleted both).
		raw := b.Raw(t)
		if err := raw.HSet(ctx, b.Key("admin:hash"), "c", "zzz").Err(); err != nil {
			t.Fatal(err)
		}
		if err := build(t, c, kComp, "admin:hash", 3, time.Hour).Reset(ctx); !isErr(err, sentinel.ErrBadState) {
			t.Fatalf("Reset of a hash whose c is no signature: %v, want ErrBadState", err)
		}
		two, err := newT(c, "admin:two", Composite{Components: []Settings{GCRA{Burst: 3, Interval: time.Hour}, FixedWindow{Limit: 5, Window: time.Hour}}})
		if err != nil {
			t.Fatal(err)
		}
		wantBurst(t, two, 1, 1, "two components")
		three, err := newT(c, "admin:two", Composite{Components: []Settings{FixedWindow{Limit: 5, Window: time.Hour}, GCRA{Burst: 3, Interval: time.Hour}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := three.Reset(ctx); !isErr(err, sentinel.ErrConfigMismatch) {
			t.Fatalf("Reset of another composite's key: %v, want ErrConfigMismatch", err)
		}
		for _, k := range []string{"admin:two", "admin:hash"} {
			if n := raw.Exists(ctx, b.Key(k)).Val(); n != 1 {
				t.Fatalf("a refused composite Reset deleted %s", k)
			}
		}
		if err := two.Reset(ctx); err != nil {
			t.Fatalf("Reset by the key's own composite: %v", err)
		}
		_ = l.Close()
		if err := l.Reset(ctx); !isErr(err, sentinel.ErrClosed) {
			t.Fatalf("Reset after Close: %v, want ErrClosed", err)
		}
	})
}
