package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testharness"
)

// testKind is a lease kind on the owner-token lock's scripts.
var testKind = &engine.LeaseKind{
	Primitive: "test",
	AcquireOp: "TEST ACQUIRE", RenewOp: "TEST RENEW", VerifyOp: "TEST VERIFY", ReleaseOp: "TEST RELEASE",
	Acquire: engine.LockAcquire, Refresh: engine.LockRefresh, Verify: engine.LockVerify, Release: engine.LockRelease,
	Metrics: engine.LockMetrics,
}

func acquire(t *testing.T, e *engine.Engine, key string, ttl time.Duration) *engine.Handle {
	t.Helper()
	tok, _ := engine.NewToken()
	h, _, err := e.Acquire(context.Background(), &engine.AcquireRequest{Kind: testKind, Keys: e.Key(key), ID: []any{tok}, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// A Refresh that starts while a keep-alive renewal is in flight waits for
// it, so the server's last expiry is the caller's.
func TestRefreshWaitsForKeepAliveRenewal(t *testing.T) {
	b := testharness.Get(t, testharness.FirstFlavor(t))
	client := b.Client(t)
	faults := &testharness.ScriptFaults{}
	client.AddHook(faults)
	coord, _ := coordination.New(client, coordination.WithKeyPrefix(b.Prefix()))
	e := eng(t, coord)
	ctx := context.Background()
	w := acquire(t, e, "warm", time.Minute) // cache the scripts
	if _, err := w.Refresh(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	h := acquire(t, e, "k", 300*time.Millisecond)
	started := make(chan struct{}, 1)
	faults.Add(refreshFault(started))
	h.KeepAlive()
	<-started // a renewal to 300 ms is on its way to the server
	if ok, err := h.Refresh(ctx, 10*time.Minute); err != nil || !ok {
		t.Fatalf("Refresh = %v, %v", ok, err)
	}
	pttl, err := b.Client(t).PTTL(ctx, b.Key("k")).Result()
	if err != nil || pttl < 9*time.Minute {
		t.Fatalf("the server's TTL is %v (%v), want the caller's 10m applied last", pttl, err)
	}
	if _, err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func refreshFault(started chan struct{}) testharness.Fault {
	return testharness.Fault{SHA: engine.LockRefresh.Hash(), Started: started, Before: 100 * time.Millisecond}
}

// A refresh whose outcome is unknown may have shortened the lease on the
// server: the handle keeps the earlier deadline. A refused refresh (a
// terminal error reply) changes nothing.
func TestUncertainRefreshKeepsEarlierDeadline(t *testing.T) {
	b := testharness.Get(t, "miniredis")
	client := b.Client(t)
	faults := &testharness.ScriptFaults{}
	client.AddHook(faults)
	coord, _ := coordination.New(client, coordination.WithKeyPrefix(b.Prefix()))
	e := eng(t, coord)
	ctx := context.Background()
	h := acquire(t, e, "k", time.Minute)

	faults.Add(testharness.Fault{Err: redisErr("NOPERM refused")})
	if _, err := h.Refresh(ctx, time.Second); err == nil {
		t.Fatal("Refresh did not fail")
	}
	if r := h.Remaining(); r < 58*time.Second {
		t.Fatalf("Remaining after a refused refresh = %v, want about 1m", r)
	}
	faults.Add(testharness.Fault{Forward: true, Err: context.DeadlineExceeded})
	if _, err := h.Refresh(ctx, time.Second); err == nil {
		t.Fatal("Refresh did not fail")
	}
	if r := h.Remaining(); r > time.Second || r < 900*time.Millisecond {
		t.Fatalf("Remaining after an uncertain refresh to 1s = %v, want just under 1s", r)
	}
	faults.Add(testharness.Fault{Err: context.DeadlineExceeded})
	if _, err := h.Refresh(ctx, time.Hour); err == nil {
		t.Fatal("Refresh did not fail")
	}
	if r := h.Remaining(); r > time.Second {
		t.Fatalf("an uncertain refresh to 1h lengthened the deadline to %v", r)
	}
	if _, err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// The handle creates no context and no timer until asked; Remaining is
// computed from the stored deadline; a context asked for after the local
// deadline passed is already cancelled with ErrLost.
func TestContextIsLazyAndExpiryIsLocal(t *testing.T) {
	b := testharness.Get(t, "miniredis")
	e := eng(t, b.Coordinator(t))
	h := acquire(t, e, "k", 50*time.Millisecond)
	if r := h.Remaining(); r <= 0 || r > 50*time.Millisecond {
		t.Fatalf("Remaining = %v", r)
	}
	time.Sleep(60 * time.Millisecond)
	if h.Remaining() != 0 || h.Held() {
		t.Fatal("still held after the local deadline")
	}
	if !errors.Is(context.Cause(h.Context()), coordination.ErrLost) {
		t.Fatalf("cause = %v, want ErrLost", context.Cause(h.Context()))
	}
	var nilHandle *engine.Handle
	if nilHandle.Remaining() != 0 || !errors.Is(context.Cause(nilHandle.Context()), coordination.ErrNotHeld) {
		t.Fatal("a nil handle must report not held")
	}
	if out, err := nilHandle.Release(context.Background()); err != nil || out != engine.AlreadyReleased {
		t.Fatal("nil handle release")
	}
	nilHandle.KeepAlive() // does nothing, never panics
	if ok, err := nilHandle.Refresh(context.Background(), time.Second); ok || err != nil {
		t.Fatal("nil handle refresh")
	}
}
