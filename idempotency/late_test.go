package idempotency_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordination/idempotency"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/faultproxy"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// A Begin whose request is held in the network until after its client
// gave up (ambiguous) and its background cleanup finished creates no
// claim when the request finally reaches the server: the cleanup left an
// abandoned claim whose abandon id is the Begin's owner token (a
// tombstone, expiring by itself), which idempotency_begin refuses to that
// token alone; another caller's Begin starts at once, with a larger
// fencing token. (Before the fix the cleanup found no claim and wrote
// nothing, the late request created a pending claim owned by nobody, and
// every retry was told InProgress for the claim's whole TTL.)
func TestLateBeginAfterCleanupClaimsNothing(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		key := b.Key("late")
		late := b.Late(t, key)
		warmScripts(t, late.Coord)
		s, err := idempotency.New(late.Coord)
		if err != nil {
			t.Fatal(err)
		}

		late.Hold(t, faultproxy.ScriptSHA(idempotency.BeginScript.Hash()), func() error {
			_, err := s.Begin(ctx, "late", time.Hour)
			return err
		})
		late.WaitCleanups(t)
		late.LetThrough(t)

		// The late request created nothing: the key holds the cleanup's
		// abandoned claim, which expires by itself.
		raw := b.Raw(t)
		v, err := raw.Get(ctx, key).Result()
		if err != nil || !strings.HasPrefix(v, "A") {
			t.Fatalf("after the late request the key holds %q (%v); want the cleanup's abandoned claim (the late request created a claim)", v, err)
		}
		if pttl := raw.PTTL(ctx, key).Val(); pttl <= 0 || pttl > engine.AbandonFor(time.Hour) {
			t.Fatalf("abandoned claim PTTL = %v", pttl)
		}
		// Another caller's Begin starts at once.
		other := newFixture(t, b)
		c := other.begin(t, "late", time.Hour)
		wantState(t, c, idempotency.Started)
		if !other.complete(t, "late", c.Owner, []byte("done")) {
			t.Fatal("Complete = false")
		}
	})
}

// The cleanup form of idempotency_abandon (its third argument) and
// idempotency_begin's refusal, run directly: on a key without a claim the
// cleanup writes an abandoned claim with the Begin's token; the late Begin
// of that token answers InProgress and writes nothing; another token takes
// the key with a larger fence; over another call's abandoned claim the
// cleanup keeps the fence and records its own token. Store.Abandon (no
// third argument) still writes nothing on a key without a claim.
func TestBeginTombstoneScripts(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		f := newFixture(t, b)
		e, err := engine.Of(f.coord)
		if err != nil {
			t.Fatal(err)
		}
		k := e.Key("stone")
		key := b.Key("stone")
		mine := mustToken(t)
		get := func() string {
			t.Helper()
			v, err := f.raw.Get(ctx, key).Result()
			if errors.Is(err, redis.Nil) {
				return ""
			}
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		lateBegin := func(token string) {
			t.Helper()
			before := get()
			r, err := idempotency.BeginScript.Run(ctx, e, k, int64(60_000), ":"+token+":-:")
			if err != nil {
				t.Fatalf("late Begin: %v", err)
			}
			if r.State != idempotency.InProgress {
				t.Fatalf("late Begin = %+v, want InProgress", r)
			}
			if after := get(); after != before {
				t.Fatalf("late Begin changed the key: %q -> %q", before, after)
			}
		}

		// Store.Abandon on a key without a claim: nothing written.
		if f.abandon(t, "stone", mine) {
			t.Fatal("Abandon of no claim = true")
		}
		if v := get(); v != "" {
			t.Fatalf("Abandon of no claim wrote %q", v)
		}
		// The cleanup on a key without a claim: its tombstone.
		if ok, err := idempotency.AbandonScript.Run(ctx, e, k, mine, mine, int64(10_000)); err != nil || ok {
			t.Fatalf("cleanup on no claim = %v, %v", ok, err)
		}
		v := get()
		if !strings.HasPrefix(v, "A") || !strings.HasSuffix(v, ":"+mine) {
			t.Fatalf("key = %q, want an abandoned claim with the token", v)
		}
		if pttl := f.raw.PTTL(ctx, key).Val(); pttl <= 0 || pttl > 10*time.Second {
			t.Fatalf("PTTL = %v", pttl)
		}
		lateBegin(mine)
		fence, _ := strconv.ParseInt(v[1:strings.IndexByte(v, ':')], 10, 64)
		c := f.begin(t, "stone", time.Minute)
		wantState(t, c, idempotency.Started)
		if c.Fence <= fence {
			t.Fatalf("fence %d after the tombstone's %d", c.Fence, fence)
		}

		// Over another call's abandoned claim: the fence kept, the token
		// recorded.
		if !f.abandon(t, "stone", c.Owner) {
			t.Fatal("Abandon = false")
		}
		theirs := mustToken(t)
		if ok, err := idempotency.AbandonScript.Run(ctx, e, k, theirs, theirs, int64(10_000)); err != nil || ok {
			t.Fatalf("cleanup over an abandoned claim = %v, %v", ok, err)
		}
		want := "A" + strconv.FormatInt(c.Fence, 10) + ":" + theirs
		if v := get(); v != want {
			t.Fatalf("key = %q, want %q", v, want)
		}
		lateBegin(theirs)
		c2 := f.begin(t, "stone", time.Minute)
		wantState(t, c2, idempotency.Started)
		if c2.Fence <= c.Fence {
			t.Fatalf("fence %d after %d", c2.Fence, c.Fence)
		}
		// The cleanup of a claim its Begin created: abandoned with the
		// token, the late re-send refused.
		f.raw.Del(ctx, key)
		r, err := idempotency.BeginScript.Run(ctx, e, k, int64(60_000), ":"+mine+":-:")
		if err != nil || r.State != idempotency.Started {
			t.Fatalf("Begin = %+v, %v", r, err)
		}
		if ok, err := idempotency.AbandonScript.Run(ctx, e, k, mine, mine, int64(10_000)); err != nil || !ok {
			t.Fatalf("cleanup of the Begin's claim = %v, %v", ok, err)
		}
		lateBegin(mine)
		// A bad TTL: refused, nothing written.
		f.raw.Del(ctx, key)
		if _, err := idempotency.AbandonScript.Run(ctx, e, k, mine, mine, int64(0)); err == nil {
			t.Fatal("cleanup with TTL 0 succeeded")
		}
		if v := get(); v != "" {
			t.Fatalf("a refused cleanup wrote %q", v)
		}
	})
}

func mustToken(t *testing.T) string {
	t.Helper()
	tok, err := engine.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// A Begin whose context has already ended sends nothing, so it leaves
// nothing to clean up: no claim and no abandoned record (before, the
// context's error counted as an ambiguous attempt and the cleanup wrote
// an abandoned record on the fresh key for a minute).
func TestBeginWithEndedContextWritesNothing(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		coord := b.Coordinator(t)
		e, err := engine.Of(coord)
		if err != nil {
			t.Fatal(err)
		}
		s, err := idempotency.New(coord)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := s.Begin(ctx, "ended", time.Minute); !errors.Is(err, context.Canceled) {
			t.Fatalf("Begin with a cancelled context = %v; want context.Canceled", err)
		}
		testharness.WaitCleanups(t, e)
		if n := b.Client(t).Exists(context.Background(), b.Prefix()+"ended").Val(); n != 0 {
			t.Fatalf("the key exists after a Begin with a cancelled context (%d); want nothing written", n)
		}
	})
}
