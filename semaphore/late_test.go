package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/faultproxy"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/semaphore"
)

// must returns v, or fails the test with err.
func must[T any](v T, err error) func(t testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// tombScale is 2^43: a tombstone of expiry e (ms) is scored -e/2^43.
const tombScale = 8796093022208

// tombstoneUntil returns the expiry (server ms) of member's tombstone in
// the sorted set key, failing the test unless member is a tombstone.
func tombstoneUntil(t *testing.T, c redis.UniversalClient, key, member string) int64 {
	t.Helper()
	s, err := c.ZScore(context.Background(), key, member).Result()
	if err != nil {
		t.Fatalf("ZSCORE %s %s: %v (want the cleanup's tombstone)", key, member, err)
	}
	if s <= -1 || s >= 0 {
		t.Fatalf("%s is scored %v: a permit, not a tombstone (the late request took the permits)", member, s)
	}
	return int64(math.Round(-s * tombScale))
}

// An acquisition whose request is held in the network until after its
// client gave up (ambiguous) and its background cleanup finished takes
// nothing when the request finally reaches the server: the cleanup left a
// tombstone of its member that the late semaphore_acquire cannot pass, and
// another client takes the whole capacity at once (the tombstone costs no
// capacity). The tombstone expires by itself, within engine.AbandonFor of
// the TTL, also for a permit without expiry (TTL 0, through the engine: the
// Semaphore refuses it), whose late request before the fix took its
// permits for good. The same on a first-in first-out semaphore
// (semaphore_fifo_abandon).
func TestLateAcquireAfterCleanupTakesNothing(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		for _, tc := range []struct {
			name string
			ttl  time.Duration
			fifo bool
		}{{"ttl", time.Minute, false}, {"no-expiry", 0, false}, {"fifo", time.Minute, true}} {
			t.Run(tc.name, func(t *testing.T) {
				ctx := context.Background()
				name := "late-" + tc.name
				full := b.Key(name)
				late := b.Late(t, full)
				e := late.Engine
				admin := b.Admin(t)
				sem := must(semaphore.New(late.Coord, name, 3, semaphore.WithFIFO(tc.fifo)))(t)
				// Warm: the script cached on the key's server, so that the
				// held request is the acquisition itself.
				warm := must(sem.TryAcquire(ctx, time.Minute))(t)
				must(warm.Release(ctx))(t)

				sha := semaphore.AcquireScript.Hash()
				if tc.fifo {
					sha = semaphore.FIFOAcquire.Hash()
				}
				token := must(engine.NewToken())(t)
				member := "P:2:" + token
				start := time.Now()
				late.Hold(t, faultproxy.ScriptSHA(sha), func() error {
					if tc.ttl > 0 {
						_, err := sem.TryAcquireN(ctx, 2, tc.ttl)
						return err
					}
					_, _, err := e.Acquire(ctx, &engine.AcquireRequest{
						Kind: semaphore.NoExpiryKind, Keys: e.Key(name), ID: []any{member}, TTL: 0, Extra: []any{int64(3)},
					})
					return err
				})
				late.WaitCleanups(t)
				late.LetThrough(t)

				// The late request took nothing (read through another
				// client: the proxied one times out after 200 ms).
				other := must(semaphore.New(b.Coordinator(t), name, 3, semaphore.WithFIFO(tc.fifo)))(t)
				st := must(other.State(ctx))(t)
				if st.Used != 0 || st.Holders != 0 || st.NoExpiry != 0 {
					t.Fatalf("State after the late request = %+v; want no permit held (the late request took the permits)", st)
				}
				if tc.ttl == 0 {
					// The member is the one sent: its tombstone is there,
					// expiring within a minute.
					until := tombstoneUntil(t, admin, full, member)
					now := must(admin.Time(ctx).Result())(t).UnixMilli()
					if left := time.Duration(until-now) * time.Millisecond; left <= 0 || left > engine.AbandonFor(0) {
						t.Fatalf("tombstone expires in %v, want within %v", left, engine.AbandonFor(0))
					}
				}
				// The key expires, not before the tombstone does, and
				// within its life from the acquisition.
				pttl := must(admin.PTTL(ctx, full).Result())(t)
				if pttl <= 0 || pttl > engine.AbandonFor(tc.ttl)+time.Since(start) {
					t.Fatalf("key PTTL = %v, want within %v (the tombstone's life)", pttl, engine.AbandonFor(tc.ttl))
				}
				// Another client takes the whole capacity at once.
				q, err := other.TryAcquireN(ctx, 3, time.Minute)
				if err != nil {
					t.Fatalf("another client's TryAcquireN(3) = %v; want the whole capacity", err)
				}
				if hs := must(other.Holders(ctx))(t); len(hs) != 1 || hs[0].Token != q.Token() {
					t.Fatalf("Holders = %+v, want the new holder alone", hs)
				}
				if out := must(q.Release(ctx))(t); out != coordination.Released {
					t.Fatalf("Release = %v", out)
				}
			})
		}
	})
}

// The tombstone of the scripts: semaphore_abandon gives back a live
// permit (with or without expiry) and leaves its member scored in (-1, 0);
// the late semaphore_acquire of that member is refused while it is in
// force, and granted once it expired; verify, refresh and release of the
// member treat it as gone and leave it; State, Holders and Adopt leave it
// out; it costs no capacity; a release leaves the key alive until the
// tombstone expires; the cleanup's re-send changes nothing.
func TestTombstoneScripts(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord := b.Coordinator(t)
		e := must(engine.Of(coord))(t)
		admin := b.Admin(t)
		keys := e.Key("stone")
		full := b.Key("stone")
		sem := must(semaphore.New(coord, "stone", 2))(t)
		abandon := func(member string, life time.Duration) decode.Outcome {
			t.Helper()
			return must(semaphore.AbandonScript.Run(ctx, e, keys, member, life.Milliseconds()))(t)
		}
		acquire := func(member string, ttl int64) decode.Grant {
			t.Helper()
			return must(semaphore.AcquireScript.Run(ctx, e, keys, member, ttl, int64(2), "0"))(t)
		}

		for _, ttl := range []int64{60_000, 0} {
			t.Run(fmt.Sprintf("ttl=%d", ttl), func(t *testing.T) {
				admin.Del(ctx, full)
				mine := "P:2:" + must(engine.NewToken())(t)
				if g := acquire(mine, ttl); !g.Acquired {
					t.Fatalf("acquire = %+v", g)
				}
				// Abandoned while held: given back, tombstone written.
				if out := abandon(mine, 10*time.Second); out != decode.Released {
					t.Fatalf("abandon of the holder = %v", out)
				}
				tombstoneUntil(t, admin, full, mine)
				if pttl := must(admin.PTTL(ctx, full).Result())(t); pttl <= 0 || pttl > 10*time.Second {
					t.Fatalf("key PTTL = %v, want the tombstone's 10 s (a permit without expiry abandoned gives the key a TTL)", pttl)
				}
				// A re-sent cleanup: nothing changes.
				before := snapshotOf(t, admin, full)
				if out := abandon(mine, 10*time.Second); out != decode.AlreadyReleased {
					t.Fatalf("abandon re-sent = %v", out)
				}
				if after := snapshotOf(t, admin, full); after != before {
					t.Fatalf("abandon re-sent changed the key: %s -> %s", before, after)
				}
				// The late request of mine is refused, nothing written.
				if g := acquire(mine, ttl); g.Acquired || g.RetryIn <= 0 || g.RetryIn > 10*time.Second {
					t.Fatalf("late acquire = %+v, want refused until the tombstone expires", g)
				}
				tombstoneUntil(t, admin, full, mine)
				// Verify, refresh and release of mine: gone; the tombstone stays.
				if ok := must(semaphore.VerifyScript.Run(ctx, e, keys, mine))(t); ok {
					t.Fatal("verify matched a tombstone")
				}
				if ok := must(semaphore.RefreshScript.Run(ctx, e, keys, mine, int64(60_000)))(t); ok {
					t.Fatal("refresh matched a tombstone")
				}
				if out := must(semaphore.ReleaseScript.Run(ctx, e, keys, mine))(t); out != decode.AlreadyReleased {
					t.Fatalf("release of a tombstone = %v", out)
				}
				tombstoneUntil(t, admin, full, mine)
				// Absent to State, Holders and Adopt; no capacity taken.
				if st := must(sem.State(ctx))(t); st.Used != 0 || st.Holders != 0 || st.NoExpiry != 0 || st.Capacity != 2 {
					t.Fatalf("State = %+v, want nothing held", st)
				}
				if hs := must(sem.Holders(ctx))(t); len(hs) != 0 {
					t.Fatalf("Holders = %+v, want none", hs)
				}
				if _, err := sem.Adopt(ctx, mine[len("P:2:"):]); !errors.Is(err, coordination.ErrNotHeld) {
					t.Fatalf("Adopt of the abandoned token = %v, want ErrNotHeld", err)
				}
				a := mustAcquireN(t, sem, 1, time.Second)
				c := mustAcquireN(t, sem, 1, time.Second)
				// The last permit's release leaves the key to the tombstone.
				release(t, a)
				release(t, c)
				if pttl := must(admin.PTTL(ctx, full).Result())(t); pttl <= 5*time.Second || pttl > 10*time.Second {
					t.Fatalf("key PTTL after the releases = %v, want the tombstone's (about 10 s)", pttl)
				}
				tombstoneUntil(t, admin, full, mine)
			})
		}

		t.Run("absent key", func(t *testing.T) {
			admin.Del(ctx, full)
			mine := "P:1:" + must(engine.NewToken())(t)
			if out := abandon(mine, 10*time.Second); out != decode.AlreadyReleased {
				t.Fatalf("abandon of an absent key = %v", out)
			}
			tombstoneUntil(t, admin, full, mine)
			if pttl := must(admin.PTTL(ctx, full).Result())(t); pttl <= 0 || pttl > 10*time.Second {
				t.Fatalf("key PTTL = %v, want the tombstone's 10 s", pttl)
			}
			if g := acquire(mine, 60_000); g.Acquired {
				t.Fatalf("late acquire = %+v, want refused", g)
			}
			// Another caller takes the whole capacity (and records its own).
			q := mustAcquireN(t, sem, 2, time.Minute)
			if st := must(sem.State(ctx))(t); st.Used != 2 || st.Capacity != 2 {
				t.Fatalf("State = %+v", st)
			}
			release(t, q)
		})

		t.Run("expires", func(t *testing.T) {
			admin.Del(ctx, full)
			holder := mustAcquireN(t, sem, 1, time.Minute)
			mine := "P:1:" + must(engine.NewToken())(t)
			if out := abandon(mine, 30*time.Millisecond); out != decode.AlreadyReleased {
				t.Fatalf("abandon = %v", out)
			}
			b.Advance(60 * time.Millisecond)
			// Expired: the request of mine is an acquisition like any
			// other, and the expired tombstone is pruned.
			if g := acquire(mine, 60_000); !g.Acquired {
				t.Fatalf("acquire after the tombstone expired = %+v", g)
			}
			if ok := must(semaphore.VerifyScript.Run(ctx, e, keys, mine))(t); !ok {
				t.Fatal("the permit taken after the tombstone expired is not live")
			}
			other := "P:1:" + must(engine.NewToken())(t)
			abandon(other, 30*time.Millisecond)
			b.Advance(60 * time.Millisecond)
			must(semaphore.ReleaseScript.Run(ctx, e, keys, mine))(t)
			q := mustAcquireN(t, sem, 1, time.Minute)
			if _, err := admin.ZScore(ctx, full, other).Result(); !errors.Is(err, redis.Nil) {
				t.Fatalf("the expired tombstone is still there (%v): an acquisition prunes it", err)
			}
			release(t, q)
			release(t, holder)
		})
	})
}

// snapshotOf is the sorted set key's members with scores and its expiry.
func snapshotOf(t *testing.T, c redis.UniversalClient, key string) string {
	t.Helper()
	zs := must(c.ZRangeWithScores(context.Background(), key, 0, -1).Result())(t)
	at := must(c.PExpireTime(context.Background(), key).Result())(t)
	return fmt.Sprintf("%v expires=%v", zs, at)
}

// A tombstone keeps the key of a semaphore alive until it expires when
// the release of the latest permit moves the key's TTL to an earlier
// permit's; once expired it no longer does, and the next acquisition
// prunes it.
func TestTombstoneKeepsTheKey(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord := b.Coordinator(t)
		e := must(engine.Of(coord))(t)
		admin := b.Admin(t)
		keys := e.Key("kept")
		full := b.Key("kept")
		sem := must(semaphore.New(coord, "kept", 3))(t)
		mustAcquireN(t, sem, 1, time.Second) // expires before the tombstone
		late := mustAcquireN(t, sem, 1, time.Hour)
		mine := "P:1:" + must(engine.NewToken())(t)
		must(semaphore.AbandonScript.Run(ctx, e, keys, mine, int64(3_000)))(t)
		// The latest permit's release: the key lives until the tombstone
		// expires (3 s), not the earlier permit (1 s).
		release(t, late)
		if pttl := must(admin.PTTL(ctx, full).Result())(t); pttl <= 2*time.Second || pttl > 3*time.Second {
			t.Fatalf("key PTTL = %v, want the tombstone's 3 s", pttl)
		}
		tombstoneUntil(t, admin, full, mine)
		// Once the tombstone expired, the key's TTL follows the permits
		// again.
		b.Advance(3100 * time.Millisecond)
		other := mustAcquireN(t, sem, 1, time.Hour)
		if _, err := admin.ZScore(ctx, full, mine).Result(); !errors.Is(err, redis.Nil) {
			t.Fatalf("the expired tombstone was not pruned: %v", err)
		}
		last := mustAcquireN(t, sem, 1, 2*time.Hour)
		release(t, last)
		if at, want := must(admin.PExpireTime(ctx, full).Result())(t), must(admin.ZScore(ctx, full, memberOf(other)).Result())(t); at.Milliseconds() != int64(want) {
			t.Fatalf("key expires at %v, want the remaining permit's %v", at.Milliseconds(), int64(want))
		}
		release(t, other)
	})
}

// A tombstone expires at most two minutes from now (the abandon scripts
// write one at most a minute ahead, what engine.AbandonFor gives). So the
// release of the key's latest permit, whose key then expires with the
// next permit, reads the latest tombstone only when that permit expires
// within two minutes: a tombstone beside a later permit is still in force
// (the late request is refused) while the key follows the permit; a
// tombstone expiring later than two minutes from now is outside the
// layout (ErrBadState, nothing written) wherever a script reads it, and
// left unread beside a permit expiring later. The abandon scripts refuse
// a TTL over a minute.
func TestTombstoneBound(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord := b.Coordinator(t)
		e := must(engine.Of(coord))(t)
		admin := b.Admin(t)
		keys := e.Key("bound")
		full := b.Key("bound")
		sem := must(semaphore.New(coord, "bound", 3))(t)
		abandon := func(member string, life int64) (decode.Outcome, error) {
			return semaphore.AbandonScript.Run(ctx, e, keys, member, life)
		}
		// stone writes member's tombstone by hand, expiring in ms from
		// the server's time.
		stone := func(member string, in int64) {
			t.Helper()
			now := must(admin.Time(ctx).Result())(t).UnixMilli()
			must(admin.ZAdd(ctx, full, redis.Z{Score: -float64(now+in) / tombScale, Member: member}).Result())(t)
		}

		t.Run("abandon TTL", func(t *testing.T) {
			admin.Del(ctx, full)
			mine := "P:1:" + must(engine.NewToken())(t)
			if _, err := abandon(mine, 60_001); !errors.Is(err, coordination.ErrInvalidArgument) {
				t.Fatalf("abandon for 60001 ms: %v, want ErrInvalidArgument", err)
			}
			fifo := must(semaphore.New(coord, "bound", 3, semaphore.WithFIFO(true)))(t)
			if _, err := semaphore.FIFOAbandon.Run(ctx, e, semaphore.FIFOKeys(fifo), mine, int64(60_001)); !errors.Is(err, coordination.ErrInvalidArgument) {
				t.Fatalf("FIFO abandon for 60001 ms: %v, want ErrInvalidArgument", err)
			}
			if n := must(admin.Exists(ctx, full).Result())(t); n != 0 {
				t.Fatal("a refused abandon wrote the key")
			}
			if out, err := abandon(mine, 60_000); err != nil || out != decode.AlreadyReleased {
				t.Fatalf("abandon for 60000 ms = %v, %v", out, err)
			}
			if left := tombstoneUntil(t, admin, full, mine) - must(admin.Time(ctx).Result())(t).UnixMilli(); left <= 50_000 || left > 60_000 {
				t.Fatalf("tombstone expires in %d ms, want a minute", left)
			}
		})

		t.Run("next permit beyond the bound", func(t *testing.T) {
			admin.Del(ctx, full)
			next := mustAcquireN(t, sem, 1, 3*time.Minute)
			latest := mustAcquireN(t, sem, 1, time.Hour)
			mine := "P:1:" + must(engine.NewToken())(t)
			if out, err := abandon(mine, 60_000); err != nil || out != decode.AlreadyReleased {
				t.Fatalf("abandon = %v, %v", out, err)
			}
			release(t, latest)
			if at, want := must(admin.PExpireTime(ctx, full).Result())(t).Milliseconds(), int64(must(admin.ZScore(ctx, full, memberOf(next)).Result())(t)); at != want {
				t.Fatalf("key expires at %d, want the next permit's %d", at, want)
			}
			// The tombstone is still in force: the late request is refused.
			tombstoneUntil(t, admin, full, mine)
			if g := must(semaphore.AcquireScript.Run(ctx, e, keys, mine, int64(60_000), int64(3), "0"))(t); g.Acquired || g.RetryIn <= 0 || g.RetryIn > time.Minute {
				t.Fatalf("late acquire = %+v, want refused until the tombstone expires", g)
			}
			release(t, next)
			// The last permit gone, the key lives until the tombstone expires.
			if pttl := must(admin.PTTL(ctx, full).Result())(t); pttl <= 50*time.Second || pttl > time.Minute {
				t.Fatalf("key PTTL after the last release = %v, want the tombstone's (about a minute)", pttl)
			}
		})

		t.Run("over the bound", func(t *testing.T) {
			// Read: the release reads the tombstone (the next permit
			// expires within two minutes): outside, nothing written.
			admin.Del(ctx, full)
			mustAcquireN(t, sem, 1, time.Minute)
			latest := mustAcquireN(t, sem, 1, time.Hour)
			far := "P:1:" + must(engine.NewToken())(t)
			stone(far, 10*60_000)
			before := snapshotOf(t, admin, full)
			if _, err := latest.Release(ctx); !errors.Is(err, coordination.ErrBadState) {
				t.Fatalf("release next to a tombstone of 10 min: %v, want ErrBadState", err)
			}
			if after := snapshotOf(t, admin, full); after != before {
				t.Fatalf("the refused release wrote the key: %s -> %s", before, after)
			}
			// The tombstone's own member: outside (fragment semaphore_state).
			if _, err := semaphore.AcquireScript.Run(ctx, e, keys, far, int64(60_000), int64(3), "0"); !errors.Is(err, coordination.ErrBadState) {
				t.Fatalf("acquire of the tombstone's member: %v, want ErrBadState", err)
			}
			// At the bound: in force, the key lives until it expires.
			admin.Del(ctx, full)
			mustAcquireN(t, sem, 1, time.Minute)
			latest = mustAcquireN(t, sem, 1, time.Hour)
			near := "P:1:" + must(engine.NewToken())(t)
			stone(near, 110_000)
			release(t, latest)
			if pttl := must(admin.PTTL(ctx, full).Result())(t); pttl <= 100*time.Second || pttl > 110*time.Second {
				t.Fatalf("key PTTL = %v, want the tombstone's (about 110 s)", pttl)
			}
			// Unread: beside a next permit expiring later than two minutes,
			// the release does not read the tombstones, and the key follows
			// the permit.
			admin.Del(ctx, full)
			next := mustAcquireN(t, sem, 1, 3*time.Minute)
			latest = mustAcquireN(t, sem, 1, time.Hour)
			stone(far, 10*60_000)
			release(t, latest)
			if at, want := must(admin.PExpireTime(ctx, full).Result())(t).Milliseconds(), int64(must(admin.ZScore(ctx, full, memberOf(next)).Result())(t)); at != want {
				t.Fatalf("key expires at %d, want the next permit's %d", at, want)
			}
		})
	})
}
