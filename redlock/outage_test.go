package redlock_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/faultproxy"
	"github.com/coordkit/coordination/redlock"
)

// A blocking Acquire gives up as every blocking acquire does: an outage is
// not contention. With 2 of 3 nodes down (refused, or black-holed) its
// rounds end with a *QuorumError; when its context ends, the error names
// that failure (errors.As finds the QuorumError with the nodes' errors),
// matches the context's error, and does not match ErrNotAcquired. (It
// returned `not acquired: context deadline exceeded`, contention's error.)
// Refused by a quorum of answering nodes, it still gives up with
// ErrNotAcquired. With a context that had already ended, TryAcquire and
// Acquire send nothing and return the context's error alone (TryAcquire
// returned `not acquired: context canceled` and sent its round).
func TestAcquireDuringAnOutageIsNotContention(t *testing.T) {
	for _, nodes := range []struct {
		name  string
		start func(*testing.T) *cluster
	}{
		{"miniredis", func(t *testing.T) *cluster { return miniNodes(t, 3) }},
		{"real", func(t *testing.T) *cluster { return realNodes(t, 3) }},
	} {
		t.Run(nodes.name, func(t *testing.T) {
			c := nodes.start(t)
			for _, fault := range []string{"refused", "black-holed"} {
				t.Run(fault, func(t *testing.T) {
					c.t = t
					defer c.heal()
					outageGiveUp(t, c, fault)
				})
			}
			t.Run("context shorter than the node timeout", func(t *testing.T) {
				c.t = t
				defer c.heal()
				cutByContext(t, c)
			})
			t.Run("context ends while subscribing", func(t *testing.T) {
				c.t = t
				defer c.heal()
				subscribeCutByContext(t, c)
			})
			t.Run("contention", func(t *testing.T) {
				c.t = t
				contentionGiveUp(t, c)
			})
			t.Run("ended context", func(t *testing.T) {
				c.t = t
				endedContext(t, c)
			})
		})
	}
}

func outageGiveUp(t *testing.T, c *cluster, fault string) {
	g := c.group(redlock.WithNodeTimeout(nodeTimeout))
	down(c, fault, 1, 2)
	key := "outage-" + strings.ReplaceAll(fault, "-", "")
	// Long enough for a few rounds (each ends at most a node timeout in).
	ctx, cancel := context.WithTimeout(context.Background(), 4*nodeTimeout)
	defer cancel()
	l, err := g.Acquire(ctx, key, 10*time.Second)
	if l != nil {
		t.Fatal("acquired with 2 of 3 nodes down")
	}
	var qe *redlock.QuorumError
	switch {
	case errors.Is(err, coordination.ErrNotAcquired):
		t.Fatalf("%v: matches ErrNotAcquired; an outage is not contention", err)
	case !errors.Is(err, context.DeadlineExceeded):
		t.Fatalf("%v: does not match the context's error", err)
	case !errors.As(err, &qe):
		t.Fatalf("%v: errors.As finds no *redlock.QuorumError", err)
	}
	if qe.Op != "acquire" || qe.Quorum != 2 || qe.Confirmed > 1 || len(qe.Errs) != 3 || qe.Errs[1] == nil || qe.Errs[2] == nil {
		t.Fatalf("QuorumError %+v, want acquire, at most 1 of 3 confirmed, 2 needed, nodes 1 and 2 failed", qe)
	}
	if fault == "black-holed" && (!errors.Is(qe.Errs[1], redlock.ErrNodeTimeout) || !errors.Is(qe.Errs[2], redlock.ErrNodeTimeout)) {
		t.Fatalf("QuorumError %+v, want node timeouts on the black-holed nodes", qe)
	}
	want := `coordination: redlock acquire "` + key + `": context deadline exceeded; the last attempt failed: redlock: acquire: `
	if !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("%q, want it to begin %q", err, want)
	}
	if coordination.IsTransient(err) {
		t.Fatalf("%v: a wait that gave up is a cancellation, not transient", err)
	}
	// The reachable node's grants were released by the failed rounds.
	waitFor(t, "the reachable node to be free", func() bool { return c.holders(key)[0] == "" })
}

func contentionGiveUp(t *testing.T, c *cluster) {
	holder, err := c.group(redlock.WithNodeTimeout(nodeTimeout)).TryAcquire(context.Background(), "held", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 2*nodeTimeout)
	defer cancel()
	_, err = c.group(redlock.WithNodeTimeout(nodeTimeout)).Acquire(ctx, "held", 10*time.Second)
	var qe *redlock.QuorumError
	if !errors.Is(err, coordination.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) || errors.As(err, &qe) {
		t.Fatalf("%v: want contention's give-up (ErrNotAcquired and the context's error), no QuorumError", err)
	}
	if want := `coordination: redlock acquire "held": not acquired: context deadline exceeded`; err.Error() != want {
		t.Fatalf("%q, want %q", err, want)
	}
}

func endedContext(t *testing.T, c *cluster) {
	g := c.group(redlock.WithNodeTimeout(nodeTimeout))
	// Scripts on this subtest's key only: the Pub/Sub connections of
	// earlier subtests' groups may still be re-subscribing after a heal,
	// and their background releases may still be on their way.
	var scripts atomic.Int32
	for _, p := range c.proxies {
		p.Apply(faultproxy.DelayCommand(func(cmd faultproxy.Command) bool {
			if n := cmd.Name(); (n == "EVALSHA" || n == "EVAL") && slices.ContainsFunc(cmd.Args, func(a string) bool { return strings.HasSuffix(a, "ended") }) {
				scripts.Add(1)
			}
			return false
		}, time.Nanosecond, faultproxy.Forever))
	}
	sent := func() int { return int(scripts.Load()) }
	before := sent()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for name, acquire := range map[string]func() (*redlock.Lock, error){
		"TryAcquire": func() (*redlock.Lock, error) { return g.TryAcquire(ctx, "ended", 10*time.Second) },
		"Acquire":    func() (*redlock.Lock, error) { return g.Acquire(ctx, "ended", 10*time.Second) },
	} {
		_, err := acquire()
		if want := `coordination: redlock acquire "ended": context canceled`; err == nil || err.Error() != want {
			t.Fatalf("%s with an ended context: %v, want %q", name, err, want)
		}
		if !errors.Is(err, context.Canceled) || errors.Is(err, coordination.ErrNotAcquired) {
			t.Fatalf("%s with an ended context: %v, want context.Canceled and not ErrNotAcquired", name, err)
		}
	}
	time.Sleep(100 * time.Millisecond) // a background release would be on its way
	if n := sent() - before; n != 0 {
		t.Fatalf("%d scripts reached the nodes, want none", n)
	}
}

// With 2 of 3 nodes black-holed and a context shorter than the node
// timeout, the context cuts the first round: Acquire returns when the
// context ends, saying that no round was answered, like a single node's
// blocking acquire whose commands its context cut (not ErrNotAcquired; no
// *QuorumError, which no round ended with).
func cutByContext(t *testing.T, c *cluster) {
	const nt = 3 * time.Second
	g := c.group(redlock.WithNodeTimeout(nt))
	down(c, "black-holed", 1, 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	_, err := g.Acquire(ctx, "cut", 10*time.Second)
	took := time.Since(start)
	if want := `coordination: redlock acquire "cut": context deadline exceeded; Redis answered no attempt`; err == nil || err.Error() != want {
		t.Fatalf("%v, want %q", err, want)
	}
	var qe *redlock.QuorumError
	if errors.Is(err, coordination.ErrNotAcquired) || errors.As(err, &qe) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v: want the context's error alone", err)
	}
	if took > time.Second+nt/2 {
		t.Fatalf("Acquire returned %v after it began, its context 1s: held past the context", took)
	}
	waitFor(t, "the reachable node to be free", func() bool { return c.holders("cut")[0] == "" })
}

// down takes nodes down: "refused" (every connection reset at once) or
// "black-holed" (everything held both ways).
func down(c *cluster, fault string, nodes ...int) {
	for _, i := range nodes {
		if fault == "refused" {
			c.proxies[i].Refuse(time.Hour)
			c.proxies[i].CutAll(faultproxy.RST)
		} else {
			c.cut(i)
		}
	}
}

// With 2 of 3 nodes black-holed, the first round ends at the node timeout
// (1.5 s) with a *QuorumError, and Acquire then subscribes to release
// notifications on every node, which waits up to a node timeout for the
// black-holed ones. Its context (2 s) ends meanwhile: Acquire returns
// then, naming the round's QuorumError (before, it returned a node timeout
// later, 3 s in).
func subscribeCutByContext(t *testing.T, c *cluster) {
	const nt = 1500 * time.Millisecond
	g := c.group(redlock.WithNodeTimeout(nt))
	down(c, "black-holed", 1, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err := g.Acquire(ctx, "sub", 10*time.Second)
	took := time.Since(start)
	var qe *redlock.QuorumError
	if errors.Is(err, coordination.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &qe) ||
		!errors.Is(qe.Errs[1], redlock.ErrNodeTimeout) || !errors.Is(qe.Errs[2], redlock.ErrNodeTimeout) {
		t.Fatalf("%v: want the context's error and the first round's QuorumError (node timeouts)", err)
	}
	if took > 2*time.Second+nt/3 {
		t.Fatalf("Acquire returned %v after it began, its context 2s: held past the context", took)
	}
}
