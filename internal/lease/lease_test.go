package lease

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testharness"
)

func TestMain(m *testing.M) { testharness.Main(m) }

// coord returns a coordinator whose client is never used: the handles under
// test run fake ops.
func coord(t *testing.T) *coordination.Coordinator {
	t.Helper()
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = client.Close() })
	c, err := coordination.New(client)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var names = Names{Primitive: "test", Renew: "TEST RENEW", Verify: "TEST VERIFY", Release: "TEST RELEASE"}

// A Refresh that starts while a keep-alive renewal is in flight waits for
// it, so the server's last expiry is the caller's (here: none), the handle
// agrees, and the keep-alive stops.
func TestRefreshWaitsForKeepAliveRenewal(t *testing.T) {
	var (
		mu       sync.Mutex
		applied  []int64 // TTLs in the order the fake server applied them
		inflight = make(chan struct{})
		unblock  = make(chan struct{})
		first    = true
	)
	ops := Ops{
		NoExpiry: true,
		Refresh: func(ctx context.Context, ttlMs int64) (bool, error) {
			mu.Lock()
			block := first && ttlMs == 300
			first = first && !block
			mu.Unlock()
			if block {
				close(inflight)
				<-unblock
			}
			mu.Lock()
			applied = append(applied, ttlMs)
			mu.Unlock()
			return true, nil
		},
		Release: func(context.Context) (coordination.ReleaseOutcome, error) { return coordination.Released, nil },
	}
	h := New(coord(t), names, ops, Metrics{}, time.Now(), 300*time.Millisecond)
	h.KeepAlive()
	<-inflight // a renewal to 300 ms is on its way to the server
	done := make(chan error, 1)
	go func() {
		_, err := h.Refresh(context.Background(), 0)
		done <- err
	}()
	time.Sleep(20 * time.Millisecond) // a Refresh not serialized would be applied now
	close(unblock)
	if err := <-done; err != nil {
		t.Fatalf("Refresh(0): %v", err)
	}
	time.Sleep(150 * time.Millisecond) // a keep-alive still running would renew again (every 100 ms)
	mu.Lock()
	got := append([]int64(nil), applied...)
	mu.Unlock()
	if len(got) != 2 || got[0] != 300 || got[1] != 0 {
		t.Fatalf("the server applied TTLs %v; want [300 0]: the renewal, then the caller's Refresh(0), and nothing after", got)
	}
	if r := h.Remaining(); r != Forever {
		t.Fatalf("Remaining = %v, want Forever", r)
	}
	if _, err := h.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A refresh whose outcome is unknown may have shortened the lease on the
// server: the handle keeps the earlier deadline. A refused refresh (an
// error reply) changes nothing.
func TestUncertainRefreshKeepsEarlierDeadline(t *testing.T) {
	var fail error
	ops := Ops{
		Refresh: func(ctx context.Context, ttlMs int64) (bool, error) { return false, fail },
		Release: func(context.Context) (coordination.ReleaseOutcome, error) { return coordination.Released, nil },
	}
	h := New(coord(t), names, ops, Metrics{}, time.Now(), time.Minute)
	ctx := context.Background()

	fail = &coordination.ScriptError{Code: "COORD_BADSTATE", Detail: "refused"}
	if _, err := h.Refresh(ctx, time.Second); err == nil {
		t.Fatal("Refresh did not fail")
	}
	if r := h.Remaining(); r < 58*time.Second {
		t.Fatalf("Remaining after a refused refresh = %v, want about 1m", r)
	}

	fail = context.DeadlineExceeded
	if _, err := h.Refresh(ctx, time.Second); err == nil {
		t.Fatal("Refresh did not fail")
	}
	if r := h.Remaining(); r > time.Second || r < 900*time.Millisecond {
		t.Fatalf("Remaining after an uncertain refresh to 1s = %v, want just under 1s", r)
	}
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
