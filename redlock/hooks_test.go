package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/testkit/faultproxy"
	"github.com/coordkit/coordination/redlock"
)

// journal records admissions and outcomes of several nodes' hooks in one
// order.
type journal struct {
	mu     sync.Mutex
	lines  []string
	reject map[int]error
}

func (j *journal) hook(node int) hooks.Hook {
	return hooks.Func(func(ctx context.Context, op hooks.Operation) (context.Context, hooks.Done, error) {
		j.mu.Lock()
		defer j.mu.Unlock()
		if err := j.reject[node]; err != nil {
			j.lines = append(j.lines, fmt.Sprintf("%d rejects %s", node, op.Name))
			return ctx, nil, err
		}
		j.lines = append(j.lines, fmt.Sprintf("%d admits %s/%s", node, op.Primitive, op.Name))
		return ctx, func(o hooks.Outcome, _ error) {
			j.mu.Lock()
			defer j.mu.Unlock()
			j.lines = append(j.lines, fmt.Sprintf("%d %s", node, o))
		}, nil
	})
}

func (j *journal) take() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := j.lines
	j.lines = nil
	return out
}

// Each group operation is admitted once through every node's hooks, in the
// order of the nodes, before any node work; outcomes come back in reverse
// order. A rejection by any node's hook fails the operation with that
// hook's error, tells the nodes admitted before it Failed, and sends
// nothing anywhere.
func TestHooksOncePerGroupOperation(t *testing.T) {
	c := miniNodes(t, 3)
	ctx := context.Background()
	j := &journal{reject: map[int]error{}}
	var coords []*coordination.Coordinator
	for i, co := range c.coords() {
		withHook, err := coordination.New(co.Client(), coordination.WithKeyPrefix(c.prefix), coordination.WithHooks(j.hook(i)))
		if err != nil {
			t.Fatal(err)
		}
		coords = append(coords, withHook)
	}
	// A generous node timeout for the operations that must succeed on a
	// loaded machine; a short one (same coordinators, same hooks) for the
	// one that waits for black-holed nodes.
	g, err := redlock.New(coords, redlock.WithNodeTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	gShort, err := redlock.New(coords, redlock.WithNodeTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	once := func(op, outcome string) []string {
		return []string{"0 admits redlock/" + op, "1 admits redlock/" + op, "2 admits redlock/" + op, "2 " + outcome, "1 " + outcome, "0 " + outcome}
	}
	expect := func(what string, want []string) {
		t.Helper()
		if got := j.take(); !slices.Equal(got, want) {
			t.Errorf("%s: hooks saw\n  %q\nwant\n  %q", what, got, want)
		}
	}

	l, err := g.TryAcquire(ctx, "h", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	expect("TryAcquire", once(hooks.RedlockAcquire, "succeeded"))
	other := c.group()
	if _, err := other.TryAcquire(ctx, "h", time.Minute); !errors.Is(err, coordination.ErrNotAcquired) {
		t.Fatal(err)
	}
	if _, err := g.TryAcquire(ctx, "h", time.Minute); !errors.Is(err, coordination.ErrNotAcquired) {
		t.Fatal(err)
	}
	expect("contended TryAcquire", once(hooks.RedlockAcquire, "succeeded"))
	actx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	if _, err := g.Acquire(actx, "h", time.Minute); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	cancel()
	expect("Acquire giving up", once(hooks.RedlockAcquire, "canceled"))
	if ok, err := l.Refresh(ctx, time.Minute); !ok || err != nil {
		t.Fatal(ok, err)
	}
	expect("Refresh", once(hooks.RedlockRenew, "succeeded"))

	// Rejected by node 1: node 0 learns Failed, node 2 is never asked,
	// nothing is sent, the lock is untouched.
	sent := func() (n int) {
		for _, p := range c.proxies {
			n += p.Stats().Commands["EVALSHA"] + p.Stats().Commands["EVAL"]
		}
		return n
	}
	before := sent()
	errNo := errors.New("maintenance window")
	j.mu.Lock()
	j.reject[1] = errNo
	j.mu.Unlock()
	if _, err := g.TryAcquire(ctx, "h2", time.Minute); !errors.Is(err, errNo) {
		t.Fatalf("rejected TryAcquire: %v", err)
	}
	if out, err := l.Release(ctx); out != 0 || !errors.Is(err, errNo) {
		t.Fatalf("rejected Release: %v, %v", out, err)
	}
	if ok, err := l.Refresh(ctx, time.Minute); ok || !errors.Is(err, errNo) {
		t.Fatalf("rejected Refresh: %v, %v", ok, err)
	}
	rejected := func(op string) []string { return []string{"0 admits redlock/" + op, "1 rejects " + op, "0 failed"} }
	expect("rejections", slices.Concat(rejected(hooks.RedlockAcquire), rejected(hooks.RedlockRelease), rejected(hooks.RedlockRenew)))
	if n := sent() - before; n != 0 {
		t.Fatalf("rejected operations sent %d scripts", n)
	}
	if l.Remaining() == 0 {
		t.Fatal("a rejected release ended the lock")
	}
	j.mu.Lock()
	delete(j.reject, 1)
	j.mu.Unlock()

	// No quorum for want of nodes: Failed.
	c.proxies[1].BlackHole(faultproxy.Both)
	c.proxies[2].BlackHole(faultproxy.Both)
	if _, err := gShort.TryAcquire(ctx, "h3", time.Minute); err == nil {
		t.Fatal("acquired with 1 of 3 nodes")
	}
	expect("QuorumError", once(hooks.RedlockAcquire, "failed"))
	for _, p := range c.proxies {
		p.CutAll(faultproxy.RST)
		p.Restore()
	}
	if out, err := l.Release(ctx); out != coordination.Released || err != nil {
		t.Fatal(out, err)
	}
	expect("Release", once(hooks.RedlockRelease, "succeeded"))
}
