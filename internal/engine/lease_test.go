package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/lockcore"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/internal/timing"
)

// testKind is a lease kind on the owner-token lock's scripts.
var testKind = &engine.LeaseKind{
	Primitive: "test",
	AcquireOp: "TEST ACQUIRE", RenewOp: "TEST RENEW", VerifyOp: "TEST VERIFY", ReleaseOp: "TEST RELEASE",
	Acquire: lockcore.Acquire, Refresh: lockcore.Refresh, Verify: lockcore.Verify, Release: lockcore.Release,
	Metrics: lockcore.Metrics,
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
	// A long lease renewed every 100 ms: the renewals have seconds of
	// margin, however late the keep-alive's timer fires.
	h := acquire(t, e, "k", 10*time.Second)
	started, done := make(chan struct{}, 1), make(chan struct{}, 1)
	faults.Add(testharness.Fault{SHA: lockcore.Refresh.Hash(), Started: started, Done: done, Before: 100 * time.Millisecond})
	h.KeepAliveEvery(100)
	select {
	case <-started: // a renewal to 10 s is on its way to the server
	case <-time.After(10 * time.Second):
		t.Fatal("the keep-alive never renewed")
	}
	if ok, err := h.Refresh(ctx, 10*time.Minute); err != nil || !ok {
		t.Fatalf("Refresh = %v, %v", ok, err)
	}
	select {
	case <-done:
	default:
		t.Fatal("Refresh returned before the keep-alive renewal in flight")
	}
	pttl, err := b.Client(t).PTTL(ctx, b.Key("k")).Result()
	if err != nil || pttl < 9*time.Minute {
		t.Fatalf("the server's TTL is %v (%v), want the caller's 10m applied last", pttl, err)
	}
	if _, err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
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
	sent := time.Now() // the refresh's deadline counts from its send, no earlier than this
	if _, err := h.Refresh(ctx, time.Second); err == nil {
		t.Fatal("Refresh did not fail")
	}
	// Just under 1 s from the send: the drift allowance (well under 100
	// ms for 1 s) and the time the call took (a loaded machine may take
	// long to return) less.
	if r, took := h.Remaining(), time.Since(sent); r > time.Second || r < 900*time.Millisecond-took {
		t.Fatalf("Remaining after an uncertain refresh to 1s = %v (%v after the call began), want just under 1s", r, took)
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
	const ttl = time.Second
	before := time.Now()
	h := acquire(t, e, "k", ttl)
	r := h.Remaining()
	// The deadline is ttl less the drift allowance from the instant the
	// acquisition was sent: between before and now.
	if hi, lo := ttl-timing.Drift(ttl), before.Add(ttl-timing.Drift(ttl)).Sub(time.Now()); r <= 0 || r > hi || r < lo {
		t.Fatalf("Remaining = %v, want in [%v, %v]", r, lo, hi)
	}
	time.Sleep(r) // until the local deadline
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
	if out, err := nilHandle.Release(context.Background()); err != nil || out != decode.AlreadyReleased {
		t.Fatal("nil handle release")
	}
	nilHandle.KeepAlive() // does nothing, never panics
	if ok, err := nilHandle.Refresh(context.Background(), time.Second); ok || err != nil {
		t.Fatal("nil handle refresh")
	}
}
