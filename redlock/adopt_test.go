package redlock_test

import (
	"github.com/redis/go-redis/v9"

	"context"
	"errors"
	"strings"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/adopttest"
	"github.com/coordkit/coordination/internal/testkit/faultproxy"
	"github.com/coordkit/coordination/redlock"
)

func handle(l *redlock.Lock, err error) (adopttest.Handle, error) {
	if err != nil {
		return nil, err
	}
	return l, nil
}

// settled is handle for an acquisition: it returns after the slow node's
// request (100 ms late, see extraNodes) has landed, so that it cannot land
// after the suite's forced release and take that node again (one node:
// the lock stays free, but a second forced release would report true).
func settled(l *redlock.Lock, err error) (adopttest.Handle, error) {
	if err == nil {
		time.Sleep(150 * time.Millisecond)
	}
	return handle(l, err)
}

// subject is a three-node group whose node 0 is the suite's coordinator
// (the other two: new clients of the same backend with their own key
// prefixes, the last one slowed by 100 ms; see extraNodes).
var subject = adopttest.Subject{
	New: func(t testing.TB, c *coordination.Coordinator, name string) adopttest.Ops {
		x := &extraNodes{}
		t.Cleanup(x.close)
		coords, err := x.coords(c)
		if err != nil {
			t.Fatal(err)
		}
		g, err := redlock.New(coords, redlock.WithSameServerForTest(), redlock.WithNodeTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return adopttest.Ops{
			TryAcquire: func(ctx context.Context, ttl time.Duration) (adopttest.Handle, error) {
				return settled(g.TryAcquire(ctx, name, ttl))
			},
			Acquire: func(ctx context.Context, ttl time.Duration) (adopttest.Handle, error) {
				return settled(g.Acquire(ctx, name, ttl))
			},
			Adopt: func(ctx context.Context, token string) (adopttest.Handle, error) {
				return handle(g.Adopt(ctx, name, token))
			},
			Holders: func(ctx context.Context) ([]coordination.Holder, error) {
				h, err := g.Holder(ctx, name)
				if errors.Is(err, coordination.ErrNotHeld) {
					return nil, nil
				}
				if err != nil {
					return nil, err
				}
				return []coordination.Holder{h}, nil
			},
			ForceRelease: func(ctx context.Context, token string) (bool, error) { return g.ForceRelease(ctx, name, token) },
		}
	},
	Keys: func(name string) []string { return []string{name} },
	// On node 0, the suite's coordinator's.
	Garbage: func(ctx context.Context, admin redis.UniversalClient, prefix, name string) error {
		return admin.Set(ctx, prefix+name, "hello world", time.Minute).Err()
	},
	Expect: func(h adopttest.Handle) coordination.Holder { return coordination.Holder{Token: h.Token()} },
}

// Adopt, Holder and ForceRelease of a group (package adopttest), on every
// backend.
func TestAdoptHolderForceRelease(t *testing.T) { adopttest.Run(t, subject) }

// The contract suite on Adopt, Holder and ForceRelease.
func TestAdoptContract(t *testing.T) {
	adopttest.Contract(t, adopttest.Names{
		Primitive:       "redlock",
		AcquireOp:       hooks.RedlockAcquire,
		AdoptOp:         hooks.RedlockAdopt,
		ReadOp:          hooks.RedlockRead,
		ForceOp:         hooks.RedlockForceRelease,
		ForceOneCommand: true,
		New:             subject.New, KeysOf: subject.Keys, Expect: subject.Expect,
	})
}

// The quorum rule of Adopt and Holder on independent nodes (miniredis and
// real servers): the validity is the quorum-th longest of the remaining
// TTLs of the nodes holding the token, less the drift allowance; fewer
// than a quorum (a node lost the key, another keeps a tombstone or
// another owner's token) is not held; failed nodes that could make the
// difference are a QuorumError, not a "not held".
func TestAdoptQuorumValidity(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes func(t *testing.T) *cluster
	}{
		{"miniredis", func(t *testing.T) *cluster { return miniNodes(t, 3) }},
		{"real", func(t *testing.T) *cluster { return realNodes(t, 3) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := tc.nodes(t)
			a := c.group(redlock.WithNodeTimeout(nodeTimeout))
			l, err := a.TryAcquire(ctx, "job", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			c.waitHolding("job", l.Token(), 3)
			// Node i's key expires in 10, 20 and 30 s: a quorum holds it
			// for 20 s.
			for i, d := range c.direct {
				if err := d.PExpire(ctx, c.prefix+"job", time.Duration(i+1)*10*time.Second).Err(); err != nil {
					t.Fatal(err)
				}
			}
			b := c.group(redlock.WithNodeTimeout(nodeTimeout)) // a restarted process
			const drift = 202 * time.Millisecond               // 1% of 20 s + 2 ms
			h, err := b.Holder(ctx, "job")
			if err != nil {
				t.Fatal(err)
			}
			if h.Token != l.Token() || h.Remaining > 20*time.Second-drift || h.Remaining < 18*time.Second || h.FencingToken != 0 {
				t.Fatalf("Holder = %+v, want %s with about 20s - %v", h, l.Token(), drift)
			}
			ad, err := b.Adopt(ctx, "job", l.Token())
			if err != nil {
				t.Fatal(err)
			}
			if ad.TTL() > 20*time.Second || ad.TTL() < 18*time.Second || ad.Validity() > ad.TTL()-drift+time.Millisecond || ad.Remaining() > ad.Validity() {
				t.Fatalf("adopted TTL %v validity %v remaining %v, want about 20s less the drift", ad.TTL(), ad.Validity(), ad.Remaining())
			}
			if dl, ok := ad.Context().Deadline(); !ok || time.Until(dl) > ad.Validity() {
				t.Fatalf("adopted context deadline in %v", time.Until(dl))
			}
			// Node 2 (the longest TTL) loses the key: the quorum of
			// nodes 0 and 1 holds it for 10 s.
			if err := c.direct[2].Del(ctx, c.prefix+"job").Err(); err != nil {
				t.Fatal(err)
			}
			if h, err := b.Holder(ctx, "job"); err != nil || h.Token != l.Token() || h.Remaining > 10*time.Second-102*time.Millisecond || h.Remaining < 8*time.Second {
				t.Fatalf("Holder with node 2 free = %+v, %v; want about 10s", h, err)
			}
			// Node 1 keeps a tombstone of the token (an abandoned
			// acquisition): free there, so one node of three holds it.
			if err := c.direct[1].Set(ctx, c.prefix+"job", l.Token()+"!", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Holder(ctx, "job"); !errors.Is(err, coordination.ErrNotHeld) || !strings.Contains(err.Error(), "not held: no owner token is on 2 of 3 nodes (a quorum)") {
				t.Fatalf("Holder with one node holding = %v, want ErrNotHeld", err)
			}
			if _, err := b.Adopt(ctx, "job", l.Token()); !errors.Is(err, coordination.ErrNotHeld) || err.Error() != `coordination: redlock adopt "job": not held: the token is on fewer than 2 of 3 nodes (a quorum)` {
				t.Fatalf("Adopt with one node holding = %v, want ErrNotHeld", err)
			}
			// Two owners, one node each: nobody holds a quorum.
			other, _ := engine.NewToken()
			if err := c.direct[2].Set(ctx, c.prefix+"job", other, time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Holder(ctx, "job"); !errors.Is(err, coordination.ErrNotHeld) {
				t.Fatalf("Holder with a split = %v, want ErrNotHeld", err)
			}
			// Node 1 holds the token again but cannot be reached: it
			// could make a quorum, so the answer is undecided.
			if err := c.direct[1].Set(ctx, c.prefix+"job", l.Token(), time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			c.proxies[1].BlackHole(faultproxy.Both)
			var qe *redlock.QuorumError
			if _, err := b.Adopt(ctx, "job", l.Token()); !errors.As(err, &qe) || qe.Op != "adopt" || errors.Is(err, coordination.ErrNotHeld) {
				t.Fatalf("Adopt with the deciding node down = %v, want a QuorumError", err)
			}
			if _, err := b.Holder(ctx, "job"); !errors.As(err, &qe) || qe.Op != "read" {
				t.Fatalf("Holder with the deciding node down = %v, want a QuorumError", err)
			}
			c.proxies[1].Restore()
			if ok, err := b.ForceRelease(ctx, "job", l.Token()); err != nil || !ok {
				t.Fatalf("ForceRelease = %v, %v", ok, err)
			}
			// A forced node keeps the token's tombstone (free to others).
			if got := c.holders("job"); got[0] != l.Token()+"!" || got[1] != l.Token()+"!" || got[2] != other {
				t.Fatalf("after ForceRelease the nodes hold %q; want the forced token's tombstone on nodes 0 and 1, the other owner's token on node 2", got)
			}
		})
	}
}

// A forced release wakes a waiter of another group at once (a release
// notification on every node), and the forced holder's lock is lost at its
// next Verify; with a fencing node, Holder and Adopt report its fencing
// token and the fencing node is released too.
func TestForceReleaseWakesWaiter(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes func(t *testing.T) *cluster
	}{
		{"miniredis", func(t *testing.T) *cluster { return miniNodes(t, 3) }},
		{"real", func(t *testing.T) *cluster { return realNodes(t, 3) }},
	} {
		for _, fenced := range []bool{false, true} {
			name := tc.name
			var opts []redlock.Option
			key := "force"
			if fenced {
				name += "/fencing"
				opts = append(opts, redlock.WithFencing(0))
				key = "{force}"
			}
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				c := tc.nodes(t)
				opts := append(opts, redlock.WithNodeTimeout(nodeTimeout))
				holder, waiter, admin := c.group(opts...), c.group(opts...), c.group(opts...)
				l, err := holder.TryAcquire(ctx, key, time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				h, err := admin.Holder(ctx, key)
				if err != nil || h.Token != l.Token() || h.FencingToken != l.FencingToken() {
					t.Fatalf("Holder = %+v, %v; want %s, fencing token %d", h, err, l.Token(), l.FencingToken())
				}
				if fenced {
					ad, err := admin.Adopt(ctx, key, l.Token())
					if err != nil || ad.FencingToken() != l.FencingToken() || ad.FencingToken() <= 0 {
						t.Fatalf("Adopt = %v; want fencing token %d", err, l.FencingToken())
					}
				}
				type got struct {
					l   *redlock.Lock
					err error
					at  time.Time
				}
				done := make(chan got, 1)
				wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				go func() {
					w, err := waiter.Acquire(wctx, key, time.Minute)
					done <- got{w, err, time.Now()}
				}()
				time.Sleep(300 * time.Millisecond) // blocked, subscribed
				select {
				case r := <-done:
					t.Fatalf("the waiter did not block: %v", r.err)
				default:
				}
				other, _ := engine.NewToken()
				if ok, err := admin.ForceRelease(ctx, key, other); err != nil || ok {
					t.Fatalf("ForceRelease(a token holding nothing) = %v, %v; want false", ok, err)
				}
				start := time.Now()
				if ok, err := admin.ForceRelease(ctx, key, l.Token()); err != nil || !ok {
					t.Fatalf("ForceRelease = %v, %v; want true", ok, err)
				}
				r := <-done
				if r.err != nil {
					t.Fatal(r.err)
				}
				d := r.at.Sub(start)
				t.Logf("the waiter held the lock %v after the forced release was sent", d)
				if d > 500*time.Millisecond {
					t.Fatalf("the waiter took %v after the forced release; want at once", d)
				}
				if ok, err := l.Verify(ctx); err != nil || ok {
					t.Fatalf("the forced holder's Verify = %v, %v; want false", ok, err)
				}
				if fenced && r.l.FencingToken() <= l.FencingToken() {
					t.Fatalf("the next fencing token %d is not above %d", r.l.FencingToken(), l.FencingToken())
				}
				if h, err := admin.Holder(ctx, key); err != nil || h.Token != r.l.Token() {
					t.Fatalf("Holder after the takeover = %+v, %v", h, err)
				}
				if ok, err := admin.ForceRelease(ctx, key, l.Token()); err != nil || ok {
					t.Fatalf("second ForceRelease = %v, %v; want false", ok, err)
				}
				if _, err := r.l.Release(ctx); err != nil {
					t.Fatal(err)
				}
				if _, err := admin.Holder(ctx, key); !errors.Is(err, coordination.ErrNotHeld) {
					t.Fatalf("Holder after the release = %v, want ErrNotHeld", err)
				}
			})
		}
	}
}

// ForceRelease with nodes down: answered by a quorum, no error (the token
// holds no quorum any more); answered by fewer, a QuorumError that still
// reports whether an answering node released.
func TestForceReleaseNodesDown(t *testing.T) {
	ctx := context.Background()
	c := miniNodes(t, 3)
	g := c.group(redlock.WithNodeTimeout(200 * time.Millisecond))
	l, err := g.TryAcquire(ctx, "down", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c.waitHolding("down", l.Token(), 3)
	c.proxies[2].BlackHole(faultproxy.Both)
	if ok, err := g.ForceRelease(ctx, "down", l.Token()); err != nil || !ok {
		t.Fatalf("ForceRelease with one node down = %v, %v; want true", ok, err)
	}
	if got := c.holders("down"); got[0] != l.Token()+"!" || got[1] != l.Token()+"!" || got[2] != l.Token() {
		t.Fatalf("nodes hold %q; want the token on the unreachable node only (tombstones elsewhere)", got)
	}
	c.proxies[2].Restore()
	l2, err := g.TryAcquire(ctx, "down2", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c.waitHolding("down2", l2.Token(), 3)
	c.proxies[1].BlackHole(faultproxy.Both)
	c.proxies[2].BlackHole(faultproxy.Both)
	var qe *redlock.QuorumError
	ok, err := g.ForceRelease(ctx, "down2", l2.Token())
	if !ok || !errors.As(err, &qe) || qe.Op != "force release" || qe.Confirmed != 1 || !errors.Is(err, redlock.ErrNodeTimeout) {
		t.Fatalf("ForceRelease with two nodes down = %v, %v; want true and a QuorumError", ok, err)
	}
	if !strings.HasPrefix(err.Error(), `coordination: redlock force release "down2": force release: 1 of 3 nodes confirmed, 2 needed; 2 failed`) {
		t.Fatalf("error %q", err)
	}
}

// A forced release evicts a holder that keeps its lock alive: its next
// renewal, which re-takes a node where the key is free, finds the token's
// tombstone there, so the holder loses the lock and nobody holds it. (A
// new user's finding: without fencing, the renewal took all three nodes
// back after ForceRelease reported true.)
func TestForceReleaseEvictsAKeptAliveHolder(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes func(t *testing.T) *cluster
	}{
		{"miniredis", func(t *testing.T) *cluster { return miniNodes(t, 3) }},
		{"real", func(t *testing.T) *cluster { return realNodes(t, 3) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := tc.nodes(t)
			holder, admin := c.group(redlock.WithNodeTimeout(nodeTimeout)), c.group(redlock.WithNodeTimeout(nodeTimeout))
			l, err := holder.TryAcquire(ctx, "evict", 3*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			l.KeepAlive()
			if ok, err := admin.ForceRelease(ctx, "evict", l.Token()); err != nil || !ok {
				t.Fatalf("ForceRelease = %v, %v; want true", ok, err)
			}
			select {
			case <-l.Context().Done():
			case <-time.After(5 * time.Second):
				t.Fatal("the forced holder still holds its lock 5 s after the forced release (its renewals took the nodes back)")
			}
			if !errors.Is(context.Cause(l.Context()), coordination.ErrLost) {
				t.Fatalf("the holder's context ended with %v, want ErrLost", context.Cause(l.Context()))
			}
			if h, err := admin.Holder(ctx, "evict"); !errors.Is(err, coordination.ErrNotHeld) {
				t.Fatalf("Holder after the eviction = %+v, %v; want ErrNotHeld", h, err)
			}
			other, err := admin.TryAcquire(ctx, "evict", time.Minute)
			if err != nil {
				t.Fatalf("another TryAcquire after the eviction = %v", err)
			}
			if _, err := other.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
