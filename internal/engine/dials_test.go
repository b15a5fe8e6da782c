package engine_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// dialEngine returns an engine over a new client whose dials connect to a
// miniredis, or are refused (a closed port) while refuse is set.
func dialEngine(t *testing.T, refuse *atomic.Bool) (*engine.Engine, *redis.Client, *miniredis.Miniredis) {
	t.Helper()
	m := miniredis.RunT(t)
	closed := testharness.RefusedAddr(t)
	var d net.Dialer
	client := redis.NewClient(&redis.Options{Addr: m.Addr(), Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
		if refuse.Load() {
			return d.DialContext(ctx, network, closed)
		}
		return d.DialContext(ctx, network, m.Addr())
	}})
	t.Cleanup(func() { client.Close() })
	coord, err := coordination.New(client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = coord.Shutdown(context.Background()) })
	e, err := engine.Of(coord)
	if err != nil {
		t.Fatal(err)
	}
	return e, client, m
}

// ping pings with a context of 1 s: go-redis is still re-dialing a
// refused connection then (5 attempts 100 ms apart, then the command's
// retries), and returns the context's error.
func ping(c *redis.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return c.Ping(ctx).Err()
}

// DialFailure names the refused dial that keeps a call waiting, only while
// the client holds no connection and no dial has connected since the call
// began, and only once WatchDials installed its hook.
func TestDialFailure(t *testing.T) {
	var refuse atomic.Bool
	refuse.Store(true)
	e, client, m := dialEngine(t, &refuse)

	since := time.Now()
	if err := ping(client); err == nil {
		t.Fatal("ping of a closed port succeeded")
	}
	if err := e.DialFailure(since); err != nil {
		t.Fatalf("before WatchDials: %v, want nil", err)
	}

	e.WatchDials()
	e.WatchDials() // once per engine
	since = time.Now()
	err := ping(client)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ping of a closed port with a 1 s context: %v; want the context's error (go-redis still dialing)", err)
	}
	got := e.DialFailure(since)
	var op *net.OpError
	if !errors.As(got, &op) || op.Op != "dial" || !errors.Is(got, syscall.ECONNREFUSED) {
		t.Fatalf("DialFailure after refused dials: %v (%T); want the refused dial", got, got)
	}
	if coordination.IsAmbiguous(got) || !coordination.IsTransient(got) {
		t.Errorf("%v: ambiguous %v, transient %v; want false, true", got, coordination.IsAmbiguous(got), coordination.IsTransient(got))
	}
	if err := e.DialFailure(time.Now().Add(time.Hour)); err != nil {
		t.Errorf("no dial failed since: %v, want nil", err)
	}

	// A dial connected since: the call may have sent.
	refuse.Store(false)
	if err := client.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.DialFailure(since); err != nil {
		t.Errorf("a dial connected since: %v, want nil", err)
	}

	// The client holds a connection (a BLPOP on it) while new dials are
	// refused: the call may have used it.
	refuse.Store(true)
	blocked := make(chan error, 1)
	go func() { blocked <- client.BLPop(context.Background(), 30*time.Second, "list").Err() }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if s := client.PoolStats(); s.TotalConns == 1 && s.IdleConns == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("BLPOP never took the pool's connection")
		}
	}
	since = time.Now()
	if err := ping(client); err == nil {
		t.Fatal("ping with new dials refused succeeded")
	}
	if err := e.DialFailure(since); err != nil {
		t.Errorf("a connection is held: %v, want nil", err)
	}
	if _, err := m.Lpush("list", "x"); err != nil {
		t.Fatal(err)
	}
	if err := <-blocked; err != nil {
		t.Fatalf("BLPOP: %v", err)
	}
}
