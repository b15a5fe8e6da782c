package engine_test

import (
	"context"
	"errors"
	"fmt"
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
	e, faults := faultyEngine(t, b)
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
	e, faults := faultyEngine(t, b)
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

// An acquisition whose reply is slow returns a lease with little time
// left (the local deadline counts from before the request was sent, as
// the server's TTL does): its keep-alive renews at once, the first renewal
// being due a third of the TTL after the acquisition was sent, instead of
// a third of the TTL after KeepAlive, when the local deadline has passed
// and the lease, still held on the server, would be reported lost.
func TestKeepAliveAfterASlowAcquisitionRenewsAtOnce(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		e, faults := faultyEngine(t, b)
		ctx := context.Background()
		raw := b.Raw(t)
		w := acquire(t, e, "warm", time.Minute) // cache the scripts
		if _, err := w.Release(ctx); err != nil {
			t.Fatal(err)
		}
		// A 3 s TTL renewed every second; the reply comes 2.3 s after the
		// server set the TTL, leaving about 700 ms.
		const ttl = 3 * time.Second
		var (
			h    *engine.Handle
			left time.Duration
		)
		for try := 1; ; try++ {
			faults.Add(testharness.Fault{SHA: lockcore.Acquire.Hash(), After: 2300 * time.Millisecond})
			h = acquire(t, e, "k", ttl)
			if left = h.Remaining(); left >= 300*time.Millisecond {
				break
			}
			// The delay overran (a loaded machine): again.
			if _, err := h.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if try == 5 {
				t.Fatalf("%d tries returned with less than 300 ms left", try)
			}
		}
		if left > 700*time.Millisecond {
			t.Fatalf("Remaining = %v after a reply 2.3 s late, want at most 700ms", left)
		}
		// The server counts the TTL from when it ran the command, before
		// the reply's delay (miniredis' clock stands still).
		if pttl, err := raw.PTTL(ctx, b.Key("k")).Result(); err != nil || pttl <= 0 || !b.IsMini() && pttl > time.Second {
			t.Fatalf("server PTTL = %v (%v), want at most 1s on a real server", pttl, err)
		}
		h.KeepAlive()
		testharness.WaitFor(t, 2*time.Second, "the renewal of a lease with little time left", func() string {
			if r := h.Remaining(); r < 2*time.Second {
				return fmt.Sprintf("Remaining = %v (cause %v), started with %v left", r, context.Cause(h.Context()), left)
			}
			return ""
		})
		if pttl, err := raw.PTTL(ctx, b.Key("k")).Result(); err != nil || pttl < 2*time.Second {
			t.Fatalf("server PTTL after the renewal = %v (%v), want at least 2s", pttl, err)
		}
		select {
		case <-h.Context().Done():
			t.Fatalf("lost while kept alive: %v", context.Cause(h.Context()))
		case <-time.After(3 * ttl):
		}
		if ok, err := h.Verify(ctx); err != nil || !ok {
			t.Fatalf("Verify after three TTLs of keep-alive = %v, %v", ok, err)
		}
		if out, err := h.Release(ctx); err != nil || out != decode.Released {
			t.Fatalf("Release = %v, %v", out, err)
		}
	})
}

// A Refresh while the keep-alive runs reschedules it on the new timeline:
// to a shorter TTL, the next renewal is due a third of that TTL after the
// refresh (not at the time the old TTL gave, after the new local deadline);
// a refresh whose outcome is unknown and that moved the local deadline
// earlier (it may have run, with a shorter TTL) brings the next renewal
// forward: at once, with the lease's TTL.
func TestKeepAliveFollowsARefresh(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		e, faults := faultyEngine(t, b)
		ctx := context.Background()
		raw := b.Raw(t)
		pttl := func(key string) time.Duration {
			t.Helper()
			d, err := raw.PTTL(ctx, b.Key(key)).Result()
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
		// A 30 s lease kept alive: its next renewal is 10 s away. Refreshed
		// to 3 s, it needs one within 3 s, and every second after.
		const long, short = 30 * time.Second, 3 * time.Second
		h := acquire(t, e, "short", long)
		h.KeepAlive()
		if ok, err := h.Refresh(ctx, short); err != nil || !ok {
			t.Fatalf("Refresh(%v) = %v, %v", short, ok, err)
		}
		select {
		case <-h.Context().Done():
			t.Fatalf("lost while kept alive: %v", context.Cause(h.Context()))
		case <-time.After(3 * short):
		}
		if r, p := h.Remaining(), pttl("short"); r > short || r < short/3 || p > short || p < short/3 {
			t.Fatalf("Remaining = %v, server PTTL = %v after three TTLs of keep-alive, want (1s, 3s]: renewals to the refreshed TTL", r, p)
		}
		if _, err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}

		// An uncertain refresh to 3 s: it ran on the server (the reply was
		// replaced by a timeout), so the lease has 3 s there and the local
		// deadline moved to match; the keep-alive renews to 30 s at once.
		h = acquire(t, e, "uncertain", long)
		h.KeepAlive()
		faults.Add(testharness.Fault{SHA: lockcore.Refresh.Hash(), Forward: true, Err: context.DeadlineExceeded})
		if _, err := h.Refresh(ctx, short); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Refresh = %v, want the injected timeout", err)
		}
		testharness.WaitFor(t, 2*time.Second, "a renewal after the uncertain refresh", func() string {
			if r := h.Remaining(); r < 20*time.Second {
				return fmt.Sprintf("Remaining = %v (cause %v)", r, context.Cause(h.Context()))
			}
			return ""
		})
		if p := pttl("uncertain"); p < 20*time.Second {
			t.Fatalf("server PTTL = %v after the renewal, want the lease's 30s again", p)
		}
		if _, err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// faultyEngine is an engine on b whose script calls fail as faults says;
// its coordinator is shut down when the test ends.
func faultyEngine(t *testing.T, b *testharness.Backend) (*engine.Engine, *testharness.ScriptFaults) {
	t.Helper()
	client := b.Client(t)
	faults := &testharness.ScriptFaults{}
	client.AddHook(faults)
	coord, err := coordination.New(client, coordination.WithKeyPrefix(b.Prefix()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = coord.Shutdown(context.Background()) })
	return eng(t, coord), faults
}
