package latch_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/latch"
)

const key = "done"

type waitResult struct {
	ok  bool
	err error
	at  time.Time
}

// wait runs l.Wait(ctx) in the background.
func wait(ctx context.Context, l *latch.Generation) <-chan waitResult {
	ch := make(chan waitResult, 1)
	go func() {
		ok, err := l.Wait(ctx)
		ch <- waitResult{ok, err, time.Now()}
	}()
	return ch
}

// within returns the waiter's result or fails the test after limit.
func within(t testing.TB, ch <-chan waitResult, limit time.Duration, what string) waitResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(limit):
		t.Fatalf("%s: Wait did not return within %v", what, limit)
		return waitResult{}
	}
}

// stillWaiting fails the test if the waiter returns within d.
func stillWaiting(t testing.TB, ch <-chan waitResult, d time.Duration) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("Wait returned %v, %v early", r.ok, r.err)
	case <-time.After(d):
	}
}

// snapshot is the raw content of the latch key and its expiry time.
func snapshot(t testing.TB, b *testharness.Backend, raw redis.UniversalClient) string {
	t.Helper()
	ctx := context.Background()
	h, err := raw.HGetAll(ctx, b.Key(key)).Result()
	if err != nil {
		t.Fatalf("HGETALL: %v", err)
	}
	var kv []string
	for k, v := range h {
		kv = append(kv, k+"="+v)
	}
	sort.Strings(kv)
	at, err := raw.PExpireTime(ctx, b.Key(key)).Result()
	if err != nil {
		t.Fatalf("PEXPIRETIME: %v", err)
	}
	return fmt.Sprintf("%s expires=%v", strings.Join(kv, ","), at)
}

func mustCreate(t testing.TB, coord *coordination.Coordinator, count int64, opts ...latch.Option) *latch.Generation {
	t.Helper()
	l, err := create(context.Background(), coord, key, count, opts...)
	if err != nil {
		t.Fatalf("Create(%d): %v", count, err)
	}
	return l
}

func mustJoin(t testing.TB, coord *coordination.Coordinator, opts ...latch.Option) *latch.Generation {
	t.Helper()
	l, err := join(context.Background(), coord, key, opts...)
	if err != nil {
		t.Fatalf("Join: %v", err)
	}
	return l
}

// Create on an existing latch fails and changes nothing; Join on none
// returns not-found; Join returns the current generation.
func TestCreateAndJoin(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		coord := b.Coordinator(t)
		if l, err := join(ctx, coord, key); !errors.Is(err, latch.ErrNotFound) || l != nil {
			t.Fatalf("Join on no latch = %v, %v; want ErrNotFound", l, err)
		}
		l := mustCreate(t, coord, 3)
		if l.Number() != 1 || l.Initial() != 3 || l.Key() != key {
			t.Fatalf("created generation %d, initial %d, key %q", l.Number(), l.Initial(), l.Key())
		}
		before := snapshot(t, b, raw)
		if again, err := create(ctx, b.Coordinator(t), key, 5); !errors.Is(err, latch.ErrExists) || again != nil {
			t.Fatalf("Create on an existing latch = %v, %v; want ErrExists", again, err)
		}
		if after := snapshot(t, b, raw); after != before {
			t.Fatalf("a refused Create changed the key:\nbefore %s\nafter  %s", before, after)
		}
		j := mustJoin(t, b.Coordinator(t))
		if j.Number() != 1 || j.Initial() != 3 {
			t.Fatalf("joined generation %d, initial %d; want 1, 3", j.Number(), j.Initial())
		}
		if n, err := j.CountDown(ctx); n != 2 || err != nil {
			t.Fatalf("joined CountDown = %d, %v; want 2", n, err)
		}
		if n, err := l.Count(ctx); n != 2 || err != nil {
			t.Fatalf("Count = %d, %v; want 2", n, err)
		}
	})
}

// Three count-downs complete Wait with true, woken by the notification;
// a count-down on the completed latch is an error.
func TestThreeCountDownsCompleteWait(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		l := mustCreate(t, b.Coordinator(t), 3)
		waiter := mustJoin(t, b.Coordinator(t)) // default 5 s re-check
		ch := wait(ctx, waiter)
		stillWaiting(t, ch, 100*time.Millisecond)
		var workers []*latch.Generation
		for range 3 {
			workers = append(workers, mustJoin(t, b.Coordinator(t)))
		}
		for i, w := range workers[:2] {
			if n, err := w.CountDown(ctx); n != int64(2-i) || err != nil {
				t.Fatalf("CountDown %d = %d, %v; want %d", i+1, n, err, 2-i)
			}
		}
		stillWaiting(t, ch, 100*time.Millisecond)
		last := time.Now()
		if n, err := workers[2].CountDown(ctx); n != 0 || err != nil {
			t.Fatalf("third CountDown = %d, %v; want 0", n, err)
		}
		r := within(t, ch, 3*time.Second, "after the last count-down")
		if !r.ok || r.err != nil {
			t.Fatalf("Wait = %v, %v; want true", r.ok, r.err)
		}
		if d := r.at.Sub(last); d > 2*time.Second {
			t.Fatalf("Wait returned %v after completion; want it woken by the notification, not the 5s re-read", d)
		}
		if n, err := l.CountDown(ctx); !errors.Is(err, latch.ErrCompleted) || n != 0 {
			t.Fatalf("CountDown on a completed latch = %d, %v; want ErrCompleted", n, err)
		}
		if ok, err := l.Wait(ctx); !ok || err != nil {
			t.Fatalf("Wait on a completed latch = %v, %v; want true at once", ok, err)
		}
		if n, err := l.Count(ctx); n != 0 || err != nil {
			t.Fatalf("Count = %d, %v; want 0", n, err)
		}

		// A latch of count 0 is complete from the start.
		zero, err := reset(ctx, b.Coordinator(t), key, 0)
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := zero.Wait(ctx); !ok || err != nil {
			t.Fatalf("Wait on a latch of 0 = %v, %v", ok, err)
		}
		if _, err := zero.CountDown(ctx); !errors.Is(err, latch.ErrCompleted) {
			t.Fatalf("CountDown on a latch of 0: %v; want ErrCompleted", err)
		}
	})
}

// Reset while waiting makes old waiters return false; an old-generation
// count-down reports the stale generation without decrementing the new
// one.
func TestResetEndsOldGeneration(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		old := mustCreate(t, b.Coordinator(t), 3)
		if n, err := old.CountDown(ctx); n != 2 || err != nil {
			t.Fatalf("CountDown = %d, %v", n, err)
		}
		w1, w2 := wait(ctx, mustJoin(t, b.Coordinator(t))), wait(ctx, old)
		stillWaiting(t, w1, 100*time.Millisecond)

		fresh, err := reset(ctx, b.Coordinator(t), key, 2)
		if err != nil {
			t.Fatalf("Reset: %v", err)
		}
		if fresh.Number() != 2 || fresh.Initial() != 2 {
			t.Fatalf("reset generation %d, initial %d; want 2, 2", fresh.Number(), fresh.Initial())
		}
		for i, ch := range []<-chan waitResult{w1, w2} {
			if r := within(t, ch, 2*time.Second, "after Reset"); r.ok || r.err != nil {
				t.Fatalf("old waiter %d = %v, %v; want false, nil", i, r.ok, r.err)
			}
		}
		before := snapshot(t, b, raw)
		if n, err := old.CountDown(ctx); !errors.Is(err, latch.ErrStaleGeneration) || n != 0 {
			t.Fatalf("old-generation CountDown = %d, %v; want ErrStaleGeneration", n, err)
		}
		if after := snapshot(t, b, raw); after != before {
			t.Fatalf("a stale count-down changed the key:\nbefore %s\nafter  %s", before, after)
		}
		if n, err := fresh.Count(ctx); n != 2 || err != nil {
			t.Fatalf("new generation's Count = %d, %v; want 2 (not decremented)", n, err)
		}
		if _, err := old.Count(ctx); !errors.Is(err, latch.ErrStaleGeneration) {
			t.Fatalf("old handle's Count: %v; want ErrStaleGeneration", err)
		}
		if ok, err := old.Wait(ctx); ok || err != nil {
			t.Fatalf("old handle's Wait = %v, %v; want false at once", ok, err)
		}
		if n, err := fresh.CountDown(ctx); n != 1 || err != nil {
			t.Fatalf("new generation's CountDown = %d, %v; want 1", n, err)
		}
	})
}

// Deleting the key makes waiters return false (at their next re-read); a
// latch created again is a new generation the old handles cannot touch.
func TestDeletedKey(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		l := mustCreate(t, b.Coordinator(t), 2)
		ch := wait(ctx, mustJoin(t, b.Coordinator(t), latch.WithRecheck(200*time.Millisecond)))
		stillWaiting(t, ch, 100*time.Millisecond)
		if err := raw.Del(ctx, b.Key(key)).Err(); err != nil {
			t.Fatal(err)
		}
		if r := within(t, ch, 2*time.Second, "after DEL"); r.ok || r.err != nil {
			t.Fatalf("Wait after DEL = %v, %v; want false, nil", r.ok, r.err)
		}
		if _, err := l.CountDown(ctx); !errors.Is(err, latch.ErrNotFound) {
			t.Fatalf("CountDown after DEL: %v; want ErrNotFound", err)
		}
		if _, err := l.Count(ctx); !errors.Is(err, latch.ErrNotFound) {
			t.Fatalf("Count after DEL: %v; want ErrNotFound", err)
		}
		again := mustCreate(t, b.Coordinator(t), 2)
		if again.Number() != 1 {
			t.Fatalf("generation after re-create = %d, want 1", again.Number())
		}
		if _, err := l.CountDown(ctx); !errors.Is(err, latch.ErrStaleGeneration) {
			t.Fatalf("count-down from before the deletion: %v; want ErrStaleGeneration", err)
		}
		if n, err := again.Count(ctx); n != 2 || err != nil {
			t.Fatalf("re-created latch's Count = %d, %v; want 2", n, err)
		}
	})
}

// A waiter whose Pub/Sub message was lost still completes within its
// re-read period: the latch reaches zero without any message (as if the
// count-down's notification were lost on its way).
func TestLostNotificationDelaysButCompletes(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		const recheck = 300 * time.Millisecond
		mustCreate(t, b.Coordinator(t), 1)
		ch := wait(ctx, mustJoin(t, b.Coordinator(t), latch.WithRecheck(recheck)))
		stillWaiting(t, ch, 100*time.Millisecond)
		done := time.Now()
		if err := b.Raw(t).HSet(ctx, b.Key(key), "count", 0).Err(); err != nil {
			t.Fatal(err)
		}
		r := within(t, ch, 3*time.Second, "with the message lost")
		if !r.ok || r.err != nil {
			t.Fatalf("Wait = %v, %v; want true", r.ok, r.err)
		}
		if d := r.at.Sub(done); d > recheck+1500*time.Millisecond {
			t.Fatalf("waiter completed %v after the lost message; want within the %v re-read period", d, recheck)
		}
	})
}

// A deadline breaks an unfinished generation: waiters return ErrBroken and
// late count-downs are refused; a generation complete before its deadline
// stays complete.
func TestDeadlineBreaksGeneration(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		l := mustCreate(t, b.Coordinator(t), 2, latch.WithDeadline(time.Second))
		if n, err := l.CountDown(ctx); n != 1 || err != nil {
			t.Fatalf("CountDown = %d, %v", n, err)
		}
		// The waiter wakes at the deadline by itself (no message is sent then).
		ch := wait(ctx, mustJoin(t, b.Coordinator(t)))
		stillWaiting(t, ch, 100*time.Millisecond)
		b.Advance(1100 * time.Millisecond)
		r := within(t, ch, 3*time.Second, "after the deadline")
		if r.ok || !errors.Is(r.err, latch.ErrBroken) {
			t.Fatalf("Wait past the deadline = %v, %v; want false, ErrBroken", r.ok, r.err)
		}
		before := snapshot(t, b, raw)
		if n, err := l.CountDown(ctx); !errors.Is(err, latch.ErrBroken) || n != 1 {
			t.Fatalf("late CountDown = %d, %v; want 1, ErrBroken", n, err)
		}
		if after := snapshot(t, b, raw); after != before {
			t.Fatalf("a refused late count-down changed the key:\nbefore %s\nafter  %s", before, after)
		}
		if n, err := l.Count(ctx); n != 1 || !errors.Is(err, latch.ErrBroken) {
			t.Fatalf("Count of a broken latch = %d, %v; want 1, ErrBroken", n, err)
		}

		// Reset starts a new generation (without deadline this time).
		fresh, err := reset(ctx, b.Coordinator(t), key, 1)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := fresh.CountDown(ctx); n != 0 || err != nil {
			t.Fatalf("CountDown after Reset = %d, %v", n, err)
		}

		// Complete before the deadline: stays complete after it.
		done, err := reset(ctx, b.Coordinator(t), key, 1, latch.WithDeadline(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if n, err := done.CountDown(ctx); n != 0 || err != nil {
			t.Fatalf("CountDown = %d, %v", n, err)
		}
		b.Advance(1100 * time.Millisecond)
		if ok, err := done.Wait(ctx); !ok || err != nil {
			t.Fatalf("Wait on a latch completed before its deadline = %v, %v; want true", ok, err)
		}
		if n, err := done.Count(ctx); n != 0 || err != nil {
			t.Fatalf("Count = %d, %v; want 0", n, err)
		}
	})
}

// One Latch serves every verb: New sends nothing, its options apply to
// each Create and Reset (a new deadline and key TTL per generation), Join
// ignores the deadline and key TTL and keeps the generation's own, and
// every Generation reports the Latch's key.
func TestOneLatchManyGenerations(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		coord := b.Coordinator(t)
		counter := testharness.CountCommands(coord.Client())
		l, err := latch.New(coord, key, latch.WithDeadline(time.Second), latch.WithKeyTTL(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if n := counter.Count(); n != 0 || l.Key() != key {
			t.Fatalf("New sent %v, key %q", counter.Names(), l.Key())
		}
		first, err := l.Create(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		if d, _ := raw.PTTL(ctx, b.Key(key)).Result(); d <= 9*time.Second || d > 10*time.Second {
			t.Fatalf("PTTL after Create = %v, want about 10s", d)
		}
		b.Advance(1100 * time.Millisecond)
		if _, err := first.CountDown(ctx); !errors.Is(err, latch.ErrBroken) {
			t.Fatalf("CountDown past the first generation's deadline: %v; want ErrBroken", err)
		}
		second, err := l.Reset(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if second.Number() != 2 || second.Initial() != 1 || second.Key() != key {
			t.Fatalf("reset generation %d, initial %d, key %q; want 2, 1, %q", second.Number(), second.Initial(), second.Key(), key)
		}
		if d, _ := raw.PTTL(ctx, b.Key(key)).Result(); d <= 9*time.Second || d > 10*time.Second {
			t.Fatalf("PTTL after Reset = %v, want about 10s again", d)
		}
		joined, err := l.Join(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if joined.Number() != 2 || joined.Initial() != 1 {
			t.Fatalf("joined generation %d, initial %d; want 2, 1", joined.Number(), joined.Initial())
		}
		b.Advance(1100 * time.Millisecond)
		if n, err := joined.Count(ctx); n != 1 || !errors.Is(err, latch.ErrBroken) {
			t.Fatalf("Count past the second generation's deadline = %d, %v; want 1, ErrBroken", n, err)
		}
		if _, err := l.Create(ctx, 1); !errors.Is(err, latch.ErrExists) {
			t.Fatalf("Create on the existing latch: %v; want ErrExists", err)
		}
	})
}

// WithKeyTTL bounds the key's life; waiters of an expired latch return
// false.
func TestKeyTTL(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		l := mustCreate(t, b.Coordinator(t), 1, latch.WithKeyTTL(10*time.Second))
		if d, _ := raw.PTTL(ctx, b.Key(key)).Result(); d <= 9*time.Second || d > 10*time.Second {
			t.Fatalf("PTTL = %v, want about 10s", d)
		}
		short, err := reset(ctx, b.Coordinator(t), key, 1, latch.WithKeyTTL(300*time.Millisecond), latch.WithRecheck(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.CountDown(ctx); !errors.Is(err, latch.ErrStaleGeneration) {
			t.Fatalf("CountDown of the replaced generation: %v", err)
		}
		ch := wait(ctx, short)
		b.Advance(400 * time.Millisecond)
		if r := within(t, ch, 3*time.Second, "after the key expired"); r.ok || r.err != nil {
			t.Fatalf("Wait on an expired latch = %v, %v; want false, nil", r.ok, r.err)
		}
	})
}

// A key holding something else is refused before anything is written.
func TestForeignKey(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		coord := b.Coordinator(t)
		l := mustCreate(t, coord, 1)
		raw.Del(ctx, b.Key(key))
		raw.Set(ctx, b.Key(key), "x", 0)
		checks := map[string]func() error{
			"Create":    func() error { _, err := create(ctx, coord, key, 1); return err },
			"Reset":     func() error { _, err := reset(ctx, coord, key, 1); return err },
			"Join":      func() error { _, err := join(ctx, coord, key); return err },
			"CountDown": func() error { _, err := l.CountDown(ctx); return err },
			"Count":     func() error { _, err := l.Count(ctx); return err },
			"Wait":      func() error { _, err := l.Wait(ctx); return err },
		}
		for name, f := range checks {
			if err := f(); !errors.Is(err, coordination.ErrBadState) {
				t.Fatalf("%s on a string key: %v; want ErrBadState (wrong type)", name, err)
			}
		}
		if v, _ := raw.Get(ctx, b.Key(key)).Result(); v != "x" {
			t.Fatalf("the string key was changed to %q", v)
		}
		raw.Del(ctx, b.Key(key))
		raw.HSet(ctx, b.Key(key), "name", "not a latch")
		for name, f := range checks {
			if err := f(); !errors.Is(err, coordination.ErrBadState) || strings.Contains(err.Error(), "wrong Redis type") {
				t.Fatalf("%s on a foreign hash: %v; want ErrBadState", name, err)
			}
		}
		if h, _ := raw.HGetAll(ctx, b.Key(key)).Result(); len(h) != 1 || h["name"] != "not a latch" {
			t.Fatalf("the foreign hash was changed: %v", h)
		}
	})
}

// Bad input returns coordination.ErrInvalidArgument naming the argument,
// and nothing is sent to Redis.
func TestInvalidArguments(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord := b.Coordinator(t)
		counter := testharness.CountCommands(coord.Client())
		want := func(err error, name string) {
			t.Helper()
			if got, ok := check.ArgumentName(err); !errors.Is(err, coordination.ErrInvalidArgument) || !ok || got != name {
				t.Fatalf("err = %v; want an invalid-argument error naming %q", err, name)
			}
		}
		_, err := latch.New(nil, key)
		want(err, "coord")
		_, err = latch.New(coord, "")
		want(err, "key")
		_, err = latch.New(coord, strings.Repeat("k", check.MaxKeyBytes+1))
		want(err, "key")
		for _, d := range []time.Duration{0, -time.Second, time.Microsecond} {
			_, err = latch.New(coord, key, latch.WithDeadline(d))
			want(err, "deadline")
			_, err = latch.New(coord, key, latch.WithKeyTTL(d))
			want(err, "keyTTL")
			_, err = latch.New(coord, key, latch.WithRecheck(d))
			want(err, "recheck")
		}
		l, err := latch.New(coord, key)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []func(context.Context, int64) (*latch.Generation, error){l.Create, l.Reset} {
			for _, n := range []int64{-1, latch.MaxCount + 1} {
				_, err = f(ctx, n)
				want(err, "count")
			}
		}
		var nilLatch *latch.Latch
		_, err = nilLatch.Create(ctx, 1)
		want(err, "latch")
		_, err = nilLatch.Reset(ctx, 1)
		want(err, "latch")
		_, err = nilLatch.Join(ctx)
		want(err, "latch")
		var nilGen *latch.Generation
		_, err = nilGen.CountDown(ctx)
		want(err, "generation")
		_, err = nilGen.Count(ctx)
		want(err, "generation")
		_, err = nilGen.Wait(ctx)
		want(err, "generation")
		if nilLatch.Key() != "" || nilGen.Key() != "" || nilGen.Number() != 0 || nilGen.Initial() != 0 {
			t.Fatalf("a nil Latch or Generation reported a key, number or initial count")
		}
		if n := counter.Count(); n != 0 {
			t.Fatalf("bad input sent %d commands %v; want none", n, counter.Names())
		}
	})
}

// Each hot-path operation is one command (EVALSHA) once the scripts are
// cached.
func TestOneCommandPerOperation(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord := b.Coordinator(t)
		client := coord.Client()
		// SCRIPT LOAD as the default user: it is not the library's to send.
		admin, err := coordination.New(testharness.AdminOf(t, client))
		if err != nil {
			t.Fatal(err)
		}
		e, _ := engine.Of(admin)
		for _, load := range []func(context.Context, *engine.Engine) error{
			latch.CreateScript.Load, latch.JoinScript.Load, latch.CountDownScript.Load, latch.ReadScript.Load,
		} {
			if err := load(ctx, e); err != nil {
				t.Fatalf("SCRIPT LOAD: %v", err)
			}
		}
		testharness.Connect(t, client)
		counter := testharness.CountCommands(client)
		one := func(what string, op func() error) { t.Helper(); counter.ExpectOne(t, what, op) }
		var l *latch.Generation
		one("Create", func() (err error) { l, err = create(ctx, coord, key, 1); return err })
		one("Join", func() (err error) { _, err = join(ctx, coord, key); return err })
		one("Count", func() error { _, err := l.Count(ctx); return err })
		one("CountDown", func() error { _, err := l.CountDown(ctx); return err })
		one("Wait on a complete latch", func() error { _, err := l.Wait(ctx); return err })
		one("Reset", func() (err error) { _, err = reset(ctx, coord, key, 1); return err })
	})
}

// Every public operation is admitted once under its name; definite
// negative answers are Succeeded; a rejecting hook stops the operation
// before Redis.
func TestHooks(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		rec := &testharness.HookRecorder{}
		coord := b.Coordinator(t, coordination.WithHooks(rec))
		l, err := create(ctx, coord, key, 1)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = create(ctx, coord, key, 1) // ErrExists
		_, _ = join(ctx, coord, key)
		_, _ = l.Count(ctx)
		_, _ = l.CountDown(ctx)
		_, _ = l.CountDown(ctx) // ErrCompleted
		_, _ = l.Wait(ctx)
		_, _ = reset(ctx, coord, key, 1)

		rejected := errors.New("rejected by test")
		rec.Reject(rejected)
		counter := testharness.CountCommands(coord.Client())
		if _, err := l.CountDown(ctx); !errors.Is(err, rejected) {
			t.Fatalf("CountDown under a rejecting hook: %v", err)
		}
		if _, err := l.Wait(ctx); !errors.Is(err, rejected) {
			t.Fatalf("Wait under a rejecting hook: %v", err)
		}
		if n := counter.Count(); n != 0 {
			t.Fatalf("rejected operations sent %v", counter.Names())
		}
		want := []string{
			"latch:LATCH CREATE:succeeded", "latch:LATCH CREATE:succeeded", "latch:LATCH JOIN:succeeded",
			"latch:LATCH READ:succeeded", "latch:LATCH COUNT DOWN:succeeded", "latch:LATCH COUNT DOWN:succeeded",
			"latch:LATCH WAIT:succeeded", "latch:LATCH RESET:succeeded",
		}
		if got := rec.Ops(); !slices.Equal(got, want) {
			t.Fatalf("admitted %v\nwant %v", got, want)
		}
	})
}

// Keys are binary-safe and carry the coordinator's prefix.
func TestBinaryKeyAndPrefix(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		const bin = "bin\x00\xff\n key"
		l, err := create(ctx, b.Coordinator(t), bin, 1)
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := raw.Exists(ctx, b.Key(bin)).Result(); n != 1 {
			t.Fatalf("the latch is not stored under the prefixed binary key")
		}
		if n, _ := raw.Exists(ctx, bin).Result(); n != 0 {
			t.Fatalf("the latch is stored without the prefix")
		}
		w, err := join(ctx, b.Coordinator(t), bin)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := w.CountDown(ctx); n != 0 || err != nil {
			t.Fatalf("CountDown = %d, %v", n, err)
		}
		if ok, err := l.Wait(ctx); !ok || err != nil {
			t.Fatalf("Wait = %v, %v", ok, err)
		}
	})
}

// replyHook replaces the reply of every successful call of one script with
// val, as a server (or a proxy, or a future version of a script) answering
// something the client does not know would.
type replyHook struct {
	sha string
	val any
}

func (h replyHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h replyHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		c, ok := cmd.(interface {
			SetVal(any)
			SetErr(error)
		}) // the engine wraps its *redis.Cmd
		if ok && (err == nil || errors.Is(err, redis.Nil)) && strings.EqualFold(cmd.Name(), "evalsha") && fmt.Sprint(cmd.Args()[1]) == h.sha {
			c.SetErr(nil)
			c.SetVal(h.val)
			return nil
		}
		return err
	}
}

func (h replyHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A reply of an unknown shape or status is an error matching ErrBadState,
// never one of the latch's answers.
func TestUnknownRepliesAreBadState(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		now := time.Now().UnixMilli()
		cases := []struct {
			name string
			sha  string
			val  any
			op   func(coord *coordination.Coordinator, k string, l *latch.Generation) error
		}{
			{"create status 2", latch.CreateScript.Hash(), []any{int64(2), int64(1), int64(1), int64(0), now}, func(c *coordination.Coordinator, k string, _ *latch.Generation) error {
				_, err := create(ctx, c, k, 1)
				return err
			}},
			{"join as an empty array", latch.JoinScript.Hash(), []any{}, func(c *coordination.Coordinator, k string, _ *latch.Generation) error {
				_, err := join(ctx, c, k)
				return err
			}},
			{"count-down status 9", latch.CountDownScript.Hash(), []any{int64(9), int64(0), now}, func(_ *coordination.Coordinator, _ string, l *latch.Generation) error {
				_, err := l.CountDown(ctx)
				return err
			}},
			{"count-down broken at 0", latch.CountDownScript.Hash(), []any{int64(5), int64(0), now}, func(_ *coordination.Coordinator, _ string, l *latch.Generation) error {
				_, err := l.CountDown(ctx)
				return err
			}},
			{"read with 0 ms to the deadline", latch.ReadScript.Hash(), []any{int64(1), int64(3), int64(0), now}, func(_ *coordination.Coordinator, _ string, l *latch.Generation) error {
				_, err := l.Count(ctx)
				return err
			}},
			{"wait reading status 4", latch.ReadScript.Hash(), []any{int64(4), int64(0), int64(-1), now}, func(_ *coordination.Coordinator, _ string, l *latch.Generation) error {
				_, err := l.Wait(ctx)
				return err
			}},
		}
		for _, c := range cases {
			client := b.Client(t)
			coord, err := coordination.New(client, coordination.WithKeyPrefix(b.Prefix()))
			if err != nil {
				t.Fatal(err)
			}
			k := "bad:" + c.name
			// Cache every script on the key's node.
			l, err := create(ctx, coord, k, 3)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := join(ctx, coord, k); err != nil {
				t.Fatal(err)
			}
			if _, err := l.CountDown(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Count(ctx); err != nil {
				t.Fatal(err)
			}
			client.AddHook(replyHook{sha: c.sha, val: c.val})
			err = c.op(coord, k, l)
			for _, answer := range []error{latch.ErrExists, latch.ErrNotFound, latch.ErrStaleGeneration, latch.ErrCompleted, latch.ErrBroken} {
				if errors.Is(err, answer) {
					t.Errorf("%s: %v; an unknown reply read as an answer", c.name, err)
				}
			}
			if !errors.Is(err, coordination.ErrBadState) {
				t.Errorf("%s: %v; want ErrBadState", c.name, err)
			}
		}
	})
}

// create, reset and join are latch.New followed by one verb, for the tests
// that use a Latch once.
func create(ctx context.Context, coord *coordination.Coordinator, k string, count int64, opts ...latch.Option) (*latch.Generation, error) {
	l, err := latch.New(coord, k, opts...)
	if err != nil {
		return nil, err
	}
	return l.Create(ctx, count)
}

func reset(ctx context.Context, coord *coordination.Coordinator, k string, count int64, opts ...latch.Option) (*latch.Generation, error) {
	l, err := latch.New(coord, k, opts...)
	if err != nil {
		return nil, err
	}
	return l.Reset(ctx, count)
}

func join(ctx context.Context, coord *coordination.Coordinator, k string, opts ...latch.Option) (*latch.Generation, error) {
	l, err := latch.New(coord, k, opts...)
	if err != nil {
		return nil, err
	}
	return l.Join(ctx)
}
