package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/engine"
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
	l.KeepAlive()
	lctx := l.Context()
	waited := make(chan error, 1)
	go func() {
		_, err := g.Acquire(ctx, "k", 10*time.Second)
		waited <- err
	}()
	waitFor(t, "the waiter to subscribe on every node", func() bool {
		for _, co := range coords {
			if e, _ := engine.Of(co); e.Waiters() != 1 {
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
