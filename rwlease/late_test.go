package rwlease_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/faultproxy"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/rwlease"
)

// isTombstone reports whether score is an abandoned acquisition's
// tombstone: below 0, an integer and a half.
func isTombstone(score float64) bool { return score < 0 && score != math.Floor(score) }

// An acquisition whose request is held in the network until after its
// client gave up (ambiguous) and its background cleanup finished takes
// nothing when the request finally reaches the server: the cleanup left
// the member's tombstone, which the late rwlease_acquire refuses without
// writing; Holders and Adopt see no holder, and another client takes the
// write lease at once. For a phase-fair blocking Read behind a writer, the
// late attempt records no waiting reader either, so the writer's release
// hands nobody a read lease. (Before the fix the late read or write
// request took its lease for a whole TTL, held by nobody; the late
// blocking read left a waiting record that the writer's release turned
// into such a lease.)
func TestLateAcquireAfterCleanupTakesNothing(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		for _, c := range []struct {
			name   string
			prefix string
			v      verb
			writer bool // another client holds the write lease meanwhile
		}{
			{"read", "R:", verbTryRead, false},
			{"write", "W:", verbTryWrite, false},
			{"blocking-read", "R:", verbRead, true},
		} {
			t.Run(c.name, func(t *testing.T) {
				ctx := context.Background()
				name := "late-" + c.name
				key := b.Key(name)
				late := b.Late(t, key)
				admin := b.Admin(t)
				other := newRW(t, b.Coordinator(t), name)

				m := newRW(t, late.Coord, name)
				// The script loaded first, so that the held request is the
				// acquisition itself.
				warm := must(m.TryRead(ctx, time.Minute))(t)
				must(warm.Release(ctx))(t)
				var w *rwlease.Lease
				if c.writer {
					w = must(other.TryWrite(ctx, time.Minute))(t)
				}

				late.Hold(t, faultproxy.All(faultproxy.Named("EVALSHA"), faultproxy.Arg(key)), func() error {
					actx := ctx
					if c.writer {
						// The blocking Read tries again after the held attempt's
						// timeout (refused: it waits, recorded) until its
						// context ends; the held attempt keeps it ambiguous.
						var cancel context.CancelFunc
						actx, cancel = context.WithTimeout(ctx, 600*time.Millisecond)
						defer cancel()
					}
					_, err := c.v(m, actx, time.Minute)
					return err
				})
				late.WaitCleanups(t)
				late.LetThrough(t)

				// The late request took nothing and recorded nothing: its
				// member is the cleanup's tombstone.
				zs := must(admin.ZRangeWithScores(ctx, key, 0, -1).Result())(t)
				var token string
				for _, z := range zs {
					mem := z.Member.(string)
					if w != nil && mem == "W:"+w.Token() {
						continue
					}
					if token != "" || mem[:2] != c.prefix || !isTombstone(z.Score) {
						t.Fatalf("after the late request the key holds %v; want only the cleanup's tombstone %s<token> (the late request took a lease or left a record)", zs, c.prefix)
					}
					token = mem[2:]
					if exp := time.Duration(-z.Score-float64(time.Now().UnixMilli())) * time.Millisecond; exp <= 0 || exp > engine.AbandonFor(time.Minute)+time.Second {
						t.Fatalf("tombstone expires in %v", exp)
					}
				}
				if token == "" {
					t.Fatalf("after the late request the key holds %v; want the cleanup's tombstone", zs)
				}
				if w != nil {
					// The write phase ends: a waiting record would become a
					// read lease now.
					must(w.Release(ctx))(t)
				}
				if hs := must(m.Holders(ctx))(t); len(hs) != 0 {
					t.Fatalf("Holders = %+v, want none", hs)
				}
				if _, err := m.Adopt(ctx, token); !errors.Is(err, coordination.ErrNotHeld) {
					t.Fatalf("Adopt of the abandoned token = %v, want ErrNotHeld", err)
				}
				// Another client takes the write lease at once.
				l, err := other.TryWrite(ctx, time.Minute)
				if err != nil {
					t.Fatalf("another client's TryWrite = %v; want the lease", err)
				}
				if hs := must(other.Holders(ctx))(t); len(hs) != 1 || hs[0].Token != l.Token() || hs[0].Shared {
					t.Fatalf("Holders = %+v, want the new writer alone", hs)
				}
				if out := must(l.Release(ctx))(t); out != coordination.Released {
					t.Fatalf("Release = %v", out)
				}
			})
		}
	})
}

// The scripts on a tombstone: the cleanup of a live write lease leaves the
// writer's tombstone and hands the next phase to a waiting reader; a late
// read or write attempt of an abandoned member (a phase-fair blocking read
// with its waiting record included) is refused with nothing written;
// others ignore tombstones (a writer takes the lease, a writer-preferring
// reader is not held back by a writer's tombstone); a write release never
// turns a reader's tombstone into a lease; refresh and verify of the
// member fail; the re-sent cleanup rewrites its tombstone; the key's TTL
// covers a tombstone left alone.
func TestTombstoneScripts(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		e := must(engine.Of(b.Coordinator(t)))(t)
		admin := b.Admin(t)
		k, key := e.Key("stone"), b.Key("stone")
		tok := func() string { return must(engine.NewToken())(t) }
		writer, waiting, reader, late := "W:"+tok(), "R:"+tok(), "R:"+tok(), "R:"+tok()
		score := func(m string) (float64, bool) {
			s, err := admin.ZScore(ctx, key, m).Result()
			if errors.Is(err, redis.Nil) {
				return 0, false
			}
			if err != nil {
				t.Fatal(err)
			}
			return s, true
		}
		stone := func(m string) {
			t.Helper()
			if s, ok := score(m); !ok || !isTombstone(s) {
				t.Fatalf("%s scored %v (%v), want a tombstone", m, s, ok)
			}
		}

		// A writer holds; a phase-fair reader waits behind it.
		if g := must(rwlease.ScriptAcquire.Run(ctx, e, k, writer, int64(60_000), int64(0)))(t); !g.Acquired {
			t.Fatalf("write = %+v", g)
		}
		if g := must(rwlease.ScriptAcquire.Run(ctx, e, k, waiting, int64(60_000), int64(1), int64(30_000)))(t); g.Acquired {
			t.Fatalf("waiting read = %+v", g)
		}
		// The writer's acquisition is abandoned: released, the waiting
		// reader holds the next phase, the writer's member is a tombstone.
		if out := must(rwlease.ScriptAbandon.Run(ctx, e, k, writer, int64(10_000)))(t); out != decode.Released {
			t.Fatalf("Abandon of the writer = %v", out)
		}
		stone(writer)
		if s, _ := score(waiting); s <= float64(time.Now().UnixMilli()) {
			t.Fatalf("the waiting reader scored %v after the write phase, want its read lease", s)
		}
		// The writer's late request: refused, nothing written.
		if g := must(rwlease.ScriptAcquire.Run(ctx, e, k, writer, int64(60_000), int64(10_000)))(t); g.Acquired || g.RetryIn <= 0 || g.RetryIn > 10*time.Second {
			t.Fatalf("late write = %+v, want refused for the tombstone's life", g)
		}
		stone(writer)
		if _, ok := score("Q:" + writer[2:]); ok {
			t.Fatal("the late write left a waiting marker")
		}
		// A writer-preferring reader is not held back by a writer's
		// tombstone.
		if g := must(rwlease.ScriptAcquire.Run(ctx, e, k, reader, int64(60_000), int64(1)))(t); !g.Acquired {
			t.Fatalf("read beside a writer's tombstone = %+v", g)
		}
		for _, m := range []string{waiting, reader} {
			must(rwlease.ScriptRelease.Run(ctx, e, k, m))(t)
		}

		// Another writer holds; a phase-fair reader's acquisition is
		// abandoned, and its late blocking attempt records nothing.
		w2 := "W:" + tok()
		if g := must(rwlease.ScriptAcquire.Run(ctx, e, k, w2, int64(60_000), int64(0)))(t); !g.Acquired {
			t.Fatalf("write over a writer's tombstone = %+v", g)
		}
		if out := must(rwlease.ScriptAbandon.Run(ctx, e, k, late, int64(10_000)))(t); out != decode.AlreadyReleased {
			t.Fatalf("Abandon of a reader holding nothing = %v", out)
		}
		if g := must(rwlease.ScriptAcquire.Run(ctx, e, k, late, int64(60_000), int64(1), int64(30_000)))(t); g.Acquired || g.RetryIn > 10*time.Second {
			t.Fatalf("late blocking read = %+v, want refused", g)
		}
		stone(late)
		if ok := must(rwlease.ScriptRefresh.Run(ctx, e, k, late, int64(60_000)))(t); ok {
			t.Fatal("Refresh matched a tombstone")
		}
		if ok := must(rwlease.ScriptVerify.Run(ctx, e, k, late))(t); ok {
			t.Fatal("Verify matched a tombstone")
		}
		// The write phase ends: the tombstone stays a tombstone.
		if out := must(rwlease.ScriptRelease.Run(ctx, e, k, w2))(t); out != decode.Released {
			t.Fatalf("release of the writer = %v", out)
		}
		stone(late)
		// A release of the member (a blocking acquisition that gave up
		// drops its waiting record so) leaves the tombstone.
		if out := must(rwlease.ScriptRelease.Run(ctx, e, k, late))(t); out != decode.AlreadyReleased {
			t.Fatalf("release of a tombstone = %v", out)
		}
		stone(late)
		// A re-sent cleanup: a tombstone again.
		if out := must(rwlease.ScriptAbandon.Run(ctx, e, k, late, int64(10_000)))(t); out != decode.AlreadyReleased {
			t.Fatalf("Abandon re-sent = %v", out)
		}
		stone(late)
		// Tombstones alone: the key lives as long as the latest of them.
		if pttl := must(admin.PTTL(ctx, key).Result())(t); pttl < 9*time.Second || pttl > 10*time.Second {
			t.Fatalf("key PTTL %v with tombstones alone, want about 10s", pttl)
		}
		if n := must(admin.ZCard(ctx, key).Result())(t); n != 2 {
			t.Fatalf("%d members, want the two tombstones", n)
		}
	})
}
