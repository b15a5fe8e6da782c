package history

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordination/internal/testkit/faultproxy"
)

// TestFaultsEndWhileAMatchRuns ends a fault schedule while a proxy runs one
// of its Match functions: the proxy holds its lock there, and the Match
// takes the schedule's, so end must not hold the schedule's lock while it
// calls the proxy (Fired, Remove). It once did, and TestHistories hung.
func TestFaultsEndWhileAMatchRuns(t *testing.T) {
	m := miniredis.RunT(t)
	// Not Start: if end deadlocks, closing the proxy (it takes the lock
	// held by the stuck Match) would hang the test instead of failing it.
	p, err := faultproxy.New(m.Addr())
	if err != nil {
		t.Fatal(err)
	}
	f := &faults{stop: make(chan struct{}), rng: rand.New(rand.NewPCG(1, 2))}
	inner := f.chance(1, true)
	entered, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	f.applied = append(f.applied, p.Apply(faultproxy.DelayReply(func(c faultproxy.Command) bool {
		if !faultproxy.Scripts()(c) {
			return false
		}
		once.Do(func() { close(entered) })
		<-proceed // the proxy's lock is held meanwhile
		return inner(c)
	}, time.Millisecond, 1)))

	rdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
	evaled := make(chan error, 1)
	go func() { evaled <- rdb.Eval(context.Background(), "return 1", nil).Err() }()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the script did not reach the rule's Match")
	}
	type ended struct {
		n      int
		resent []time.Time
	}
	out := make(chan ended, 1)
	go func() {
		n, resent := f.end()
		out <- ended{n, resent}
	}()
	// Let end run as far as it can (with the old order: take f.mu and
	// block in Fired) before the Match goes on to take f.mu.
	time.Sleep(100 * time.Millisecond)
	close(proceed)
	select {
	case e := <-out:
		if e.n != 1 || len(e.resent) != 1 {
			t.Errorf("end() = %d faults, %d resend instants; want 1 and 1", e.n, len(e.resent))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("end deadlocked with a Match running (lock order: proxy, then faults)")
	}
	if err := <-evaled; err != nil {
		t.Errorf("EVAL through the proxy: %v", err)
	}
	rdb.Close()
	p.Close()
}
