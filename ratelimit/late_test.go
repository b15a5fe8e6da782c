package ratelimit

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/faultproxy"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// concMembers returns the members of a concurrency key whose score is
// after now (server time), settings member excluded.
func concMembers(t *testing.T, b *testharness.Backend, key string) []string {
	t.Helper()
	ctx := context.Background()
	admin := b.Admin(t)
	tm, err := admin.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	zs, err := admin.ZRangeByScoreWithScores(ctx, key, &redis.ZRangeBy{Min: "(" + strconv.FormatInt(tm.UnixMilli(), 10), Max: "+inf"}).Result()
	if err != nil {
		t.Fatalf("ZRANGEBYSCORE %s: %v", key, err)
	}
	var out []string
	for _, z := range zs {
		out = append(out, z.Member.(string))
	}
	return out
}

// A concurrency lease acquisition whose request is held in the network
// until after its client gave up (ambiguous) and its background cleanup
// finished takes nothing when the request finally reaches the server: the
// cleanup left a tombstone of the member (0 permits, expiring by itself)
// that ratelimit_conc_acquire refuses to that member alone; another
// caller takes the only permit at once. (Before the fix the late request
// took the permit for a whole lease duration, held by nobody.)
func TestLateConcurrencyAcquireAfterCleanupTakesNothing(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		key := b.Key("late-conc")
		late := b.Late(t, key)
		l, err := NewConcurrency(late.Coord, "late-conc", 1, WithLeaseDuration(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		// Warm: the scripts cached on the server (one EVALSHA per send).
		warm, err := l.TryAcquire(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := warm.Release(ctx); err != nil {
			t.Fatal(err)
		}

		late.Hold(t, faultproxy.ScriptSHA(concAcquireScript.Hash()), func() error {
			_, err := l.TryAcquire(ctx, 1)
			return err
		})
		late.WaitCleanups(t)
		late.LetThrough(t)

		// The late request took nothing: the key holds the tombstone only.
		live := concMembers(t, b, key)
		if len(live) != 1 || !strings.HasPrefix(live[0], "0:1:") || !strings.HasSuffix(live[0], "!") {
			t.Fatalf("after the late request the key holds %q; want the cleanup's tombstone alone (the late request took the permit)", live)
		}
		if pttl, err := b.Admin(t).PTTL(ctx, key).Result(); err != nil || pttl <= 0 || pttl > engine.AbandonFor(time.Minute) {
			t.Fatalf("key PTTL = %v, %v", pttl, err)
		}
		// Another caller takes the only permit at once.
		other, err := NewConcurrency(b.Coordinator(t), "late-conc", 1, WithLeaseDuration(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = other.Close() })
		cl, err := other.TryAcquire(ctx, 1)
		if err != nil {
			t.Fatalf("another caller's TryAcquire = %v; want the permit", err)
		}
		if out, err := cl.Release(ctx); err != nil || out != coordination.Released {
			t.Fatalf("Release = %v, %v", out, err)
		}
	})
}

// The abandon script and the acquire script's tombstone handling, run
// directly: the abandoned member's acquisition is refused (nothing
// written), every other member ignores the tombstone (0 permits), a key
// holding only a tombstone reads as empty, and a foreign member still
// makes the key bad state.
func TestConcurrencyTombstoneScripts(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord := b.Coordinator(t)
		e, err := engine.Of(coord)
		if err != nil {
			t.Fatal(err)
		}
		admin := b.Admin(t)
		keys := e.Key("conc-stone")
		key := b.Key("conc-stone")
		mine, theirs := "2:"+mustToken(t), "2:"+mustToken(t)
		acq := func(member string) decode.Grant {
			t.Helper()
			g, err := concAcquireScript.Run(ctx, e, keys, member, int64(60_000), int64(2), int64(2), "1")
			if err != nil {
				t.Fatalf("acquire %s: %v", member, err)
			}
			return g
		}

		// Abandoning on an absent key: the tombstone alone, with a TTL.
		if out, err := concAbandonScript.Run(ctx, e, keys, mine, int64(10_000)); err != nil || out != decode.AlreadyReleased {
			t.Fatalf("abandon on an absent key = %v, %v", out, err)
		}
		if live := concMembers(t, b, key); len(live) != 1 || live[0] != "0:"+mine+"!" {
			t.Fatalf("key holds %q, want the tombstone", live)
		}
		if pttl := admin.PTTL(ctx, key).Val(); pttl <= 0 || pttl > 10*time.Second {
			t.Fatalf("PTTL = %v", pttl)
		}
		// The late request of mine: refused, nothing written.
		if g := acq(mine); g.Acquired {
			t.Fatalf("late acquire = %+v, want refused", g)
		}
		if n := admin.ZCard(ctx, key).Val(); n != 1 {
			t.Fatalf("ZCARD = %d after the refused late request, want 1 (the tombstone)", n)
		}
		// Another member: the key reads as empty, both permits free.
		if g := acq(theirs); !g.Acquired || concAvailable(g) != 0 {
			t.Fatalf("acquire over a tombstone = %+v (available %d), want acquired, 0 left", g, concAvailable(g))
		}
		// Abandoning a held member: released, tombstone in its place, and
		// the permits free for others.
		if out, err := concAbandonScript.Run(ctx, e, keys, theirs, int64(10_000)); err != nil || out != decode.Released {
			t.Fatalf("abandon of a held member = %v, %v", out, err)
		}
		if ok, err := concVerifyScript.Run(ctx, e, keys, theirs); err != nil || ok {
			t.Fatalf("verify after abandon = %v, %v", ok, err)
		}
		if ok, err := concRenewScript.Run(ctx, e, keys, theirs, int64(60_000)); err != nil || ok {
			t.Fatalf("renew after abandon = %v, %v", ok, err)
		}
		if g := acq(theirs); g.Acquired {
			t.Fatalf("late acquire of the abandoned member = %+v, want refused", g)
		}
		third := "2:" + mustToken(t)
		if g := acq(third); !g.Acquired || concAvailable(g) != 0 {
			t.Fatalf("acquire beside two tombstones = %+v (available %d)", g, concAvailable(g))
		}
		// A re-sent cleanup changes nothing but the tombstone's expiry.
		if out, err := concAbandonScript.Run(ctx, e, keys, theirs, int64(10_000)); err != nil || out != decode.AlreadyReleased {
			t.Fatalf("abandon re-sent = %v, %v", out, err)
		}
		if out, err := concReleaseScript.Run(ctx, e, keys, third); err != nil || out != decode.Released {
			t.Fatalf("release = %v, %v", out, err)
		}
		// A foreign member without the settings member is still bad state.
		admin.Del(ctx, key)
		admin.ZAdd(ctx, key, redis.Z{Score: 1e15, Member: "0:" + mine + "!"}, redis.Z{Score: 1e15, Member: "x"})
		admin.PExpire(ctx, key, time.Minute)
		if _, err := concAcquireScript.Run(ctx, e, keys, third, int64(60_000), int64(2), int64(2), "1"); !errors.Is(err, coordination.ErrBadState) {
			t.Fatalf("acquire on a foreign set = %v, want ErrBadState", err)
		}
		// Bad TTL: nothing written.
		admin.Del(ctx, key)
		if _, err := concAbandonScript.Run(ctx, e, keys, mine, int64(0)); err == nil {
			t.Fatal("abandon with TTL 0 succeeded")
		}
		if n := admin.Exists(ctx, key).Val(); n != 0 {
			t.Fatal("abandon with a bad TTL wrote the key")
		}
	})
}

func mustToken(t *testing.T) string {
	t.Helper()
	tok, err := newToken()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// holdsNoLease reports whether a concurrency key holds no lease: absent,
// or only its settings member and tombstones (what the cleanup of an
// ambiguous acquisition leaves).
func holdsNoLease(ctx context.Context, raw redis.UniversalClient, key string) (bool, error) {
	ms, err := raw.ZRange(ctx, key, 0, -1).Result()
	if err != nil {
		return false, err
	}
	for _, m := range ms {
		if m != "#" && !(strings.HasPrefix(m, "0:") && strings.HasSuffix(m, "!")) {
			return false, nil
		}
	}
	return true, nil
}

// waitNoLease waits up to 5 s until key holds no lease (holdsNoLease).
func waitNoLease(t *testing.T, raw redis.UniversalClient, key, what string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		ok, err := holdsNoLease(context.Background(), raw, key)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the key still holds a lease after 5 s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
