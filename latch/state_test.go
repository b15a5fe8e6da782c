package latch_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/latch"
)

// hashOf is the raw content of the hash at the full key k.
func hashOf(t testing.TB, raw redis.UniversalClient, k string) string {
	t.Helper()
	h, err := raw.HGetAll(context.Background(), k).Result()
	if err != nil {
		t.Fatalf("HGETALL: %v", err)
	}
	kv := make([]string, 0, len(h))
	for f, v := range h {
		kv = append(kv, f+"="+v)
	}
	sort.Strings(kv)
	return strings.Join(kv, ",")
}

// A latch whose stored hash is corrupt (a field missing, or not a decimal
// integer in its range) is refused by every verb, every latch script, with
// ErrBadState, and nothing is written: the shared check of the fragment
// latch_state. Before it, CountDown on a count of "1.5" wrote 0.5, a count
// of -1 was answered ErrCompleted, a count above the initial one or a
// missing initial count or generation were read as a latch.
func TestCorruptLatchRefusedByEveryVerb(t *testing.T) {
	cases := []struct {
		name  string
		set   map[string]string
		unset string
	}{
		{name: "count not a number", set: map[string]string{"count": "abc"}},
		{name: "count negative", set: map[string]string{"count": "-1"}},
		{name: "count fractional", set: map[string]string{"count": "1.5"}},
		{name: "count with an exponent", set: map[string]string{"count": "1e0"}},
		{name: "count in hex", set: map[string]string{"count": "0x2"}},
		{name: "count above initial", set: map[string]string{"count": "4"}},
		{name: "count missing", unset: "count"},
		{name: "initial negative", set: map[string]string{"initial": "-3"}},
		{name: "initial above MaxCount", set: map[string]string{"initial": "9007199254740992"}},
		{name: "initial missing", unset: "initial"},
		{name: "gen zero", set: map[string]string{"gen": "0"}},
		{name: "gen not a number", set: map[string]string{"gen": "two"}},
		{name: "gen missing", unset: "gen"},
		{name: "deadline negative", set: map[string]string{"deadline": "-5"}},
		{name: "deadline not a number", set: map[string]string{"deadline": "soon"}},
		{name: "deadline missing", unset: "deadline"},
		{name: "id empty", set: map[string]string{"id": ""}},
		{name: "id missing", unset: "id"},
	}
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		coord := b.Coordinator(t)
		for i, c := range cases {
			k := fmt.Sprintf("corrupt:%d", i)
			full := b.Key(k)
			g, err := create(ctx, coord, k, 3, latch.WithDeadline(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			if n, err := g.CountDown(ctx); n != 2 || err != nil {
				t.Fatalf("CountDown = %d, %v; want 2", n, err)
			}
			if len(c.set) > 0 {
				if err := raw.HSet(ctx, full, c.set).Err(); err != nil {
					t.Fatal(err)
				}
			}
			if c.unset != "" {
				if err := raw.HDel(ctx, full, c.unset).Err(); err != nil {
					t.Fatal(err)
				}
			}
			before := hashOf(t, raw, full)
			verbs := map[string]func() error{
				"Create":    func() error { _, err := create(ctx, coord, k, 2); return err },
				"Reset":     func() error { _, err := reset(ctx, coord, k, 2); return err },
				"Join":      func() error { _, err := join(ctx, coord, k); return err },
				"CountDown": func() error { _, err := g.CountDown(ctx); return err },
				"Count":     func() error { _, err := g.Count(ctx); return err },
				"Wait": func() error {
					ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					defer cancel()
					_, err := g.Wait(ctx)
					return err
				},
			}
			for _, name := range []string{"Create", "Reset", "Join", "CountDown", "Count", "Wait"} {
				err := verbs[name]()
				if !errors.Is(err, coordination.ErrBadState) {
					t.Errorf("%s: %s = %v; want ErrBadState", c.name, name, err)
				}
			}
			if after := hashOf(t, raw, full); after != before {
				t.Errorf("%s: the verbs changed the corrupt latch:\nbefore %s\nafter  %s", c.name, before, after)
			}
		}
	})
}

// A re-sent count-down whose record in the hash is corrupt (not an
// integer, or outside count to initial) is refused with ErrBadState and
// writes nothing; a sound record answers what the first send did.
func TestCorruptCountDownRecordRefused(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		coord := b.Coordinator(t)
		e, err := engine.Of(coord)
		if err != nil {
			t.Fatal(err)
		}
		mustCreate(t, coord, 3)
		id, err := raw.HGet(ctx, b.Key(key), "id").Result()
		if err != nil {
			t.Fatal(err)
		}
		run := func() (any, error) {
			return latch.CountDownScript.Run(ctx, e, e.Key(key), id, "signal")
		}
		if _, err := run(); err != nil {
			t.Fatalf("count-down: %v", err)
		}
		if _, err := run(); err != nil { // re-sent: answered from the record
			t.Fatalf("re-sent count-down: %v", err)
		}
		if n, err := raw.HGet(ctx, b.Key(key), "count").Result(); n != "2" || err != nil {
			t.Fatalf("count = %q, %v after a count-down sent twice; want 2", n, err)
		}
		for _, rec := range []string{"x", "-1", "1", "4", "2.5"} { // count is 2, initial 3
			if err := raw.HSet(ctx, b.Key(key), "s:signal", rec).Err(); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, b, raw)
			if _, err := run(); !errors.Is(err, coordination.ErrBadState) {
				t.Errorf("re-sent count-down with the record %q = %v; want ErrBadState", rec, err)
			}
			if after := snapshot(t, b, raw); after != before {
				t.Errorf("record %q: the count-down wrote:\nbefore %s\nafter  %s", rec, before, after)
			}
		}
	})
}

// A Wait whose context ends first returns the error of every blocking
// operation that gave up: it names the operation and the key, and, Redis
// having answered its reads, matches both ErrNotAcquired and the
// context's error (its cause). Before, it returned context.Cause(ctx)
// bare. A context that had ended before the first read gives its cause
// alone: nothing was read (it was ErrNotAcquired too).
func TestWaitGivingUpNamesOperation(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		coord := b.Coordinator(t)
		g := mustCreate(t, coord, 1)
		check := func(what string, err error, want error) {
			t.Helper()
			if !errors.Is(err, coordination.ErrNotAcquired) || !errors.Is(err, want) {
				t.Fatalf("%s: Wait error %v; want one matching ErrNotAcquired and %v", what, err, want)
			}
			if msg, w := err.Error(), `coordination: latch wait "`+key+`": not acquired: `+want.Error(); msg != w {
				t.Fatalf("%s: Wait error %q; want %q", what, msg, w)
			}
		}

		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		ok, err := g.Wait(ctx)
		if ok {
			t.Fatal("Wait on a latch nobody counts down returned true")
		}
		check("deadline", err, context.DeadlineExceeded)

		stop := errors.New("the job was abandoned")
		cctx, ccancel := context.WithCancelCause(context.Background())
		time.AfterFunc(100*time.Millisecond, func() { ccancel(stop) })
		ok, err = g.Wait(cctx)
		if ok {
			t.Fatal("Wait with a cancelled context returned true")
		}
		check("cancelled", err, stop)

		ok, err = g.Wait(cctx) // ended before the call
		if want := `coordination: latch wait "` + key + `": ` + stop.Error(); ok || err == nil || err.Error() != want {
			t.Fatalf("Wait with an ended context = %v, %v; want %q", ok, err, want)
		}
		if !errors.Is(err, stop) || !errors.Is(err, context.Canceled) || errors.Is(err, coordination.ErrNotAcquired) {
			t.Fatalf("Wait with an ended context: %v, want the cause (and context.Canceled), not ErrNotAcquired", err)
		}
	})
}

// A Wait whose context ends while Redis is unreachable gives up with the
// outage's error, not contention's: it matches the context's error and the
// failure, not ErrNotAcquired. (It returned `not acquired: context
// deadline exceeded`.)
func TestWaitGivingUpDuringAnOutageIsNotContention(t *testing.T) {
	m := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: m.Addr(), PoolSize: 1000})
	t.Cleanup(func() { client.Close() })
	coord, err := coordination.New(client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = coord.Shutdown(context.Background()) })
	g := mustCreate(t, coord, 1)
	m.Close() // every dial refused from now on
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ok, err := g.Wait(ctx)
	if ok || errors.Is(err, coordination.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait during an outage = %v, %v; want the context's error, not ErrNotAcquired", ok, err)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) && !strings.HasSuffix(err.Error(), "; Redis answered no attempt") {
		t.Fatalf("%v: neither the refused dial nor says Redis answered nothing", err)
	}
	if want := `coordination: latch wait "` + key + `": context deadline exceeded; `; !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("%q, want it to begin %q", err, want)
	}
}
