package redlock_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/testkit/faultproxy"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/redlock"
)

func TestAcquireContendRefreshRelease(t *testing.T) {
	c := miniNodes(t, 3)
	ctx := context.Background()
	a, b := c.group(), c.group()
	l, err := a.TryAcquire(ctx, "job", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.waitHolding("job", l.Token(), 3) // TryAcquire returns once a quorum granted it
	if v := l.Validity(); v <= 9*time.Second || v > 10*time.Second-102*time.Millisecond {
		t.Fatalf("validity %v, want in (9s, 10s - drift]", v)
	}
	if r := l.Remaining(); r <= 0 || r > l.Validity() {
		t.Fatalf("remaining %v, validity %v", r, l.Validity())
	}
	// The context's deadline is the end of the validity.
	dl, hasDL := l.Context().Deadline()
	if left := time.Until(dl); !hasDL || left > l.Validity() || left < l.Remaining()-time.Millisecond {
		t.Fatalf("context deadline in %v (%v), validity %v", left, hasDL, l.Validity())
	}
	if _, err := b.TryAcquire(ctx, "job", 10*time.Second); !errors.Is(err, coordination.ErrNotAcquired) {
		t.Fatalf("second group: %v, want ErrNotAcquired", err)
	}
	if ok, err := l.Refresh(ctx, 20*time.Second); err != nil || !ok {
		t.Fatalf("Refresh = %v, %v", ok, err)
	}
	if l.TTL() != 20*time.Second || l.Validity() <= 19*time.Second {
		t.Fatalf("after refresh: ttl %v validity %v", l.TTL(), l.Validity())
	}
	if dl2, _ := l.Context().Deadline(); !dl2.After(dl.Add(5 * time.Second)) {
		t.Fatalf("after a refresh to 20s the context deadline moved from %v to %v", dl, dl2)
	}
	// Refresh returns once a quorum answered; the last node follows.
	waitFor(t, "every node's TTL at 20s", func() bool {
		for _, m := range c.minis {
			if m.TTL(c.prefix+"job") != 20*time.Second {
				return false
			}
		}
		return true
	})
	out, err := l.Release(ctx)
	if err != nil || out != coordination.Released {
		t.Fatalf("Release = %v, %v; want released", out, err)
	}
	if got := context.Cause(l.Context()); !errors.Is(got, coordination.ErrReleased) {
		t.Fatalf("context cause %v", got)
	}
	c.waitHolding("job", l.Token(), 0)
	// A second release answers without Redis.
	stats := c.proxies[0].Stats().Commands["EVALSHA"]
	if out, err := l.Release(ctx); err != nil || out != coordination.AlreadyReleased {
		t.Fatalf("second Release = %v, %v; want already released", out, err)
	}
	if c.proxies[0].Stats().Commands["EVALSHA"] != stats {
		t.Fatal("second Release asked Redis")
	}
	if ok, err := l.Refresh(ctx, time.Second); err != nil || ok {
		t.Fatalf("Refresh after release = %v, %v", ok, err)
	}
	l2, err := b.TryAcquire(ctx, "job", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// Release's outcome follows the nodes' answers (five nodes, quorum 3):
// released when a quorum deleted the token, not owned when another owner
// holds the key on a quorum, already released when the lock is gone from
// a quorum and nobody holds a quorum. The token is removed wherever it
// still is, and another owner's keys are untouched.
func TestReleaseOutcomes(t *testing.T) { releaseOutcomes(t, miniNodes(t, 5)) }

func releaseOutcomes(t *testing.T, c *cluster) {
	ctx := context.Background()
	g := c.group(redlock.WithNodeTimeout(nodeTimeout))
	const other = "another-owner's-token"
	for _, tc := range []struct {
		name        string
		gone, taken []int // nodes where the key is deleted, or set to another owner
		want        coordination.ReleaseOutcome
	}{
		{"HeldEverywhere", nil, nil, coordination.Released},
		{"GoneFromTwo", []int{0, 1}, nil, coordination.Released},
		{"GoneFromThree", []int{0, 1, 2}, nil, coordination.AlreadyReleased},
		{"GoneEverywhere", []int{0, 1, 2, 3, 4}, nil, coordination.AlreadyReleased},
		{"TakenOnThree", nil, []int{2, 3, 4}, coordination.NotOwned},
		{"TakenOnTwoGoneFromOne", []int{4}, []int{0, 1}, coordination.AlreadyReleased},
		{"TakenOnTwoHeldOnThree", nil, []int{0, 1}, coordination.Released},
	} {
		key := "outcome-" + tc.name
		l, err := g.TryAcquire(ctx, key, time.Minute)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		c.waitHolding(key, l.Token(), 5)
		for _, i := range tc.gone {
			if err := c.direct[i].Del(ctx, c.prefix+key).Err(); err != nil {
				t.Fatal(err)
			}
		}
		for _, i := range tc.taken {
			if err := c.direct[i].Set(ctx, c.prefix+key, other, time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
		}
		out, err := l.Release(ctx)
		if out != tc.want || err != nil {
			t.Fatalf("%s: Release = %v, %v; want %v", tc.name, out, err, tc.want)
		}
		if !errors.Is(context.Cause(l.Context()), coordination.ErrReleased) {
			t.Fatalf("%s: context cause %v, want released", tc.name, context.Cause(l.Context()))
		}
		want := make([]string, 5)
		for _, i := range tc.taken {
			want[i] = other
		}
		// Release returns once the outcome is decided; the other nodes
		// answer right after.
		waitFor(t, tc.name+": the token to be gone and the other owner's keys kept", func() bool {
			return slices.Equal(c.holders(key), want)
		})
		if out, err := l.Release(ctx); out != coordination.AlreadyReleased || err != nil {
			t.Fatalf("%s: second Release = %v, %v; want already released", tc.name, out, err)
		}
	}
}

func TestConstructorRejects(t *testing.T) {
	c := miniNodes(t, 5)
	co := c.coords()
	sameAddr, err := coordination.New(redis.NewClient(&redis.Options{Addr: c.proxies[0].Addr()}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sameAddr.Client().Close() })
	sameClient, err := coordination.New(co[0].Client())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		nodes []*coordination.Coordinator
		opts  []redlock.Option
		arg   string
	}{
		{"none", nil, nil, "nodes"},
		{"one", co[:1], nil, "nodes"},
		{"two", co[:2], nil, "nodes"},
		{"four", co[:4], nil, "nodes"},
		{"nil", []*coordination.Coordinator{co[0], nil, co[2]}, nil, "nodes"},
		{"same coordinator", []*coordination.Coordinator{co[0], co[1], co[0]}, nil, "nodes"},
		{"same client", []*coordination.Coordinator{co[0], co[1], sameClient}, nil, "nodes"},
		{"same address", []*coordination.Coordinator{co[0], co[1], sameAddr}, nil, "nodes"},
		{"nodeTimeout", co[:3], []redlock.Option{redlock.WithNodeTimeout(time.Microsecond)}, "nodeTimeout"},
		{"driftFactor", co[:3], []redlock.Option{redlock.WithDriftFactor(-0.1)}, "driftFactor"},
		{"drift factor NaN-ish", co[:3], []redlock.Option{redlock.WithDriftFactor(0.5)}, "driftFactor"},
		{"fencing node negative", co[:3], []redlock.Option{redlock.WithFencing(-1)}, "fencingNode"},
		{"fencing node beyond", co[:3], []redlock.Option{redlock.WithFencing(3)}, "fencingNode"},
	} {
		g, err := redlock.New(tc.nodes, tc.opts...)
		name, ok := check.ArgumentName(err)
		if g != nil || !errors.Is(err, coordination.ErrInvalidArgument) || !ok || name != tc.arg {
			t.Errorf("%s: %v, %v; want ErrInvalidArgument naming %q", tc.name, g, err, tc.arg)
		}
	}
	if g, err := redlock.New(co, redlock.WithNodeTimeout(time.Millisecond), redlock.WithDriftFactor(0), redlock.WithFencing(4)); err != nil || g.Size() != 5 || g.Quorum() != 3 {
		t.Fatalf("valid group: %v, %v", g, err)
	}
	for i, p := range c.proxies {
		if n := p.Stats().Accepted; n != 0 {
			t.Errorf("node %d: the constructor connected (%d connections)", i, n)
		}
	}
}

// Bad input: an argument error naming the argument, nothing admitted,
// nothing sent.
func TestBadInputSendsNothing(t *testing.T) {
	c := miniNodes(t, 3)
	rec := &testharness.HookRecorder{}
	g, err := redlock.New(c.coords(coordination.WithHooks(rec)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		arg  string
		call func() error
	}{
		{"key", func() error { _, err := g.TryAcquire(ctx, "", time.Second); return err }},
		{"key", func() error { _, err := g.Acquire(ctx, "", time.Second); return err }},
		{"ttl", func() error { _, err := g.TryAcquire(ctx, "k", 999*time.Microsecond); return err }},
		{"ttl", func() error { _, err := g.TryAcquire(ctx, "k", 0); return err }},
		{"ttl", func() error { _, err := g.TryAcquire(ctx, "k", -time.Second); return err }},
		{"ttl", func() error { _, err := g.Acquire(ctx, "k", 2*time.Millisecond); return err }}, // not above the drift
	} {
		err := tc.call()
		if name, ok := check.ArgumentName(err); !errors.Is(err, coordination.ErrInvalidArgument) || !ok || name != tc.arg {
			t.Errorf("got %v, want ErrInvalidArgument naming %q", err, tc.arg)
		}
	}
	for i, p := range c.proxies {
		if n := p.Stats().Accepted; n != 0 {
			t.Errorf("node %d: bad input connected (%d connections)", i, n)
		}
	}
	if got := rec.Ops(); len(got) != 0 {
		t.Errorf("bad input was admitted: %v", got)
	}
	l, err := g.TryAcquire(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c.waitHolding("k", l.Token(), 3)
	before := c.proxies[0].Stats().Commands["EVALSHA"] + c.proxies[0].Stats().Commands["EVAL"]
	ops := len(rec.Ops())
	if _, err := l.Refresh(ctx, 0); !errors.Is(err, coordination.ErrInvalidArgument) {
		t.Errorf("Refresh(0): %v", err)
	}
	if after := c.proxies[0].Stats().Commands["EVALSHA"] + c.proxies[0].Stats().Commands["EVAL"]; after != before {
		t.Errorf("a bad refresh sent %d commands", after-before)
	}
	if got := rec.Ops(); len(got) != ops {
		t.Errorf("a bad refresh was admitted: %v", got[ops:])
	}
	// The recorder is on every node's coordinator: one admission each.
	acq := "redlock:" + hooks.RedlockAcquire + ":succeeded"
	if got := rec.Ops(); !slices.Equal(got, []string{acq, acq, acq}) {
		t.Errorf("hooks saw %v", got)
	}
	if _, err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// KeepAlive renews on a quorum every TTL/3, so the lock outlives its first
// validity; when no quorum confirms a renewal (two of three nodes cut off)
// the lock is lost: its context is cancelled with ErrLost. The node timeout
// is generous (a renewal on a loaded machine must not miss it): what is
// under test is the renewal, not the timeout.
func TestKeepAlive(t *testing.T) {
	c := miniNodes(t, 3)
	ctx := context.Background()
	const ttl = time.Second
	g := c.group(redlock.WithNodeTimeout(ttl / 3))
	start := time.Now()
	l, err := g.TryAcquire(ctx, "ka", ttl)
	if err != nil {
		t.Fatal(err)
	}
	lctx := l.Context()
	l.KeepAlive()
	l.KeepAlive()                                                 // a second call does nothing
	time.Sleep(time.Until(start.Add(ttl + 200*time.Millisecond))) // past the first validity
	if l.Remaining() <= 0 || lctx.Err() != nil {
		t.Fatalf("kept-alive lock: remaining %v, context %v", l.Remaining(), context.Cause(lctx))
	}
	for _, p := range c.proxies[1:] {
		p.BlackHole(faultproxy.Both)
	}
	select {
	case <-lctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the lock was not lost when no quorum confirmed the renewal")
	}
	if !errors.Is(context.Cause(lctx), coordination.ErrLost) || l.Remaining() != 0 {
		t.Fatalf("cause %v, remaining %v", context.Cause(lctx), l.Remaining())
	}
	for _, p := range c.proxies {
		p.CutAll(faultproxy.RST)
		p.Restore()
	}
	if ok, err := l.Refresh(ctx, time.Second); ok || err != nil {
		t.Fatalf("Refresh after the loss = %v, %v", ok, err)
	}
	c.waitHolding("ka", l.Token(), 0)
}

// Verify asks every node: true while a quorum holds the token; a
// QuorumError, the lock unchanged, while failed nodes leave it undecided;
// false, the lock lost and its token removed, once a quorum does not hold
// it; then false without a round.
func TestVerify(t *testing.T) {
	c := miniNodes(t, 3)
	ctx := context.Background()
	g := c.group(redlock.WithNodeTimeout(200 * time.Millisecond))
	l, err := g.TryAcquire(ctx, "verified", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c.waitHolding("verified", l.Token(), 3)
	if ok, err := l.Verify(ctx); !ok || err != nil {
		t.Fatalf("Verify = %v, %v; want true", ok, err)
	}
	if err := c.direct[0].Del(ctx, c.prefix+"verified").Err(); err != nil {
		t.Fatal(err)
	}
	if ok, err := l.Verify(ctx); !ok || err != nil {
		t.Fatalf("Verify held on 2 of 3 = %v, %v; want true", ok, err)
	}
	c.proxies[1].BlackHole(faultproxy.Both)
	var qe *redlock.QuorumError
	if ok, err := l.Verify(ctx); ok || !errors.As(err, &qe) || qe.Op != "verify" {
		t.Fatalf("Verify with node 1 unreachable = %v, %v; want a *QuorumError", ok, err)
	}
	c.proxies[1].Restore()
	if l.Remaining() == 0 || l.Context().Err() != nil {
		t.Fatal("an undecided Verify ended the lock")
	}
	if err := c.direct[1].Del(ctx, c.prefix+"verified").Err(); err != nil {
		t.Fatal(err)
	}
	if ok, err := l.Verify(ctx); ok || err != nil {
		t.Fatalf("Verify held on 1 of 3 = %v, %v; want false", ok, err)
	}
	if got := context.Cause(l.Context()); !errors.Is(got, coordination.ErrLost) {
		t.Fatalf("context cause %v, want ErrLost", got)
	}
	c.waitHolding("verified", l.Token(), 0)
	stats := c.proxies[2].Stats().Commands["EVALSHA"]
	if ok, err := l.Verify(ctx); ok || err != nil {
		t.Fatalf("Verify after the loss = %v, %v; want false", ok, err)
	}
	if c.proxies[2].Stats().Commands["EVALSHA"] != stats {
		t.Fatal("Verify after the loss asked Redis")
	}
}
