package leakcheck_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/faultproxy"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/redlock"
)

// The Shutdown of one node's coordinator ends what the group runs over it:
// a waiter blocked in Acquire returns an error wrapping ErrClosed, a lock
// kept alive stops renewing (its context is cancelled with a cause
// matching ErrClosed and ErrLost) and stays on the nodes until its TTL,
// later operations fail with ErrClosed, and no goroutine is left once
// every coordinator is shut down and the clients closed. Not parallel:
// goleak sees every goroutine of the process.
func TestShutdownOfANodeEndsTheGroupsWork(t *testing.T) {
	ctx := context.Background()
	c := miniNodes(t, 3)
	c.holders("k") // the direct clients connect before the snapshot
	ignore := goleak.IgnoreCurrent()
	coords := c.coords()
	g, err := redlock.New(coords, redlock.WithNodeTimeout(nodeTimeout))
	if err != nil {
		t.Fatal(err)
	}
	l, err := g.TryAcquire(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// TryAcquire returns once a quorum (2 of 3) granted; the third grant
	// may still be on its way. Started now, the waiter's first round could
	// win that node first, leaving this lock legitimately on 2 nodes: wait
	// for the grant, so that the counts below can be exact.
	waitFor(t, "the lock's token on every node", func() bool { return c.holding("k", l.Token()) == 3 })
	l.KeepAlive()
	lctx := l.Context()
	waited := make(chan error, 1)
	go func() {
		_, err := g.Acquire(ctx, "k", 10*time.Second)
		waited <- err
	}()
	waitFor(t, "the waiter to subscribe on every node", func() bool {
		for _, co := range coords {
			if e, _ := engine.Of(co); waiters(e) != 1 {
				return false
			}
		}
		return true
	})

	// Not the first node: the group's wait loop runs on the first one's
	// engine, and must end all the same.
	if err := coords[1].Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	select {
	case err := <-waited:
		if !errors.Is(err, coordination.ErrClosed) {
			t.Fatalf("the blocked Acquire returned %v, want an error wrapping ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the blocked Acquire did not return after a node's Shutdown")
	}
	select {
	case <-lctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the lock's context was not cancelled by a node's Shutdown")
	}
	if cause := context.Cause(lctx); !errors.Is(cause, coordination.ErrClosed) || !errors.Is(cause, coordination.ErrLost) {
		t.Errorf("the lock's context cause = %v, want one matching ErrClosed and ErrLost", cause)
	}
	if l.Remaining() != 0 {
		t.Error("the lock reports validity left after a node's Shutdown")
	}
	if n := c.holding("k", l.Token()); n != 3 {
		t.Errorf("%d nodes hold the lock's token after Shutdown, want 3 (not released: it ends at its TTL)", n)
	}
	for name, err := range map[string]error{
		"TryAcquire": func() error { _, err := g.TryAcquire(ctx, "other", time.Second); return err }(),
		"Refresh":    func() error { _, err := l.Refresh(ctx, time.Second); return err }(),
		"Release":    func() error { _, err := l.Release(ctx); return err }(),
	} {
		if !errors.Is(err, coordination.ErrClosed) {
			t.Errorf("%s after a node's Shutdown: %v, want an error wrapping ErrClosed", name, err)
		}
	}
	if n := c.holding("k", l.Token()); n != 3 {
		t.Errorf("%d nodes hold the lock's token after the refused calls, want 3", n)
	}
	for _, co := range coords {
		if err := co.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		_ = co.Client().Close()
	}
	goleak.VerifyNone(t, ignore)
}

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
