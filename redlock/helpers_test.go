package redlock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/faultproxy"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/redlock"
)

// nodeTimeout is the node timeout of groups whose test is not about the
// timeout: generous, so that a node answering late on a loaded machine
// (CI runs packages in parallel under -race) does not count as failed, and
// short enough for the steps that wait for a cut-off node.
const nodeTimeout = 500 * time.Millisecond

// cluster is N independent nodes for one test: each a server (miniredis or
// a dedicated real one) behind its own fault proxy, a direct client per
// server for assertions, and a key prefix.
type cluster struct {
	t       testing.TB
	prefix  string
	minis   []*miniredis.Miniredis
	servers []*testharness.Server
	proxies []*faultproxy.Proxy
	direct  []*redis.Client
}

// miniNodes starts n embedded servers behind proxies.
func miniNodes(t *testing.T, n int) *cluster {
	t.Helper()
	c := &cluster{t: t, prefix: "rl:" + t.Name() + ":"}
	for range n {
		m := miniredis.RunT(t)
		c.minis = append(c.minis, m)
		c.add(m.Addr(), &redis.Options{Addr: m.Addr()})
	}
	return c
}

// realNodes starts n dedicated real servers behind proxies, cycling through
// the available flavors.
func realNodes(t testing.TB, n int) *cluster {
	t.Helper()
	c := &cluster{t: t, prefix: "rl:"}
	flavors := testharness.AvailableFlavors(t)
	for i := range n {
		s := testharness.StartStandalone(t, flavors[i%len(flavors)])
		c.servers = append(c.servers, s)
		c.add(s.Addr, s.Options())
	}
	return c
}

func (c *cluster) add(addr string, direct *redis.Options) {
	p := faultproxy.Start(c.t, addr)
	c.proxies = append(c.proxies, p)
	d := redis.NewClient(direct)
	c.t.Cleanup(func() { d.Close() })
	c.direct = append(c.direct, d)
}

// coords returns one coordinator per node, each over its own new client
// through the node's proxy, closed when the test ends.
func (c *cluster) coords(opts ...coordination.Option) []*coordination.Coordinator {
	c.t.Helper()
	var out []*coordination.Coordinator
	for _, p := range c.proxies {
		rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ReadTimeout: 3 * time.Second})
		c.t.Cleanup(func() { rdb.Close() })
		coord, err := coordination.New(rdb, append([]coordination.Option{coordination.WithKeyPrefix(c.prefix)}, opts...)...)
		if err != nil {
			c.t.Fatal(err)
		}
		out = append(out, coord)
	}
	return out
}

// group returns a group over fresh coordinators of every node.
func (c *cluster) group(opts ...redlock.Option) *redlock.Group {
	c.t.Helper()
	g, err := redlock.New(c.coords(), opts...)
	if err != nil {
		c.t.Fatal(err)
	}
	return g
}

// holders returns, per node, the value at key (read directly, not through
// the proxy): "" when absent.
func (c *cluster) holders(key string) []string {
	c.t.Helper()
	out := make([]string, len(c.direct))
	for i, d := range c.direct {
		v, err := d.Get(context.Background(), c.prefix+key).Result()
		if err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE") { // a fencing node's lease hash
			v, err = d.HGet(context.Background(), c.prefix+key, "owner").Result()
		}
		if err != nil && err != redis.Nil {
			c.t.Fatalf("node %d: %v", i, err)
		}
		out[i] = v
	}
	return out
}

// holding counts the nodes whose key holds token, with or without the
// waiter mark '+' that a refused acquisition appends to a lock node's value
// (see lua/lock_acquire.lua).
func (c *cluster) holding(key, token string) int {
	n := 0
	for _, v := range c.holders(key) {
		if v == token || v == token+"+" {
			n++
		}
	}
	return n
}

// waitHolding waits up to 5 s until exactly want nodes hold token at key.
func (c *cluster) waitHolding(key, token string, want int) {
	c.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := c.holding(key, token)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%d nodes hold the token at %q, want %d (values %q)", got, key, want, c.holders(key))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitFor waits up to 5 s for cond.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
