package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/coordkit/coordination/redlock"
)

// A kept-alive Redlock survives its nodes losing their data one by one
// (a restart without persistence): each refresh takes the lock again on a
// node where the key is free, so after every loss the lock is back on all
// three nodes before the next, and it is never lost while a majority is
// up. Before, a refresh only extended keys that still existed: after the
// first loss the lock lived on a bare majority, and the second loss ended
// it (go-redsync/redsync#149).
func TestRefreshHealsTheQuorumAfterNodeRestarts(t *testing.T) {
	for _, nodes := range []struct {
		name  string
		start func(*testing.T) *cluster
		wipe  func(t *testing.T, c *cluster, i int)
	}{
		{"miniredis", func(t *testing.T) *cluster { return miniNodes(t, 3) }, func(t *testing.T, c *cluster, i int) { c.minis[i].FlushAll() }},
		{"real", func(t *testing.T) *cluster { return realNodes(t, 3) }, func(t *testing.T, c *cluster, i int) {
			c.servers[i].Kill()
			if err := c.servers[i].Restart(); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(nodes.name, func(t *testing.T) {
			ctx := context.Background()
			c := nodes.start(t)
			g := c.group(redlock.WithNodeTimeout(nodeTimeout))
			const key, ttl = "healing", 1500 * time.Millisecond
			l, err := g.TryAcquire(ctx, key, ttl)
			if err != nil {
				t.Fatal(err)
			}
			l.KeepAlive() // every ttl/3
			// TryAcquire returns once a quorum answered: the third node's
			// reply may still be on its way.
			c.waitHolding(key, l.Token(), 3)
			for i := range 3 {
				nodes.wipe(t, c, i)
				if n := c.holding(key, l.Token()); n != 2 {
					t.Fatalf("after node %d lost its data: the token is on %d nodes, want 2", i, n)
				}
				deadline := time.Now().Add(ttl + 5*time.Second)
				for c.holding(key, l.Token()) != 3 {
					if err := l.Context().Err(); err != nil {
						t.Fatalf("the lock was lost after node %d lost its data: %v", i, context.Cause(l.Context()))
					}
					if time.Now().After(deadline) {
						t.Fatalf("node %d never held the lock again: the quorum did not heal (holders %q)", i, c.holders(key))
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			if ok, err := l.Verify(ctx); !ok || err != nil {
				t.Fatalf("Verify after three node losses = %v, %v; want true", ok, err)
			}
			if _, err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			// Release returns once a quorum confirmed; the third follows.
			c.waitHolding(key, l.Token(), 0)
		})
	}
}
