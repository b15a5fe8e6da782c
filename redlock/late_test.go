package redlock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/fencingcore"
	"github.com/coordkit/coordination/internal/lockcore"
	"github.com/coordkit/coordination/internal/testkit/faultproxy"
	"github.com/coordkit/coordination/redlock"
)

// A round whose acquire requests to two of three nodes are held in the
// network until after the round failed (node timeouts: ambiguous) and the
// nodes' background cleanups finished takes nothing on those nodes when
// the requests finally arrive: each cleanup left a tombstone there. Another
// group then takes the lock at once. (Before, the late requests re-created
// the token on two nodes, a quorum held by nobody for a whole TTL.) With
// WithFencing(0), one of the held nodes is the fencing node, whose cleanup
// leaves the fencing lease's tombstone.
func TestLateNodeAcquireAfterCleanupTakesNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes func(t *testing.T) *cluster
		opts  []redlock.Option
	}{
		{"miniredis", func(t *testing.T) *cluster { return miniNodes(t, 3) }, nil},
		{"real", func(t *testing.T) *cluster { return realNodes(t, 3) }, nil},
		{"miniredis/fencing", func(t *testing.T) *cluster { return miniNodes(t, 3) }, []redlock.Option{redlock.WithFencing(0)}},
		{"real/fencing", func(t *testing.T) *cluster { return realNodes(t, 3) }, []redlock.Option{redlock.WithFencing(0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := tc.nodes(t)
			coords := c.coords()
			g, err := redlock.New(coords, append([]redlock.Option{redlock.WithNodeTimeout(nodeTimeout)}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			warm, err := g.TryAcquire(ctx, "{late}-warm", time.Minute) // scripts cached on every node
			if err != nil {
				t.Fatal(err)
			}
			if _, err := warm.Release(ctx); err != nil {
				t.Fatal(err)
			}
			anyOf := func(scripts ...string) func(faultproxy.Command) bool {
				return func(cmd faultproxy.Command) bool {
					for _, sha := range scripts {
						if faultproxy.ScriptSHA(sha)(cmd) {
							return true
						}
					}
					return false
				}
			}
			isAcquire := anyOf(lockcore.Acquire.Hash(), fencingcore.Acquire.Hash())
			// Count the cleanup's scripts (abandon, or a plain release) on
			// the held nodes: a rule that never fires.
			isCleanup := anyOf(lockcore.Abandon.Hash(), lockcore.Release.Hash(), fencingcore.Abandon.Hash(), fencingcore.Release.Hash())
			var cleanups [2]atomic.Int32
			for i := range cleanups {
				c.proxies[i].Apply(faultproxy.DelayCommand(func(cmd faultproxy.Command) bool {
					if isCleanup(cmd) {
						cleanups[i].Add(1)
					}
					return false
				}, time.Nanosecond, faultproxy.Forever))
			}
			held := []*faultproxy.Applied{
				c.proxies[0].Apply(faultproxy.HoldCommand(isAcquire, faultproxy.Forever)),
				c.proxies[1].Apply(faultproxy.HoldCommand(isAcquire, faultproxy.Forever)),
			}
			if _, err := g.TryAcquire(ctx, "{late}", time.Minute); err == nil {
				t.Fatal("TryAcquire with two of three nodes held succeeded")
			}
			// Each held node's answer (a read timeout) comes after the round;
			// its cleanup runs after that.
			waitFor(t, "the held nodes' cleanups", func() bool {
				for _, co := range coords {
					e, _ := engine.Of(co)
					if e.Cleanups() > 0 {
						return false
					}
				}
				return held[0].Fired() > 0 && held[1].Fired() > 0 && cleanups[0].Load() > 0 && cleanups[1].Load() > 0
			})
			for _, h := range held {
				h.Let()
			}
			waitFor(t, "the late requests' answers", func() bool {
				return held[0].Answered() == held[0].Fired() && held[1].Answered() == held[1].Fired()
			})
			for i, v := range c.holders("{late}") {
				if v != "" && !lockcore.IsTombstone(v) {
					t.Fatalf("node %d holds %q after the late requests; want no owner (holders %q)", i, v, c.holders("{late}"))
				}
			}
			for _, h := range held {
				h.Remove()
			}
			other, err := redlock.New(c.coords(), append([]redlock.Option{redlock.WithNodeTimeout(nodeTimeout)}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			l, err := other.TryAcquire(ctx, "{late}", time.Minute)
			if err != nil {
				t.Fatalf("another group's TryAcquire = %v; want the lock", err)
			}
			c.waitHolding("{late}", l.Token(), 3)
			if _, err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
