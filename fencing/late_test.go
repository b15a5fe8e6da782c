package fencing_test

import (
	"context"
	"errors"
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
		p, client := b.Proxied(t, key, testharness.LateClient)
		coord := must(coordination.New(client, coordination.WithKeyPrefix(b.Prefix())))(t)
		t.Cleanup(func() { _ = coord.Shutdown(context.Background()) })
		e := must(engine.Of(coord))(t)
		admin := b.Admin(t)

		m := must(fencing.New(coord, leaseKey(name), fenceKey(name)))(t)
		// A first holder, so that the script is loaded (the held request
		// is the acquisition itself) and the counter stands at 1.
		first := must(m.TryAcquire(ctx, time.Minute))(t)
		if first.FencingToken() != 1 {
			t.Fatalf("first token = %d, want 1", first.FencingToken())
		}
		must(first.Release(ctx))(t)

		held := p.Apply(faultproxy.HoldCommand(faultproxy.All(faultproxy.Named("EVALSHA"), faultproxy.Arg(key)), 1))
		_, err := m.TryAcquire(ctx, time.Minute)
		if err == nil || !coordination.IsAmbiguous(err) {
			t.Fatalf("TryAcquire = %v, want an ambiguous error", err)
		}
		testharness.WaitCleanups(t, e)
		if h := must(admin.HGetAll(ctx, key).Result())(t); h["fence"] != "" {
			t.Fatalf("after the cleanup the lease key holds %v; want no holder", h)
		}
		before := must(admin.PTTL(ctx, key).Result())(t)
		time.Sleep(20 * time.Millisecond) // a restarted TTL would show
		testharness.LetThrough(t, held)

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
		other := must(fencing.New(b.Coordinator(t), leaseKey(name), fenceKey(name)))(t)
		l, err := other.TryAcquire(ctx, time.Minute)
		if err != nil {
			t.Fatalf("another client's TryAcquire = %v; want the lock", err)
		}
		if l.FencingToken() != 2 {
			t.Fatalf("the next holder's token = %d, want 2", l.FencingToken())
		}
		if h := must(admin.HGetAll(ctx, key).Result())(t); h["owner"] != l.Token() || h["fence"] != "2" || len(h) != 2 {
			t.Fatalf("the lease key holds %v, want the new holder's {owner, fence: 2}", h)
		}
		if hd := must(other.Holder(ctx))(t); hd.Token != l.Token() || hd.FencingToken != 2 {
			t.Fatalf("Holder = %+v", hd)
		}
		if out := must(l.Release(ctx))(t); out != coordination.Released {
			t.Fatalf("Release = %v", out)
		}
	})
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
