package fencing_test

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/fencing"
	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/fencingcore"
	"github.com/coordkit/coordination/internal/testkit/faultproxy"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// tombstoneOf returns the abandoned token of the tombstone the lease key
// holds ({owner: token + "!"} alone), failing the test for anything else.
func tombstoneOf(t *testing.T, admin redis.UniversalClient, key, when string) string {
	t.Helper()
	h := must(admin.HGetAll(context.Background(), key).Result())(t)
	tok, ok := strings.CutSuffix(h["owner"], "!")
	if len(h) != 1 || !ok || tok == "" {
		t.Fatalf("%s the lease key holds %v; want the cleanup's tombstone {owner: token!} (the late request took the lease)", when, h)
	}
	return tok
}

// An acquisition whose request is held in the network until after its
// client gave up (ambiguous) and its background cleanup finished takes
// nothing when the request finally reaches the server: the cleanup left a
// tombstone that the late fencing_acquire refuses without drawing a
// fencing token or setting any TTL; Holder and Adopt read the tombstone as
// free, and another client takes the lock at once with the next token.
// (Before the fix the late request took the lease for a whole TTL, held
// by nobody, and drew a token.)
func TestLateAcquireAfterCleanupTakesNothing(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		name := "{late}"
		key := b.Key(leaseKey(name))
		late := b.Late(t, key)
		admin := b.Admin(t)

		m := must(fencing.New(late.Coord, leaseKey(name), fenceKey(name)))(t)
		// A first holder, so that the script is loaded (the held request
		// is the acquisition itself) and the counter stands at 1.
		first := must(m.TryAcquire(ctx, time.Minute))(t)
		if first.FencingToken() != 1 {
			t.Fatalf("first token = %d, want 1", first.FencingToken())
		}
		must(first.Release(ctx))(t)

		late.Hold(t, faultproxy.All(faultproxy.Named("EVALSHA"), faultproxy.Arg(key)), func() error {
			_, err := m.TryAcquire(ctx, time.Minute)
			return err
		})
		late.WaitCleanups(t)
		if h := must(admin.HGetAll(ctx, key).Result())(t); h["fence"] != "" {
			t.Fatalf("after the cleanup the lease key holds %v; want no holder", h)
		}
		before := must(admin.PTTL(ctx, key).Result())(t)
		time.Sleep(20 * time.Millisecond) // a restarted TTL would show
		late.LetThrough(t)

		// The late request took nothing, drew no token and restarted no TTL.
		token := tombstoneOf(t, admin, key, "after the late request")
		if before <= 0 || before > engine.AbandonFor(time.Minute) {
			t.Fatalf("tombstone PTTL = %v after the cleanup", before)
		}
		if after := must(admin.PTTL(ctx, key).Result())(t); after <= 0 || after > before {
			t.Fatalf("tombstone PTTL %v after the late request, %v before: restarted", after, before)
		}
		if c := must(counterOf(ctx, admin, b, fenceKey(name)).Int64())(t); c != 1 {
			t.Fatalf("counter = %d after the late request, want 1 (it drew a token)", c)
		}
		if _, err := m.Holder(ctx); !errors.Is(err, coordination.ErrNotHeld) {
			t.Fatalf("Holder over a tombstone = %v, want ErrNotHeld", err)
		}
		if _, err := m.Adopt(ctx, token); !errors.Is(err, coordination.ErrNotHeld) {
			t.Fatalf("Adopt of the abandoned token = %v, want ErrNotHeld", err)
		}

		// Another client takes the lock at once, with the next token.
		takeAtOnce(t, b, name, 2, "another client")
	})
}

// takeAtOnce checks that who, a client of its own, takes the fencing lock
// name at once after a late request, with fencing token next: the lease
// key then holds its {owner, fence} alone and Holder says so; the lock is
// released.
func takeAtOnce(t *testing.T, b *testharness.Backend, name string, next int64, who string) {
	t.Helper()
	ctx := context.Background()
	admin, key := b.Admin(t), b.Key(leaseKey(name))
	other := must(fencing.New(b.Coordinator(t), leaseKey(name), fenceKey(name)))(t)
	l, err := other.TryAcquire(ctx, time.Minute)
	if err != nil {
		t.Fatalf("%s's TryAcquire = %v; want the lock", who, err)
	}
	if l.FencingToken() != next {
		t.Fatalf("the next holder's token = %d, want %d", l.FencingToken(), next)
	}
	if h := must(admin.HGetAll(ctx, key).Result())(t); h["owner"] != l.Token() || h["fence"] != strconv.FormatInt(next, 10) || len(h) != 2 {
		t.Fatalf("the lease key holds %v, want the new holder's {owner, fence: %d}", h, next)
	}
	if hd := must(other.Holder(ctx))(t); hd.Token != l.Token() || hd.FencingToken != next {
		t.Fatalf("Holder = %+v", hd)
	}
	if out := must(l.Release(ctx))(t); out != coordination.Released {
		t.Fatalf("Release = %v", out)
	}
}

// The scripts on a tombstone: the cleanup releases the abandoned holder
// (waking waiters) and leaves {owner: token!}; its re-send changes
// nothing; the abandoned token's late acquire is refused with nothing
// written; refresh, verify and release of any token never match it; the
// read scripts see a free lease; another token takes it over with the next
// fencing token; a cleanup under another holder changes nothing.
func TestTombstoneScripts(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord := b.Coordinator(t)
		e := must(engine.Of(coord))(t)
		admin := b.Admin(t)
		name := "{stone}"
		keys := must(fencingcore.Keys(e, nil, leaseKey(name), fenceKey(name)))(t)
		key := b.Key(leaseKey(name))
		mine, theirs := must(engine.NewToken())(t), must(engine.NewToken())(t)
		hk := must(e.NamedKeys(nil, leaseKey(name)))(t)

		g := must(fencingcore.Acquire.Run(ctx, e, keys, mine, int64(60_000)))(t)
		if !g.Acquired || g.Value != "1" {
			t.Fatalf("acquire = %+v", g)
		}
		// A contended attempt marks the owner: the cleanup then wakes.
		if g := must(fencingcore.Acquire.Run(ctx, e, keys, theirs, int64(60_000)))(t); g.Acquired {
			t.Fatalf("contended acquire = %+v", g)
		}
		if out := must(fencingcore.Abandon.Run(ctx, e, hk, mine, int64(10_000)))(t); out != decode.Released {
			t.Fatalf("Abandon of the holder = %v", out)
		}
		stone := map[string]string{"owner": mine + "!"}
		check := func(when string) {
			t.Helper()
			if h := must(admin.HGetAll(ctx, key).Result())(t); len(h) != 1 || h["owner"] != stone["owner"] {
				t.Fatalf("%s: key = %v, want the tombstone %v", when, h, stone)
			}
			if pttl := must(admin.PTTL(ctx, key).Result())(t); pttl <= 0 || pttl > 10*time.Second {
				t.Fatalf("%s: tombstone PTTL = %v", when, pttl)
			}
		}
		check("abandoned")
		if out := must(fencingcore.Abandon.Run(ctx, e, hk, mine, int64(10_000)))(t); out != decode.AlreadyReleased {
			t.Fatalf("Abandon re-sent = %v", out)
		}
		if g := must(fencingcore.Acquire.Run(ctx, e, keys, mine, int64(60_000)))(t); g.Acquired || g.RetryIn <= 0 || g.RetryIn > 10*time.Second {
			t.Fatalf("late acquire = %+v, want refused with the tombstone's TTL", g)
		}
		for _, tok := range []string{mine, theirs} {
			if ok := must(fencingcore.Refresh.Run(ctx, e, hk, tok, int64(60_000)))(t); ok {
				t.Fatalf("Refresh of %s matched a tombstone", tok)
			}
			if ok := must(fencingcore.Verify.Run(ctx, e, hk, tok))(t); ok {
				t.Fatalf("Verify of %s matched a tombstone", tok)
			}
			if out := must(fencingcore.Release.Run(ctx, e, hk, tok))(t); out == decode.Released {
				t.Fatalf("Release of %s matched a tombstone", tok)
			}
		}
		if h := must(fencingcore.Read.Run(ctx, e, hk))(t); h.Held {
			t.Fatalf("Read of a tombstone = %+v, want free", h)
		}
		check("after the late requests")
		if c := must(counterOf(ctx, admin, b, fenceKey(name)).Int64())(t); c != 1 {
			t.Fatalf("counter = %d, want 1", c)
		}
		// Another token takes it over, with the next fencing token and the
		// holder field.
		if g := must(fencingcore.Acquire.Run(ctx, e, keys, theirs, int64(60_000), "h"))(t); !g.Acquired || g.Value != "2" {
			t.Fatalf("acquire over a tombstone = %+v, want token 2", g)
		}
		if h := must(admin.HGetAll(ctx, key).Result())(t); len(h) != 3 || h["owner"] != theirs || h["fence"] != "2" || h["holder"] != "h" {
			t.Fatalf("key = %v, want the new holder", h)
		}
		if out := must(fencingcore.Abandon.Run(ctx, e, hk, mine, int64(10_000)))(t); out != decode.NotOwned {
			t.Fatalf("Abandon under another holder = %v", out)
		}
		// A free lease: the tombstone is written too.
		admin.Del(ctx, key)
		if out := must(fencingcore.Abandon.Run(ctx, e, hk, mine, int64(10_000)))(t); out != decode.AlreadyReleased {
			t.Fatalf("Abandon of a free lease = %v", out)
		}
		check("abandoned free")
		// A hash with an owner ending with '!' beside other fields is no
		// tombstone: refused.
		admin.HSet(ctx, key, "owner", theirs+"!", "x", "1")
		if _, err := fencingcore.Acquire.Run(ctx, e, keys, mine, int64(60_000)); !errors.Is(err, coordination.ErrBadState) {
			t.Fatalf("acquire over a damaged tombstone = %v, want ErrBadState", err)
		}
	})
}

// stonesOf returns the abandoned tokens, oldest first, of the tombstone
// list the lease key holds ({owner: "tokA!tokB!..."} alone), failing the
// test for anything else.
func stonesOf(t *testing.T, admin redis.UniversalClient, key, when string) []string {
	t.Helper()
	h := must(admin.HGetAll(context.Background(), key).Result())(t)
	v, ok := strings.CutSuffix(h["owner"], "!")
	if len(h) != 1 || !ok || v == "" {
		t.Fatalf("%s the lease key holds %v; want a tombstone {owner: tokA!tokB!...}", when, h)
	}
	return strings.Split(v, "!")
}

// Two acquisitions by different clients abandoned close together (a
// network blip hits both): both requests are held in the network until
// after both clients gave up and both cleanups ran, then let through.
// Neither takes the lease: the second cleanup appends its token to the
// first one's tombstone, and each late request finds its own token in the
// list. No fencing token is drawn, and a third client takes the lease at
// once with the next token. (Before the tombstone list, the second
// cleanup found the first one's tombstone, wrote nothing, and the second
// late request took the lease for a whole TTL, held by nobody.)
func TestTwoLateAcquiresAfterCleanupsTakeNothing(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		name := "{late2}"
		key := b.Key(leaseKey(name))
		admin := b.Admin(t)
		type client struct {
			*testharness.Late
			m *fencing.Mutex
		}
		clients := make([]*client, 2)
		for i := range clients {
			late := b.Late(t, key)
			c := &client{Late: late, m: must(fencing.New(late.Coord, leaseKey(name), fenceKey(name)))(t)}
			// Warm (the script loaded on the server, so that the held
			// request is the acquisition itself), and the counter moves.
			l := must(c.m.TryAcquire(ctx, time.Minute))(t)
			must(l.Release(ctx))(t)
			clients[i] = c
		}
		// Both acquisitions held, both ambiguous, both cleaned up.
		for _, c := range clients {
			c.Hold(t, faultproxy.All(faultproxy.Named("EVALSHA"), faultproxy.Arg(key)), func() error {
				_, err := c.m.TryAcquire(ctx, time.Minute)
				return err
			})
			c.WaitCleanups(t)
		}
		cleaned := must(admin.HGetAll(ctx, key).Result())(t)
		before := must(admin.PTTL(ctx, key).Result())(t)
		if before <= 0 || before > engine.AbandonFor(time.Minute) {
			t.Fatalf("tombstone PTTL = %v after the cleanups", before)
		}
		time.Sleep(20 * time.Millisecond) // a restarted TTL would show
		for _, c := range clients {
			c.LetThrough(t)
		}

		// Neither late request took anything, drew a token or restarted
		// the TTL; the list holds both abandoned tokens.
		stones := stonesOf(t, admin, key, "after the late requests")
		if h := must(admin.HGetAll(ctx, key).Result())(t); !maps.Equal(h, cleaned) {
			t.Fatalf("the lease key holds %v after the late requests, %v before", h, cleaned)
		}
		if len(stones) != 2 || stones[0] == stones[1] {
			t.Fatalf("tombstone list %q, want both abandoned tokens", stones)
		}
		if after := must(admin.PTTL(ctx, key).Result())(t); after <= 0 || after > before {
			t.Fatalf("tombstone PTTL %v after the late requests, %v before: restarted", after, before)
		}
		if c := must(counterOf(ctx, admin, b, fenceKey(name)).Int64())(t); c != 2 {
			t.Fatalf("counter = %d after the late requests, want 2 (a late request drew a token)", c)
		}
		m := clients[0].m
		if _, err := m.Holder(ctx); !errors.Is(err, coordination.ErrNotHeld) {
			t.Fatalf("Holder over a tombstone list = %v, want ErrNotHeld", err)
		}
		for _, tok := range stones {
			if _, err := m.Adopt(ctx, tok); !errors.Is(err, coordination.ErrNotHeld) {
				t.Fatalf("Adopt of an abandoned token = %v, want ErrNotHeld", err)
			}
		}

		// A third client takes the lock at once, with the next token.
		takeAtOnce(t, b, name, 3, "a third client")
	})
}

// The scripts on a tombstone list: abandons of different tokens append
// to it (the key's TTL the larger of its remaining one and the new
// life); a re-sent abandon changes nothing; the late acquire of any token
// in it is refused with nothing written and no fencing token drawn; the
// read scripts see a free lease; a token not in it takes it over with the
// next fencing token; a ninth abandon drops the oldest entry; a value
// ending with '!' that is no list of owner tokens (or of more than 8) is
// ErrBadState to acquire and abandon, with nothing written.
func TestTombstoneListScripts(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord := b.Coordinator(t)
		e := must(engine.Of(coord))(t)
		admin := b.Admin(t)
		name := "{stones}"
		keys := must(fencingcore.Keys(e, nil, leaseKey(name), fenceKey(name)))(t)
		key := b.Key(leaseKey(name))
		hk := must(e.NamedKeys(nil, leaseKey(name)))(t)
		tok := make([]string, 10)
		for i := range tok {
			tok[i] = must(engine.NewToken())(t)
		}
		// A UUID token of earlier versions fits in a list too.
		tok[1] = "0f8fad5b-d9cb-469f-a165-70867728950e"
		m := must(fencing.New(coord, leaseKey(name), fenceKey(name)))(t)
		// The counter at 1, the lease free.
		if g := must(fencingcore.Acquire.Run(ctx, e, keys, tok[9], int64(60_000)))(t); !g.Acquired || g.Value != "1" {
			t.Fatalf("acquire = %+v", g)
		}
		if out := must(fencingcore.Release.Run(ctx, e, hk, tok[9]))(t); out != decode.Released {
			t.Fatalf("release = %v", out)
		}
		pttl := func() time.Duration { return must(admin.PTTL(ctx, key).Result())(t) }
		want := func(when string, list string, min, max time.Duration) {
			t.Helper()
			if h := must(admin.HGetAll(ctx, key).Result())(t); len(h) != 1 || h["owner"] != list {
				t.Fatalf("%s: key = %v, want {owner: %s}", when, h, list)
			}
			if p := pttl(); p <= min || p > max {
				t.Fatalf("%s: PTTL = %v, want in (%v, %v]", when, p, min, max)
			}
		}
		abandon := func(tk string, life int64, wantOut decode.Outcome) {
			t.Helper()
			if out := must(fencingcore.Abandon.Run(ctx, e, hk, tk, life))(t); out != wantOut {
				t.Fatalf("Abandon(%s, %d) = %v, want %v", tk, life, out, wantOut)
			}
		}
		abandon(tok[0], 5_000, decode.AlreadyReleased)
		want("one abandon", tok[0]+"!", 0, 5*time.Second)
		// Another token: appended, the TTL raised to the longer life.
		abandon(tok[1], 20_000, decode.AlreadyReleased)
		two := tok[0] + "!" + tok[1] + "!"
		want("two abandons", two, 10*time.Second, 20*time.Second)
		// Re-sent abandons: nothing changes (the TTL is not restarted).
		before := pttl()
		time.Sleep(5 * time.Millisecond)
		abandon(tok[0], 60_000, decode.AlreadyReleased)
		abandon(tok[1], 60_000, decode.AlreadyReleased)
		want("re-sent abandons", two, 0, before)

		// The late acquire of either token: refused, nothing written,
		// no token drawn.
		for _, tk := range tok[:2] {
			if g := must(fencingcore.Acquire.Run(ctx, e, keys, tk, int64(60_000)))(t); g.Acquired || g.RetryIn <= 0 || g.RetryIn > 20*time.Second {
				t.Fatalf("late acquire of %s = %+v, want refused with the tombstone's TTL", tk, g)
			}
		}
		want("after the late acquires", two, 0, before)
		if c := must(counterOf(ctx, admin, b, fenceKey(name)).Int64())(t); c != 1 {
			t.Fatalf("counter = %d, want 1", c)
		}
		// The reads see no holder; refresh, verify and release match nothing.
		if h := must(fencingcore.Read.Run(ctx, e, hk))(t); h.Held {
			t.Fatalf("Read of a tombstone list = %+v, want free", h)
		}
		if _, err := m.Holder(ctx); !errors.Is(err, coordination.ErrNotHeld) {
			t.Fatalf("Holder over a tombstone list = %v, want ErrNotHeld", err)
		}
		for _, tk := range tok[:3] {
			if ok := must(fencingcore.Refresh.Run(ctx, e, hk, tk, int64(60_000)))(t); ok {
				t.Fatalf("Refresh of %s matched a tombstone list", tk)
			}
			if out := must(fencingcore.Release.Run(ctx, e, hk, tk))(t); out == decode.Released {
				t.Fatalf("Release of %s matched a tombstone list", tk)
			}
		}
		want("after the reads", two, 0, before)
		// A third token takes it over, with the next fencing token.
		if g := must(fencingcore.Acquire.Run(ctx, e, keys, tok[2], int64(60_000)))(t); !g.Acquired || g.Value != "2" {
			t.Fatalf("acquire over a tombstone list = %+v, want token 2", g)
		}
		if h := must(admin.HGetAll(ctx, key).Result())(t); len(h) != 2 || h["owner"] != tok[2] || h["fence"] != "2" {
			t.Fatalf("key = %v, want the new holder", h)
		}
		// Its own abandon: released, its tombstone alone.
		abandon(tok[2], 10_000, decode.Released)
		want("the holder abandoned", tok[2]+"!", 0, 10*time.Second)

		// Nine abandons: the first is dropped; a shorter life keeps the
		// longer TTL.
		admin.Del(ctx, key)
		list := ""
		for i := range 9 {
			abandon(tok[i], 30_000-int64(i)*1000, decode.AlreadyReleased)
			list += tok[i] + "!"
		}
		list = strings.TrimPrefix(list, tok[0]+"!")
		want("nine abandons", list, 22*time.Second, 30*time.Second)
		for _, tk := range tok[1:9] {
			if g := must(fencingcore.Acquire.Run(ctx, e, keys, tk, int64(60_000)))(t); g.Acquired {
				t.Fatalf("late acquire of %s over a full list = %+v, want refused", tk, g)
			}
		}
		want("after the late acquires", list, 0, 30*time.Second)

		// Malformed lists: ErrBadState, nothing written.
		for _, bad := range []string{
			tok[0] + "!garbage!",
			tok[0] + "!!",
			"!" + tok[0] + "!",
			strings.Repeat(tok[0]+"!", 9),
			strings.ToUpper(tok[1]) + "!",
		} {
			admin.Del(ctx, key)
			if err := admin.HSet(ctx, key, "owner", bad).Err(); err != nil {
				t.Fatal(err)
			}
			admin.PExpire(ctx, key, time.Minute)
			if _, err := fencingcore.Acquire.Run(ctx, e, keys, tok[9], int64(60_000)); !errors.Is(err, coordination.ErrBadState) {
				t.Fatalf("acquire over %q = %v, want ErrBadState", bad, err)
			}
			if _, err := fencingcore.Abandon.Run(ctx, e, hk, tok[9], int64(10_000)); !errors.Is(err, coordination.ErrBadState) {
				t.Fatalf("abandon over %q = %v, want ErrBadState", bad, err)
			}
			want("over "+bad, bad, 50*time.Second, time.Minute)
		}
		if c := must(counterOf(ctx, admin, b, fenceKey(name)).Int64())(t); c != 2 {
			t.Fatalf("counter = %d, want 2", c)
		}
		// A list beside other fields is no tombstone either.
		admin.Del(ctx, key)
		admin.HSet(ctx, key, "owner", two, "x", "1")
		admin.PExpire(ctx, key, time.Minute)
		if _, err := fencingcore.Abandon.Run(ctx, e, hk, tok[9], int64(10_000)); !errors.Is(err, coordination.ErrBadState) {
			t.Fatalf("abandon over a damaged tombstone = %v, want ErrBadState", err)
		}
		if h := must(admin.HGetAll(ctx, key).Result())(t); len(h) != 2 || h["owner"] != two {
			t.Fatalf("key = %v after the refused abandon", h)
		}
	})
}
