package lock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/faultproxy"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/lock"
)

// Two acquisitions of one field lease by different clients abandoned
// close together (a network blip hits both): both requests are held in
// the network until after both clients gave up and both cleanups ran,
// then let through. Neither takes the field: the second cleanup appends
// its token to the first one's tombstone, and each late lease_acquire
// finds its own token in the list. A third client takes the field at
// once; the hash's other fields are not touched. (Before the tombstone
// list, the second cleanup found the first one's tombstone and wrote
// nothing, and the second late request took the field for a whole TTL,
// held by nobody.)
func TestTwoLateFieldAcquiresAfterCleanupsTakeNothing(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		key := b.Key("late2-fields")
		admin := b.Admin(t)
		neighbour := must(tryAcquireField(ctx, b.Coordinator(t), "late2-fields", "other", time.Minute))(t)
		clients := make([]*testharness.Late, 2)
		for i := range clients {
			c := b.Late(t, key)
			// Warm: the scripts cached on the server (one EVALSHA per send).
			warm := must(tryAcquireField(ctx, c.Coord, "late2-fields", "warm", time.Minute))(t)
			if _, err := warm.Release(ctx); err != nil {
				t.Fatal(err)
			}
			clients[i] = c
		}
		// Both acquisitions held, both ambiguous, both cleaned up.
		for _, c := range clients {
			c.Hold(t, faultproxy.ScriptSHA(lock.FieldAcquire.Hash()), func() error {
				_, err := tryAcquireField(ctx, c.Coord, "late2-fields", "f", time.Minute)
				return err
			})
			c.WaitCleanups(t)
		}
		cleaned := hgetOrEmpty(t, admin, key, "f")
		for _, c := range clients {
			c.LetThrough(t)
		}

		// Neither late request took the field; it holds both abandoned
		// tokens.
		v := hgetOrEmpty(t, admin, key, "f")
		if v != cleaned {
			t.Fatalf("after the late requests the field holds %q; want the cleanups' tombstone list %q (a late request took the lease)", v, cleaned)
		}
		stones := strings.Split(strings.TrimSuffix(v, "!"), "!")
		if !strings.HasSuffix(v, "!") || len(stones) != 2 || stones[0] == stones[1] {
			t.Fatalf("the field holds %q; want a tombstone list of both abandoned tokens", v)
		}
		if ttl := must(admin.HPTTL(ctx, key, "f").Result())(t); len(ttl) != 1 || ttl[0] <= 0 || time.Duration(ttl[0])*time.Millisecond > engine.AbandonFor(time.Minute) {
			t.Fatalf("tombstone HPTTL = %v", ttl)
		}
		s := must(lock.NewFieldSet(b.Coordinator(t), "late2-fields"))(t)
		if _, err := s.Holder(ctx, "f"); !errors.Is(err, coordination.ErrNotHeld) {
			t.Fatalf("Holder over a tombstone list = %v, want ErrNotHeld", err)
		}
		for _, tok := range stones {
			if _, err := s.Adopt(ctx, "f", tok); !errors.Is(err, coordination.ErrNotHeld) {
				t.Fatalf("Adopt of an abandoned token = %v, want ErrNotHeld", err)
			}
		}
		// A third client takes the field at once.
		takeFieldAtOnce(t, b, "late2-fields", neighbour, "a third client")
	}, testharness.HashFieldTTLOnly())
}

// takeFieldAtOnce checks that who, a client of its own, takes the field
// "f" of the field set name at once after a late request: the field then
// holds its token and the field "other" still neighbour's; both leases
// are released.
func takeFieldAtOnce(t *testing.T, b *testharness.Backend, name string, neighbour *lock.FieldLease, who string) {
	t.Helper()
	ctx := context.Background()
	admin, key := b.Admin(t), b.Key(name)
	l, err := tryAcquireField(ctx, b.Coordinator(t), name, "f", time.Minute)
	if err != nil {
		t.Fatalf("%s's TryAcquire = %v; want the lease", who, err)
	}
	if v := hgetOrEmpty(t, admin, key, "f"); v != l.Token() {
		t.Fatalf("the field holds %q, want the new holder's token", v)
	}
	if v := hgetOrEmpty(t, admin, key, "other"); v != neighbour.Token() {
		t.Fatalf("the neighbour field holds %q, want its holder's token", v)
	}
	for _, h := range []*lock.FieldLease{l, neighbour} {
		if out := must(h.Release(ctx))(t); out != coordination.Released {
			t.Fatalf("Release = %v", out)
		}
	}
}

// The field-lease scripts on a tombstone list in a field: the cleanup of
// the holder releases it and leaves its tombstone alone; abandons of
// other tokens append to the list (the field's TTL the larger of its
// remaining one and the new life); a re-sent abandon changes nothing;
// the late acquire of any token in the list is refused with nothing
// written; refresh, verify and release match none of them; Holder sees no
// holder; a token not in it takes it over; a ninth abandon drops the
// oldest entry; a value ending with '!' that is no list of owner tokens
// (or of more than 8) is ErrBadState to acquire and abandon, with nothing
// written; another field of the hash is never touched.
func TestFieldTombstoneListScripts(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord := b.Coordinator(t)
		e := must(engine.Of(coord))(t)
		admin := b.Admin(t)
		k, key := e.Key("stones"), b.Key("stones")
		tok := make([]string, 10)
		for i := range tok {
			tok[i] = must(engine.NewToken())(t)
		}
		// A UUID token of earlier versions fits in a list too.
		tok[1] = "0f8fad5b-d9cb-469f-a165-70867728950e"
		s := must(lock.NewFieldSet(coord, "stones"))(t)
		neighbour := must(s.TryAcquire(ctx, "g", time.Minute))(t)
		want := func(when, v string, min, max time.Duration) {
			t.Helper()
			got, ms := fieldState(t, admin, key, "f")
			if got != v || ms <= min.Milliseconds() || ms > max.Milliseconds() {
				t.Fatalf("%s: field holds %q with HPTTL %d ms; want %q with a TTL in (%v, %v]", when, got, ms, v, min, max)
			}
			wantField(t, admin, key, "g", neighbour.Token(), time.Minute, when+" (the neighbour)")
		}
		abandon := func(tk string, life int64, wantOut decode.Outcome) {
			t.Helper()
			if out := must(lock.FieldAbandon.Run(ctx, e, k, "f", tk, life))(t); out != wantOut {
				t.Fatalf("Abandon(%s, %d) = %v, want %v", tk, life, out, wantOut)
			}
		}
		pttl := func() time.Duration {
			_, ms := fieldState(t, admin, key, "f")
			return time.Duration(ms) * time.Millisecond
		}

		// The holder abandoned: released, its tombstone alone.
		if g := must(lock.FieldAcquire.Run(ctx, e, k, "f", tok[9], int64(60_000)))(t); !g.Acquired {
			t.Fatalf("acquire = %+v", g)
		}
		abandon(tok[9], 5_000, decode.Released)
		want("the holder abandoned", tok[9]+"!", 0, 5*time.Second)
		// Another token: appended, the TTL raised to the longer life.
		abandon(tok[0], 20_000, decode.AlreadyReleased)
		two := tok[9] + "!" + tok[0] + "!"
		want("two abandons", two, 10*time.Second, 20*time.Second)
		abandon(tok[1], 10_000, decode.AlreadyReleased)
		three := two + tok[1] + "!"
		want("three abandons", three, 10*time.Second, 20*time.Second)
		// Re-sent abandons: nothing changes (the TTL is not restarted).
		before := pttl()
		time.Sleep(5 * time.Millisecond)
		for _, tk := range []string{tok[9], tok[0], tok[1]} {
			abandon(tk, 60_000, decode.AlreadyReleased)
		}
		want("re-sent abandons", three, 0, before)

		// The late acquire of any token in it: refused, nothing written.
		for _, tk := range []string{tok[9], tok[0], tok[1]} {
			if g := must(lock.FieldAcquire.Run(ctx, e, k, "f", tk, int64(60_000)))(t); g.Acquired || g.RetryIn <= 0 || g.RetryIn > 20*time.Second {
				t.Fatalf("late acquire of %s = %+v, want refused with the tombstone's TTL", tk, g)
			}
		}
		want("after the late acquires", three, 0, before)
		// No holder; refresh, verify and release match nothing.
		if _, err := s.Holder(ctx, "f"); !errors.Is(err, coordination.ErrNotHeld) {
			t.Fatalf("Holder over a tombstone list = %v, want ErrNotHeld", err)
		}
		for _, tk := range tok[:3] {
			if ok := must(lock.FieldRefresh.Run(ctx, e, k, "f", tk, int64(60_000)))(t); ok {
				t.Fatalf("Refresh of %s matched a tombstone list", tk)
			}
			if ok := must(lock.FieldVerify.Run(ctx, e, k, "f", tk))(t); ok {
				t.Fatalf("Verify of %s matched a tombstone list", tk)
			}
			if out := must(lock.FieldRelease.Run(ctx, e, k, "f", tk))(t); out == decode.Released {
				t.Fatalf("Release of %s matched a tombstone list", tk)
			}
		}
		want("after the reads", three, 0, before)
		// A token not in it takes it over.
		if g := must(lock.FieldAcquire.Run(ctx, e, k, "f", tok[2], int64(60_000)))(t); !g.Acquired {
			t.Fatalf("acquire over a tombstone list = %+v, want acquired", g)
		}
		want("taken over", tok[2], 50*time.Second, time.Minute)
		// Abandoning under another holder: nothing changes.
		abandon(tok[0], 10_000, decode.NotOwned)
		want("abandon under another holder", tok[2], 50*time.Second, time.Minute)

		// Nine abandons: the first is dropped; a shorter life keeps the
		// longer TTL.
		admin.HDel(ctx, key, "f")
		list := ""
		for i := range 9 {
			abandon(tok[i], 30_000-int64(i)*1000, decode.AlreadyReleased)
			list += tok[i] + "!"
		}
		list = strings.TrimPrefix(list, tok[0]+"!")
		want("nine abandons", list, 22*time.Second, 30*time.Second)
		for _, tk := range tok[1:9] {
			if g := must(lock.FieldAcquire.Run(ctx, e, k, "f", tk, int64(60_000)))(t); g.Acquired {
				t.Fatalf("late acquire of %s over a full list = %+v, want refused", tk, g)
			}
		}
		want("after the late acquires", list, 0, 30*time.Second)

		// Malformed lists: ErrBadState, nothing written.
		for _, bad := range []string{
			tok[0] + "!garbage!",
			tok[0] + "!!",
			"!" + tok[0] + "!",
			"garbage!",
			strings.Repeat(tok[0]+"!", 9),
			strings.ToUpper(tok[1]) + "!",
		} {
			if err := admin.HSet(ctx, key, "f", bad).Err(); err != nil {
				t.Fatal(err)
			}
			admin.HPExpire(ctx, key, time.Minute, "f")
			if _, err := lock.FieldAcquire.Run(ctx, e, k, "f", tok[9], int64(60_000)); !errors.Is(err, coordination.ErrBadState) {
				t.Fatalf("acquire over %q = %v, want ErrBadState", bad, err)
			}
			if _, err := lock.FieldAbandon.Run(ctx, e, k, "f", tok[9], int64(10_000)); !errors.Is(err, coordination.ErrBadState) {
				t.Fatalf("abandon over %q = %v, want ErrBadState", bad, err)
			}
			want("over "+bad, bad, 50*time.Second, time.Minute)
		}
		if out := must(neighbour.Release(ctx))(t); out != coordination.Released {
			t.Fatalf("Release = %v", out)
		}
	}, testharness.HashFieldTTLOnly())
}
