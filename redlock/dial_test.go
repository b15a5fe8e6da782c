package redlock_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/redlock"
)

// closedPort returns the address of a TCP port on 127.0.0.1 that nothing
// listens on (it was listening a moment ago): dials there are refused.
func closedPort(t *testing.T) string {
	t.Helper()
	return testharness.RefusedAddr(t)
}

// closedNode returns a coordinator over a new client of a closed port,
// with go-redis' dial retries set to retries (0: its default, 5 attempts
// 100 ms apart), shut down before its client is closed when the test ends.
func closedNode(t *testing.T, retries int) *coordination.Coordinator {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: closedPort(t), DialerRetries: retries})
	t.Cleanup(func() { rdb.Close() })
	coord, err := coordination.New(rdb, coordination.WithKeyPrefix("rl:"+t.Name()+":"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := coord.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return coord
}

// isDialError reports whether err is a refused dial: a *net.OpError with Op
// "dial" wrapping ECONNREFUSED, and not ErrNodeTimeout.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial" && errors.Is(err, syscall.ECONNREFUSED) &&
		strings.Contains(err.Error(), "connection refused") && !errors.Is(err, redlock.ErrNodeTimeout)
}

// dialRetries are the go-redis settings the closed-port tests run with:
// its default dial retries (5 attempts with a backoff, which with its
// command retries outlast the default node timeout of 1 s: the node
// timeout ends the call while go-redis is still dialing, and go-redis then
// returns only the context's error), and one dial attempt (go-redis
// returns the dial error itself, well within the node timeout).
var dialRetries = []struct {
	name    string
	retries int
}{{"DefaultDialerRetries", 0}, {"DialerRetries1", 1}}

// A group whose nodes all refuse connections fails with a *QuorumError
// naming the refused dials, with the default node timeout: not
// ErrNodeTimeout, and not ambiguous (nothing was sent), whatever go-redis'
// dial retries. Before the fix, with go-redis' default dial retries every
// node failed with ErrNodeTimeout and the error was ambiguous.
func TestClosedPortsReportDialError(t *testing.T) {
	for _, tc := range dialRetries {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var nodes []*coordination.Coordinator
			for range 3 {
				nodes = append(nodes, closedNode(t, tc.retries))
			}
			g, err := redlock.New(nodes)
			if err != nil {
				t.Fatal(err)
			}
			l, err := g.TryAcquire(context.Background(), "k", 10*time.Second)
			var qe *redlock.QuorumError
			if l != nil || !errors.As(err, &qe) || errors.Is(err, coordination.ErrNotAcquired) {
				t.Fatalf("TryAcquire on closed ports: %v, %v; want a *QuorumError", l, err)
			}
			failed := 0
			for i, e := range qe.Errs {
				if e == nil { // a node still dialing when two had failed
					continue
				}
				failed++
				if !isDialError(e) {
					t.Errorf("node %d: %v (%T); want the refused dial", i, e, e)
				}
			}
			if qe.Op != "acquire" || qe.Confirmed != 0 || qe.Quorum != 2 || len(qe.Errs) != 3 || failed < 2 {
				t.Fatalf("QuorumError %+v", qe)
			}
			if !isDialError(err) || !strings.Contains(err.Error(), "dial: connection refused") {
				t.Errorf("error %q: want it to wrap and name the refused dial", err)
			}
			if coordination.IsAmbiguous(err) || !coordination.IsTransient(err) {
				t.Errorf("refused dials: ambiguous %v, class %v; want not ambiguous (nothing sent), transient",
					coordination.IsAmbiguous(err), engine.Classify(err))
			}
		})
	}
}

// mixedGroup returns a group of live nodes (from c, over fresh clients
// through its proxies) followed by closed nodes refusing connections, with
// the default node timeout.
func mixedGroup(t *testing.T, c *cluster, closed, retries int) *redlock.Group {
	t.Helper()
	nodes := c.coords()
	for range closed {
		nodes = append(nodes, closedNode(t, retries))
	}
	g, err := redlock.New(nodes)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// 3 live nodes and 2 closed ports: the quorum of 3 of 5 acquires and
// releases; 2 live and 3 closed: a *QuorumError naming the refused dials
// (not ambiguous on the closed nodes; the two grants are released). On
// miniredis and on real servers, with both dial retry settings.
func TestMixedLiveAndClosedNodes(t *testing.T) {
	for _, backend := range []struct {
		name  string
		nodes func(t *testing.T, n int) *cluster
	}{
		{"miniredis", miniNodes},
		{"real", func(t *testing.T, n int) *cluster { return realNodes(t, n) }},
	} {
		t.Run(backend.name, func(t *testing.T) {
			for _, tc := range dialRetries {
				t.Run(tc.name, func(t *testing.T) {
					ctx := context.Background()
					t.Run("ThreeLiveAcquire", func(t *testing.T) {
						c := backend.nodes(t, 3)
						g := mixedGroup(t, c, 2, tc.retries)
						l, err := g.TryAcquire(ctx, "mix3", 10*time.Second)
						if err != nil {
							t.Fatalf("3 live of 5: %v", err)
						}
						c.waitHolding("mix3", l.Token(), 3)
						if out, err := l.Release(ctx); out != coordination.Released || err != nil {
							t.Fatalf("release with 3 live of 5: %v, %v; want released", out, err)
						}
						c.waitHolding("mix3", l.Token(), 0)
					})
					t.Run("TwoLiveFail", func(t *testing.T) {
						c := backend.nodes(t, 2)
						g := mixedGroup(t, c, 3, tc.retries)
						l, err := g.TryAcquire(ctx, "mix2", 10*time.Second)
						var qe *redlock.QuorumError
						if l != nil || !errors.As(err, &qe) || errors.Is(err, coordination.ErrNotAcquired) {
							t.Fatalf("2 live of 5: %v, %v; want a *QuorumError", l, err)
						}
						if qe.Confirmed != 2 || qe.Quorum != 3 || len(qe.Errs) != 5 || qe.Errs[0] != nil || qe.Errs[1] != nil {
							t.Fatalf("QuorumError %+v", qe)
						}
						for i := 2; i < 5; i++ {
							if !isDialError(qe.Errs[i]) {
								t.Errorf("closed node %d: %v (%T); want the refused dial", i, qe.Errs[i], qe.Errs[i])
							}
						}
						if !strings.Contains(err.Error(), "2 of 5 nodes confirmed, 3 needed; 3 failed: transient: dial: connection refused") {
							t.Errorf("error %q: want it to name the refused dial", err)
						}
						if coordination.IsAmbiguous(err) {
							t.Error("refused dials on every failed node: ambiguous, want not (nothing was sent)")
						}
						// The two live nodes granted it; the failed attempt
						// releases them.
						waitFor(t, "the live nodes to be free", func() bool {
							h := c.holders("mix2")
							return h[0] == "" && h[1] == ""
						})
					})
				})
			}
		})
	}
}
