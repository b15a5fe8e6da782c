package lock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/lock"
)

// newFIFO returns the first-in first-out Mutex of key on coord, with opts
// after WithFIFO(true).
func newFIFO(t testing.TB, coord *coordination.Coordinator, key string, opts ...lock.Option) *lock.Mutex {
	t.Helper()
	m, err := lock.New(coord, key, append([]lock.Option{lock.WithFIFO(true)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// queued returns the owner tokens queued for m's lock, head first, read
// with a raw client.
func queued(t testing.TB, raw redis.UniversalClient, m *lock.Mutex) []string {
	t.Helper()
	q, err := raw.ZRange(context.Background(), lock.FIFOKeys(m).Full()[1], 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// waitQueued waits until n waiters are queued for m's lock.
func waitQueued(t testing.TB, raw redis.UniversalClient, m *lock.Mutex, n int) {
	t.Helper()
	testharness.WaitFor(t, 10*time.Second, fmt.Sprintf("%d queued waiters", n), func() string {
		if q := queued(t, raw, m); len(q) != n {
			return fmt.Sprintf("%d queued", len(q))
		}
		return ""
	})
}

// enqueueDead queues token for m's lock as a blocked waiter's attempt does,
// alive for live, and never tries again: a waiter that died.
func enqueueDead(t testing.TB, coord *coordination.Coordinator, m *lock.Mutex, token string, live time.Duration) {
	t.Helper()
	e, err := engine.Of(coord)
	if err != nil {
		t.Fatal(err)
	}
	g, err := lock.FIFOAcquire.Run(context.Background(), e, lock.FIFOKeys(m), token, int64(60000), live.Milliseconds(), "1")
	if err != nil || g.Acquired {
		t.Fatalf("enqueue: %+v, %v; want refused", g, err)
	}
}

// Waiters queued one after another are granted the lock in that order.
func TestFIFOGrantsInArrivalOrder(t *testing.T) {
	const n = 6
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		m := newFIFO(t, b.Coordinator(t), "fifo-order")
		holder := must(m.TryAcquire(ctx, time.Minute))(t)
		var (
			mu    sync.Mutex
			order []int
			wg    sync.WaitGroup
		)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l, err := m.Acquire(ctx, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				if _, err := l.Release(ctx); err != nil {
					t.Error(err)
				}
			}()
			waitQueued(t, raw, m, i+1)
		}
		if _, err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if want := []int{0, 1, 2, 3, 4, 5}; !slices.Equal(order, want) {
			t.Fatalf("granted in order %v; want %v", order, want)
		}
		if q := queued(t, raw, m); len(q) != 0 {
			t.Fatalf("queue left: %q", q)
		}
	})
}

// TryAcquire is refused while a live waiter is queued, even when the lock
// is free; the queued waiter then gets it.
func TestFIFOTryAcquireDoesNotJumpTheQueue(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord := b.Coordinator(t)
		m := newFIFO(t, coord, "fifo-try")
		holder := must(m.TryAcquire(ctx, time.Minute))(t)
		const waiter = "AAAAAAAAAAAAAAAAAAAAAA" // a token-shaped waiter that never comes back
		enqueueDead(t, coord, m, waiter, time.Minute)
		if _, err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if n, err := b.Raw(t).Exists(ctx, b.Key("fifo-try")).Result(); err != nil || n != 0 {
			t.Fatalf("lock key exists %d, %v; want free", n, err)
		}
		if l, err := m.TryAcquire(ctx, time.Minute); !errors.Is(err, coordination.ErrNotAcquired) {
			t.Fatalf("TryAcquire with a waiter queued = %v, %v; want ErrNotAcquired", l, err)
		}
		if q := queued(t, b.Raw(t), m); !slices.Equal(q, []string{waiter}) {
			t.Fatalf("queue %q; want only the waiter (TryAcquire never queues)", q)
		}
		// The head's own attempt takes it.
		e, _ := engine.Of(coord)
		g, err := lock.FIFOAcquire.Run(ctx, e, lock.FIFOKeys(m), waiter, int64(60000), int64(60000), "1")
		if err != nil || !g.Acquired {
			t.Fatalf("the head's attempt = %+v, %v; want acquired", g, err)
		}
		if q := queued(t, b.Raw(t), m); len(q) != 0 {
			t.Fatalf("queue %q after the head's grant; want empty", q)
		}
	})
}

// A queued waiter that dies (stops trying) leaves the queue once its alive
// time passes, and the waiter behind it gets the lock within the bound:
// the alive time plus a few re-checks.
func TestFIFODeadWaiterLeavesTheQueue(t *testing.T) {
	const (
		recheck = 100 * time.Millisecond
		live    = 400 * time.Millisecond
	)
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord := b.Coordinator(t)
		raw := b.Raw(t)
		m := newFIFO(t, coord, "fifo-dead", lock.WithFIFOTiming(recheck, live))
		holder := must(m.TryAcquire(ctx, time.Minute))(t)
		const dead = "DDDDDDDDDDDDDDDDDDDDDD"
		enqueueDead(t, coord, m, dead, live)
		got := make(chan time.Time, 1)
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			l, err := m.Acquire(wctx, time.Minute)
			if err != nil {
				close(got) // the test failed first, or the Acquire did: see below
				return
			}
			got <- time.Now()
			_, _ = l.Release(ctx)
		}()
		waitQueued(t, raw, m, 2)
		if q := queued(t, raw, m); q[0] != dead {
			t.Fatalf("queue %q; want the dead waiter first", q)
		}
		released := time.Now()
		if _, err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-got:
			t.Fatal("the waiter behind a live head got the lock")
		case <-time.After(2 * recheck):
		}
		b.Advance(live) // miniredis: the server's clock; real servers: a sleep
		select {
		case at, ok := <-got:
			if !ok {
				t.Fatal("the waiter's Acquire failed")
			}
			if d := at.Sub(released); d > live+2*time.Second {
				t.Fatalf("the waiter behind a dead head waited %v; want at most %v and a few re-checks", d, live)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("the waiter behind a dead head still waits; queue %q", queued(t, raw, m))
		}
		if slices.Contains(queued(t, raw, m), dead) {
			t.Fatal("the dead waiter is still queued")
		}
	})
}

// A waiter whose context ends leaves the queue, and the waiter behind it
// gets the lock at the next release.
func TestFIFOCanceledWaiterLeavesTheQueue(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		m := newFIFO(t, b.Coordinator(t), "fifo-cancel")
		holder := must(m.TryAcquire(ctx, time.Minute))(t)
		cctx, cancel := context.WithCancel(ctx)
		first := make(chan error, 1)
		go func() {
			_, err := m.Acquire(cctx, time.Minute)
			first <- err
		}()
		waitQueued(t, raw, m, 1)
		head := queued(t, raw, m)[0]
		second := make(chan error, 1)
		go func() {
			l, err := m.Acquire(ctx, time.Minute)
			if err == nil {
				_, err = l.Release(ctx)
			}
			second <- err
		}()
		waitQueued(t, raw, m, 2)
		cancel()
		if err := <-first; !errors.Is(err, coordination.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
			t.Fatalf("canceled Acquire = %v; want ErrNotAcquired and context.Canceled", err)
		}
		testharness.WaitFor(t, 5*time.Second, "the canceled waiter leaves the queue", func() string {
			if q := queued(t, raw, m); len(q) != 1 || q[0] == head {
				return fmt.Sprintf("queue %q", q)
			}
			return ""
		})
		start := time.Now()
		if _, err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-second:
			if err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > 900*time.Millisecond {
				t.Fatalf("the next waiter got the lock %v after the release; want it woken at once", d)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the waiter behind a canceled one still waits")
		}
	})
}

// handoffCost returns the commands the coordinator sent, per hand-off,
// while the lock passed from a holder through n blocked waiters of m
// (each releasing at once), once all were waiting.
func handoffCost(t *testing.T, b *testharness.Backend, n int, fifo bool, opts ...lock.Option) float64 {
	t.Helper()
	ctx := context.Background()
	client := b.Client(t)
	raw := b.Raw(t)
	counter := testharness.CountCommands(client)
	coord, err := coordination.New(client, coordination.WithKeyPrefix(b.Prefix()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(ctx, testharness.ShutdownTimeout)
		defer cancel()
		_ = coord.Shutdown(sctx)
	}()
	e := must(engine.Of(coord))(t)
	key := fmt.Sprintf("handoff-%d-%v", n, fifo)
	if fifo {
		opts = append([]lock.Option{lock.WithFIFO(true)}, opts...)
	}
	m := must(lock.New(coord, key, opts...))(t)
	holder := must(m.TryAcquire(ctx, time.Minute))(t)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := m.Acquire(ctx, time.Minute)
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := l.Release(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	testharness.WaitFor(t, 30*time.Second, "every waiter waits", func() string {
		w, _ := e.Waiters()
		q := 0
		if fifo {
			q = len(queued(t, raw, m))
		}
		if w != n || (fifo && q != n) {
			return fmt.Sprintf("%d waiters, %d queued", w, q)
		}
		return ""
	})
	time.Sleep(50 * time.Millisecond) // each waiter's attempt after subscribing
	counter.Reset()
	if _, err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	return float64(counter.Count()) / float64(n)
}

// A hand-off in the first-in first-out order costs a constant number of
// commands whatever the number of waiters (the release, the head's
// acquisition, one attempt of the next head), where the default order
// wakes every waiter. The waiters' re-checks are taken out of the figure
// (a re-check period of a minute); COORD_FIFO_TABLE=1 also logs the
// default order at 200 and 1,000 waiters, the first-in first-out order at
// 1,000 and with its own one-second re-check (slow: the default order at
// 1,000 waiters sends about half a million commands).
func TestFIFOHandoffCostIsConstant(t *testing.T) {
	table := os.Getenv("COORD_FIFO_TABLE") != ""
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		sizes := []int{10, 50, 200}
		switch {
		case table:
			sizes = append(sizes, 1000)
		case b.IsMini():
			sizes = sizes[:2] // its Lua interpreter is slow under -race
		}
		for _, n := range sizes {
			fair := handoffCost(t, b, n, true, lock.WithFIFOTiming(time.Minute, 10*time.Minute))
			line := fmt.Sprintf("%s, %d waiters: fifo %.2f commands per hand-off", b.Name, n, fair)
			if n <= 50 || table {
				line += fmt.Sprintf(", default %.2f", handoffCost(t, b, n, false))
			}
			if table {
				line += fmt.Sprintf(", fifo with its 1 s re-check %.2f", handoffCost(t, b, n, true))
			}
			t.Log(line)
			if fair > 4 {
				t.Errorf("%d waiters: %.2f commands per hand-off in the first-in first-out order; want at most 4", n, fair)
			}
		}
	})
}

// The head's acquisition wakes the next head, which learns the new
// holder's TTL: when that holder expires without releasing, the next
// waiter takes the lock at the expiry, without waiting for a re-check (a
// minute here).
func TestFIFONextHeadTakesAnExpiredLock(t *testing.T) {
	const ttl = 300 * time.Millisecond
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		raw := b.Raw(t)
		m := newFIFO(t, b.Coordinator(t), "fifo-expiry", lock.WithFIFOTiming(time.Minute, 10*time.Minute))
		holder := must(m.TryAcquire(ctx, time.Minute))(t)
		first := make(chan *lock.Lock, 1)
		go func() {
			l, err := m.Acquire(ctx, ttl) // never released: it expires
			if err != nil {
				t.Error(err)
			}
			first <- l
		}()
		waitQueued(t, raw, m, 1)
		second := make(chan error, 1)
		go func() {
			l, err := m.Acquire(ctx, time.Minute)
			if err == nil {
				_, err = l.Release(ctx)
			}
			second <- err
		}()
		waitQueued(t, raw, m, 2)
		if _, err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if l := <-first; l == nil {
			t.Fatal("the first waiter did not get the lock")
		}
		granted := time.Now()
		time.Sleep(50 * time.Millisecond) // the next head's attempt after its wake-up
		b.Advance(ttl)                    // miniredis: the server's clock; real servers: a sleep
		select {
		case err := <-second:
			if err != nil {
				t.Fatal(err)
			}
			if d := time.Since(granted); d > ttl+2*time.Second {
				t.Fatalf("the next waiter took the expired lock %v after it was granted (TTL %v)", d, ttl)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the next waiter still waits after the holder expired; queue %q", queued(t, raw, m))
		}
	})
}
