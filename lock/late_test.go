package lock_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/lockcore"
	"github.com/coordkit/coordination/internal/testkit/faultproxy"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/lock"
)

// getOrEmpty returns key's value, "" when it does not exist.
func getOrEmpty(t *testing.T, c redis.UniversalClient, key string) string {
	t.Helper()
	v, err := c.Get(context.Background(), key).Result()
	if errors.Is(err, redis.Nil) {
		return ""
	}
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	return v
}

// An acquisition whose request is held in the network until after its
// client gave up (ambiguous) and its background cleanup finished takes
// nothing when the request finally reaches the server: the cleanup left a
// tombstone that the late SET NX cannot pass, and another client takes the
// lock at once. (Before the fix the late request took the lock for a whole
// TTL, held by nobody.)
//
// The same holds for a Mutex made WithFIFO (its acquisition is a script;
// its cleanup also leaves the queue), and a tombstone left by either
// order is a free lock to the other order (a new user's finding: a FIFO
// Mutex answered ErrBadState to a tombstone, and a FIFO Mutex's cleanup
// left none).
func TestLateAcquireAfterCleanupTakesNothing(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		for _, fifo := range []bool{false, true} {
			name := map[bool]string{false: "default", true: "fifo"}[fifo]
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				key := b.Key("late-" + name)
				late := b.Late(t, key)
				admin := b.Admin(t)

				m := must(lock.New(late.Coord, "late-"+name, lock.WithFIFO(fifo)))(t)
				cmd := "SET"
				if fifo {
					cmd = "EVALSHA"
					// The script loaded on the key's server first, so that the
					// held request is the acquisition itself.
					warm := must(m.TryAcquire(ctx, time.Minute))(t)
					must(warm.Release(ctx))(t)
				}
				late.Hold(t, faultproxy.All(faultproxy.Named(cmd), faultproxy.Arg(key)), func() error {
					_, err := m.TryAcquire(ctx, time.Minute)
					return err
				})
				late.WaitCleanups(t)
				if v := getOrEmpty(t, admin, key); v != "" && !lockcore.IsTombstone(v) {
					t.Fatalf("after the cleanup the key holds %q; want no owner", v)
				}
				late.LetThrough(t)

				// The late request took nothing: the key holds the tombstone.
				v := getOrEmpty(t, admin, key)
				if !lockcore.IsTombstone(v) {
					t.Fatalf("after the late request the key holds %q; want the cleanup's tombstone (the late request took the lock)", v)
				}
				if pttl := must(admin.PTTL(ctx, key).Result())(t); pttl <= 0 || pttl > engine.AbandonFor(time.Minute) {
					t.Fatalf("tombstone PTTL = %v", pttl)
				}
				// Another client of the other order takes the lock at once,
				// over the tombstone.
				other := must(lock.New(b.Coordinator(t), "late-"+name, lock.WithFIFO(!fifo)))(t)
				l, err := other.TryAcquire(ctx, time.Minute)
				if err != nil {
					t.Fatalf("another client's TryAcquire (fifo=%v) = %v; want the lock", !fifo, err)
				}
				if v := must(admin.Get(ctx, key).Result())(t); v != l.Token() {
					t.Fatalf("the key holds %q, want the new holder's token", v)
				}
				if out := must(l.Release(ctx))(t); out != coordination.Released {
					t.Fatalf("Release = %v", out)
				}
			})
		}
	})
}

// A blocked waiter's attempt (lock_acquire) delivered late meets its own
// tombstone: refused, nothing written; a tombstone of another token is
// taken over by lock_acquire, and release, refresh and verify of other
// tokens never match a tombstone. The cleanup's re-send changes nothing.
func TestTombstoneScripts(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord := b.Coordinator(t)
		e := must(engine.Of(coord))(t)
		admin := b.Admin(t)
		keys := e.Key("stone")
		key := b.Key("stone")
		mine, theirs := must(engine.NewToken())(t), must(engine.NewToken())(t)

		// mine held, marked by a waiter: abandoned, tombstone, waiters woken.
		if err := admin.Set(ctx, key, mine+"+", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if out := must(lockcore.Abandon.Run(ctx, e, keys, mine, int64(10_000)))(t); out != decode.Released {
			t.Fatalf("Abandon of the holder = %v", out)
		}
		if v := must(admin.Get(ctx, key).Result())(t); v != mine+"!" {
			t.Fatalf("key = %q, want the tombstone", v)
		}
		// It lives as long as the lock it replaces would have (longer than
		// the 10 s asked), so that the token cannot take the key back
		// meanwhile (a Redlock node's refresh re-takes a free key).
		if pttl := must(admin.PTTL(ctx, key).Result())(t); pttl <= 50*time.Second || pttl > time.Minute {
			t.Fatalf("tombstone PTTL = %v, want the lock's remaining minute", pttl)
		}
		// A short lock: the tombstone's own life.
		if err := admin.Set(ctx, key, mine, time.Second).Err(); err != nil {
			t.Fatal(err)
		}
		if out := must(lockcore.Abandon.Run(ctx, e, keys, mine, int64(10_000)))(t); out != decode.Released {
			t.Fatalf("Abandon of the holder = %v", out)
		}
		if pttl := must(admin.PTTL(ctx, key).Result())(t); pttl <= 5*time.Second || pttl > 10*time.Second {
			t.Fatalf("tombstone PTTL = %v, want 10 s", pttl)
		}
		// A re-sent cleanup: nothing changes.
		if out := must(lockcore.Abandon.Run(ctx, e, keys, mine, int64(10_000)))(t); out != decode.AlreadyReleased {
			t.Fatalf("Abandon re-sent = %v", out)
		}
		// The late requests of mine: the first attempt and a waiter's.
		if g := must(lockcore.Try.Run(ctx, e, keys, mine, int64(60_000)))(t); g.Acquired || !g.Again {
			t.Fatalf("late SET NX = %+v, want refused (Again)", g)
		}
		if g := must(lockcore.Acquire.Run(ctx, e, keys, mine, int64(60_000)))(t); g.Acquired {
			t.Fatalf("late lock_acquire = %+v, want refused", g)
		}
		// Others' scripts do not match it.
		if ok := must(lockcore.Verify.Run(ctx, e, keys, theirs))(t); ok {
			t.Fatal("Verify matched a tombstone")
		}
		if ok := must(lockcore.Refresh.Run(ctx, e, keys, mine, int64(60_000)))(t); ok {
			t.Fatal("Refresh of the abandoned token matched its tombstone")
		}
		if v := must(admin.Get(ctx, key).Result())(t); v != mine+"!" {
			t.Fatalf("key = %q after the late requests, want the tombstone", v)
		}
		// A tombstone reads as free: no holder, nothing to adopt.
		m := must(lock.New(coord, "stone"))(t)
		if h, err := m.Holder(ctx); !errors.Is(err, coordination.ErrNotHeld) {
			t.Fatalf("Holder over a tombstone = %+v, %v, want ErrNotHeld", h, err)
		}
		if _, err := m.Adopt(ctx, mine); !errors.Is(err, coordination.ErrNotHeld) {
			t.Fatalf("Adopt of the abandoned token = %v, want ErrNotHeld", err)
		}
		// Another token takes it over.
		if g := must(lockcore.Acquire.Run(ctx, e, keys, theirs, int64(60_000)))(t); !g.Acquired {
			t.Fatalf("lock_acquire over a tombstone = %+v, want acquired", g)
		}
		if v := must(admin.Get(ctx, key).Result())(t); v != theirs {
			t.Fatalf("key = %q, want the new holder", v)
		}
		// Abandoning while another holds: nothing changes.
		if out := must(lockcore.Abandon.Run(ctx, e, keys, mine, int64(10_000)))(t); out != decode.NotOwned {
			t.Fatalf("Abandon under another holder = %v", out)
		}
		// Abandoning a free lock leaves the tombstone too.
		admin.Del(ctx, key)
		if out := must(lockcore.Abandon.Run(ctx, e, keys, mine, int64(10_000)))(t); out != decode.AlreadyReleased {
			t.Fatalf("Abandon of a free lock = %v", out)
		}
		if v := must(admin.Get(ctx, key).Result())(t); v != mine+"!" {
			t.Fatalf("key = %q, want the tombstone", v)
		}
		// A garbage value ending with '!' is still refused as not a token.
		if err := admin.Set(ctx, key, "garbage!", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := lockcore.Acquire.Run(ctx, e, keys, theirs, int64(60_000)); !errors.Is(err, coordination.ErrBadState) {
			t.Fatalf("lock_acquire over garbage = %v, want ErrBadState", err)
		}
	})
}

// hgetOrEmpty returns the field's value, "" when it does not exist.
func hgetOrEmpty(t *testing.T, c redis.UniversalClient, key, field string) string {
	t.Helper()
	v, err := c.HGet(context.Background(), key, field).Result()
	if errors.Is(err, redis.Nil) {
		return ""
	}
	if err != nil {
		t.Fatalf("HGET %s %s: %v", key, field, err)
	}
	return v
}

// The same for a named lease in a hash field: the late lease_acquire
// meets the cleanup's tombstone in its field and takes nothing; another
// client takes the field at once, and the hash's other fields are not
// touched.
func TestLateFieldAcquireAfterCleanupTakesNothing(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		key := b.Key("late-fields")
		late := b.Late(t, key)
		admin := b.Admin(t)
		// Warm: the scripts cached on the server (one EVALSHA per send).
		warm := must(tryAcquireField(ctx, late.Coord, "late-fields", "warm", time.Minute))(t)
		if _, err := warm.Release(ctx); err != nil {
			t.Fatal(err)
		}
		neighbour := must(tryAcquireField(ctx, b.Coordinator(t), "late-fields", "other", time.Minute))(t)

		late.Hold(t, faultproxy.ScriptSHA(lock.FieldAcquire.Hash()), func() error {
			_, err := tryAcquireField(ctx, late.Coord, "late-fields", "f", time.Minute)
			return err
		})
		late.WaitCleanups(t)
		late.LetThrough(t)

		v := hgetOrEmpty(t, admin, key, "f")
		if !lockcore.IsTombstone(v) {
			t.Fatalf("after the late request the field holds %q; want the cleanup's tombstone (the late request took the lease)", v)
		}
		if ttl := must(admin.HPTTL(ctx, key, "f").Result())(t); len(ttl) != 1 || ttl[0] <= 0 || time.Duration(ttl[0])*time.Millisecond > engine.AbandonFor(time.Minute) {
			t.Fatalf("tombstone HPTTL = %v", ttl)
		}
		takeFieldAtOnce(t, b, "late-fields", neighbour, "another client")
	}, testharness.HashFieldTTLOnly())
}

// A blocked Acquire of a FIFO Mutex whose first attempt is held in the
// network while another owner holds the lock, until after the Acquire gave
// up and its cleanup ran, does not join the waiters' queue when that
// attempt finally arrives: the cleanup recorded the abandoned token beside
// the queue. (Before the fix the late attempt queued a waiter that never
// tried again, and the next waiter behind it was served only once that
// dead waiter's alive time passed, about 3 s after the release.)
func TestLateFIFOWaiterAfterCleanupDoesNotQueue(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		key := b.Key("late-queue")
		late := b.Late(t, key)
		admin := b.Admin(t)

		holder := must(lock.New(b.Coordinator(t), "late-queue", lock.WithFIFO(true)))(t)
		h := must(holder.TryAcquire(ctx, time.Minute))(t)
		m := must(lock.New(late.Coord, "late-queue", lock.WithFIFO(true)))(t)
		if _, err := m.TryAcquire(ctx, time.Minute); !errors.Is(err, coordination.ErrNotAcquired) { // loads the script on the key's server
			t.Fatalf("TryAcquire of a held lock = %v", err)
		}
		late.Hold(t, faultproxy.All(faultproxy.Named("EVALSHA"), faultproxy.Arg(key)), func() error {
			actx, cancel := context.WithTimeout(ctx, 400*time.Millisecond)
			defer cancel()
			_, err := m.Acquire(actx, time.Minute)
			return err
		})
		// The cleanup's first try records the abandoned token beside the
		// queue; with the lock held by another owner it keeps trying
		// (engine.Engine.Abandon), so it does not end here.
		alive := lock.FIFOKeys(m).Full()[2]
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			vals := must(admin.HVals(ctx, alive).Result())(t)
			if slices.ContainsFunc(vals, func(v string) bool { return strings.HasPrefix(v, "!") }) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no abandonment recorded beside the queue: %q", vals)
			}
		}
		if n := late.Engine.Cleanups(); n != 1 {
			t.Fatalf("cleanups running: %d, want 1 (waiting for the holder to let go)", n)
		}
		late.LetThrough(t)

		queue := lock.FIFOKeys(m).Full()[1]
		if n := must(admin.ZCard(ctx, queue).Result())(t); n != 0 {
			t.Fatalf("the queue holds %d waiters after the late attempt (%q); want none", n, must(admin.ZRange(ctx, queue, 0, -1).Result())(t))
		}
		// A waiter blocked now is served at once by the release.
		w := must(lock.New(b.Coordinator(t), "late-queue", lock.WithFIFO(true)))(t)
		got := make(chan error, 1)
		var at time.Time
		go func() {
			l, err := w.Acquire(ctx, time.Minute)
			at = time.Now()
			if err == nil {
				_, err = l.Release(ctx)
			}
			got <- err
		}()
		time.Sleep(200 * time.Millisecond)
		start := time.Now()
		must(h.Release(ctx))(t)
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		if d := at.Sub(start); d > time.Second {
			t.Fatalf("the waiter was served %v after the release; want at once", d)
		}
	})
}

// Two acquisitions of one lock abandoned while a third owner holds it (one
// a TryAcquire, one a blocked Acquire whose script attempt is held), each
// with its request held in the network until after its cleanup: the
// cleanups wait for the holder to let go (engine.Engine.Abandon), then
// each leaves its tombstone beside the other's, and neither late request
// takes the lock; another client then takes it at once. (Before: a cleanup
// that found the lock held gave up at once, so a late request landing
// after the holder's release took the lock for a whole TTL; and one that
// found another token's tombstone wrote nothing, so a late script attempt
// took the lock over that tombstone.)
func TestLateAcquiresWhileHeldTakeNothing(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		for _, fifo := range []bool{false, true} {
			name := map[bool]string{false: "default", true: "fifo"}[fifo]
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				key := b.Key("late-held-" + name)
				admin := b.Admin(t)
				holder := must(lock.New(b.Coordinator(t), "late-held-"+name, lock.WithFIFO(fifo)))(t)
				h := must(holder.TryAcquire(ctx, time.Minute))(t)

				var lates []*testharness.Late
				for _, block := range []bool{false, true} {
					late := b.Late(t, key)
					e := late.Engine
					m := must(lock.New(late.Coord, "late-held-"+name, lock.WithFIFO(fifo)))(t)
					// Every script loaded first, so that each held request is
					// the acquisition's own.
					if _, err := m.TryAcquire(ctx, time.Minute); !errors.Is(err, coordination.ErrNotAcquired) {
						t.Fatalf("TryAcquire of a held lock = %v", err)
					}
					if g := must(lockcore.Acquire.Run(ctx, e, e.Key("late-held-"+name), must(engine.NewToken())(t), int64(60_000)))(t); g.Acquired {
						t.Fatal("lock_acquire took a held lock")
					}
					cmd := "SET"
					if fifo || block {
						cmd = "EVALSHA"
					}
					late.Hold(t, faultproxy.All(faultproxy.Named(cmd), faultproxy.Arg(key)), func() error {
						if block {
							actx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
							defer cancel()
							_, err := m.Acquire(actx, time.Minute)
							return err
						}
						_, err := m.TryAcquire(ctx, time.Minute)
						return err
					})
					lates = append(lates, late)
				}
				// While the holder holds the lock, no tombstone fits: the
				// cleanups keep trying.
				time.Sleep(300 * time.Millisecond)
				if v := must(admin.Get(ctx, key).Result())(t); !strings.HasPrefix(v, h.Token()) {
					t.Fatalf("the key holds %q while the holder holds the lock", v)
				}
				for i, l := range lates {
					if n := l.Engine.Cleanups(); n != 1 {
						t.Fatalf("acquisition %d: %d cleanups running, want 1", i, n)
					}
				}
				must(h.Release(ctx))(t)
				for _, l := range lates {
					l.WaitCleanups(t)
				}
				stones := lockcore.Abandoned(getOrEmpty(t, admin, key))
				if len(stones) != 2 {
					t.Fatalf("after the cleanups the key holds %q; want both tombstones", getOrEmpty(t, admin, key))
				}
				for _, l := range lates {
					l.LetThrough(t)
				}
				if got := lockcore.Abandoned(getOrEmpty(t, admin, key)); !slices.Equal(got, stones) {
					t.Fatalf("after the late requests the key holds %q; want the tombstones %q (a late request took the lock)", getOrEmpty(t, admin, key), stones)
				}
				other := must(lock.New(b.Coordinator(t), "late-held-"+name, lock.WithFIFO(fifo)))(t)
				l, err := other.TryAcquire(ctx, time.Minute)
				if err != nil {
					t.Fatalf("another client's TryAcquire = %v; want the lock", err)
				}
				if out := must(l.Release(ctx))(t); out != coordination.Released {
					t.Fatalf("Release = %v", out)
				}
			})
		}
	})
}

// The tombstones of several abandoned acquisitions share the lock key
// (lock_abandon, fragment lock_value): each late request is refused, any
// other token takes them over, at most eight are kept (the oldest goes),
// the key keeps the longest life, and a malformed list is refused with
// nothing written.
func TestTombstoneListScripts(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord := b.Coordinator(t)
		e := must(engine.Of(coord))(t)
		admin := b.Admin(t)
		keys := e.Key("stones")
		key := b.Key("stones")
		var tok []string
		for range 10 {
			tok = append(tok, must(engine.NewToken())(t))
		}
		abandon := func(i int, life int64, want decode.Outcome) {
			t.Helper()
			if out := must(lockcore.Abandon.Run(ctx, e, keys, tok[i], life))(t); out != want {
				t.Fatalf("Abandon of token %d = %v, want %v", i, out, want)
			}
		}
		abandon(0, 60_000, decode.AlreadyReleased)
		abandon(1, 1_000, decode.AlreadyReleased)
		if v := must(admin.Get(ctx, key).Result())(t); v != tok[0]+"!"+tok[1]+"!" {
			t.Fatalf("key = %q, want both tombstones in order", v)
		}
		if pttl := must(admin.PTTL(ctx, key).Result())(t); pttl < 50*time.Second {
			t.Fatalf("PTTL = %v: the shorter life replaced the longer", pttl)
		}
		abandon(1, 1_000, decode.AlreadyReleased) // a re-send: nothing changes
		if got := lockcore.Abandoned(must(admin.Get(ctx, key).Result())(t)); len(got) != 2 {
			t.Fatalf("after a re-sent abandon: %q", got)
		}
		for i := range 2 {
			if g := must(lockcore.Try.Run(ctx, e, keys, tok[i], int64(60_000)))(t); g.Acquired {
				t.Fatalf("late SET NX of token %d acquired", i)
			}
			if g := must(lockcore.Acquire.Run(ctx, e, keys, tok[i], int64(60_000)))(t); g.Acquired {
				t.Fatalf("late lock_acquire of token %d acquired over its tombstone", i)
			}
		}
		m := must(lock.New(coord, "stones"))(t)
		if _, err := m.Holder(ctx); !errors.Is(err, coordination.ErrNotHeld) {
			t.Fatalf("Holder over tombstones = %v, want ErrNotHeld", err)
		}
		// Up to eight: the ninth drops the oldest, whose token may then
		// take the lock.
		for i := 2; i < 9; i++ {
			abandon(i, 60_000, decode.AlreadyReleased)
		}
		if got := lockcore.Abandoned(must(admin.Get(ctx, key).Result())(t)); !slices.Equal(got, tok[1:9]) {
			t.Fatalf("after nine abandons: %q, want tokens 1..8", got)
		}
		if g := must(lockcore.Acquire.Run(ctx, e, keys, tok[8], int64(60_000)))(t); g.Acquired {
			t.Fatal("the newest tombstone's token acquired")
		}
		if g := must(lockcore.Acquire.Run(ctx, e, keys, tok[0], int64(60_000)))(t); !g.Acquired {
			t.Fatalf("the dropped tombstone's token: %+v, want acquired", g)
		}
		if v := must(admin.Get(ctx, key).Result())(t); v != tok[0] {
			t.Fatalf("key = %q, want the new holder", v)
		}
		// A malformed list: refused by both, nothing written.
		bad := tok[1] + "!garbage!"
		if err := admin.Set(ctx, key, bad, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := lockcore.Acquire.Run(ctx, e, keys, tok[9], int64(60_000)); !errors.Is(err, coordination.ErrBadState) {
			t.Fatalf("lock_acquire over a malformed list = %v, want ErrBadState", err)
		}
		if _, err := lockcore.Abandon.Run(ctx, e, keys, tok[9], int64(60_000)); !errors.Is(err, coordination.ErrBadState) {
			t.Fatalf("lock_abandon over a malformed list = %v, want ErrBadState", err)
		}
		if v := must(admin.Get(ctx, key).Result())(t); v != bad {
			t.Fatalf("key = %q after the refusals, want it unchanged", v)
		}
	})
}

// A cleanup waiting for another owner to let go (engine.Engine.Abandon)
// does not hold up Shutdown: its last try finds the lock still held and it
// ends, not counted as abandoned.
func TestShutdownEndsACleanupWaitingForTheHolder(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		key := b.Key("late-shutdown")
		holder := must(lock.New(b.Coordinator(t), "late-shutdown"))(t)
		h := must(holder.TryAcquire(ctx, time.Minute))(t)
		late := b.Late(t, key)
		coord, e := late.Coord, late.Engine
		m := must(lock.New(coord, "late-shutdown"))(t)
		late.Hold(t, faultproxy.All(faultproxy.Named("SET"), faultproxy.Arg(key)), func() error {
			_, err := m.TryAcquire(ctx, time.Minute)
			return err
		})
		time.Sleep(200 * time.Millisecond)
		if n := e.Cleanups(); n != 1 {
			t.Fatalf("%d cleanups running, want 1 (waiting for the holder)", n)
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		start := time.Now()
		if err := coord.Shutdown(sctx); err != nil {
			t.Fatalf("Shutdown = %v, want nil", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("Shutdown took %v", d)
		}
		if n := e.Cleanups(); n != 0 {
			t.Fatalf("%d cleanups running after Shutdown", n)
		}
		late.LetThrough(t)
		if out := must(h.Release(ctx))(t); out != coordination.Released {
			t.Fatalf("the holder's Release = %v", out)
		}
	})
}

// An acquisition whose command is in flight when Shutdown begins returns
// an error wrapping ErrClosed once its reply comes, not a handle that can
// no longer be released, and the grant it got is released: another
// client takes the lock at once. (A new user's finding: the Acquire
// returned a dead lock after Shutdown, and the key stayed held for its
// whole TTL.)
func TestAcquireInFlightAtShutdownReleasesTheGrant(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		for _, fifo := range []bool{false, true} {
			name := map[bool]string{false: "default", true: "fifo"}[fifo]
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				key := b.Key("inflight-" + name)
				p, client := b.Proxied(t, key)
				coord := must(coordination.New(client, coordination.WithKeyPrefix(b.Prefix())))(t)
				m := must(lock.New(coord, "inflight-"+name, lock.WithFIFO(fifo)))(t)
				cmd := "SET"
				if fifo {
					cmd = "EVALSHA"
					warm := must(m.TryAcquire(ctx, time.Minute))(t)
					must(warm.Release(ctx))(t)
				}
				p.Apply(faultproxy.DelayReply(faultproxy.All(faultproxy.Named(cmd), faultproxy.Arg(key)), 600*time.Millisecond, 1))
				got := make(chan error, 1)
				go func() {
					l, err := m.Acquire(ctx, time.Minute)
					if l != nil {
						err = errors.New("Acquire returned a lock after Shutdown")
					}
					got <- err
				}()
				time.Sleep(150 * time.Millisecond)
				if err := coord.Shutdown(ctx); err != nil {
					t.Fatalf("Shutdown = %v", err)
				}
				if err := <-got; !errors.Is(err, coordination.ErrClosed) {
					t.Fatalf("Acquire in flight at Shutdown = %v, want ErrClosed", err)
				}
				if v := getOrEmpty(t, b.Admin(t), key); v != "" {
					t.Fatalf("the key holds %q after the acquisition returned; want the grant released", v)
				}
				other := must(lock.New(b.Coordinator(t), "inflight-"+name, lock.WithFIFO(fifo)))(t)
				l, err := other.TryAcquire(ctx, time.Minute)
				if err != nil {
					t.Fatalf("another client's TryAcquire = %v; want the lock", err)
				}
				must(l.Release(ctx))(t)
			})
		}
	})
}

// Holder and Adopt over a value that is not an owner token say so, as an
// acquisition does, instead of "unexpected reply" (a new user's finding).
func TestHolderOverGarbageSaysNotAnOwnerToken(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		admin := b.Admin(t)
		m := must(lock.New(b.Coordinator(t), "garbage"))(t)
		tok := must(engine.NewToken())(t)
		for _, v := range []string{"hello world", tok + "!garbage!"} {
			if err := admin.Set(ctx, b.Key("garbage"), v, time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			if _, err := m.Holder(ctx); !errors.Is(err, coordination.ErrBadState) || !strings.Contains(err.Error(), "not an owner token") {
				t.Fatalf("Holder over %q = %v, want ErrBadState saying not an owner token", v, err)
			}
			if _, err := m.Adopt(ctx, tok); !errors.Is(err, coordination.ErrBadState) || !strings.Contains(err.Error(), "not an owner token") {
				t.Fatalf("Adopt over %q = %v, want ErrBadState saying not an owner token", v, err)
			}
		}
	})
}
