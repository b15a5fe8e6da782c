package semaphore_test

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
	"github.com/coordkit/coordination/semaphore"
)

// newFIFO returns the first-in first-out semaphore of key on coord, with
// opts after WithFIFO(true).
func newFIFO(t testing.TB, coord *coordination.Coordinator, key string, capacity int64, opts ...semaphore.Option) *semaphore.Semaphore {
	t.Helper()
	s, err := semaphore.New(coord, key, capacity, append([]semaphore.Option{semaphore.WithFIFO(true)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// queued returns the permit ids queued for s, head first, read with a raw
// client.
func queued(t testing.TB, raw redis.UniversalClient, s *semaphore.Semaphore) []string {
	t.Helper()
	q, err := raw.ZRange(context.Background(), semaphore.FIFOKeys(s).Full()[1], 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// waitQueued waits until n waiters are queued for s.
func waitQueued(t testing.TB, raw redis.UniversalClient, s *semaphore.Semaphore, n int) {
	t.Helper()
	testharness.WaitFor(t, 10*time.Second, fmt.Sprintf("%d queued waiters", n), func() string {
		if q := queued(t, raw, s); len(q) != n {
			return fmt.Sprintf("%d queued", len(q))
		}
		return ""
	})
}

// enqueueDead queues member for s as a blocked waiter's attempt does,
// alive for live, and never tries again: a waiter that died.
func enqueueDead(t testing.TB, coord *coordination.Coordinator, s *semaphore.Semaphore, member string, live time.Duration) {
	t.Helper()
	e := must(engine.Of(coord))(t)
	g, err := semaphore.FIFOAcquire.Run(context.Background(), e, semaphore.FIFOKeys(s), member, int64(60000), s.Capacity(), live.Milliseconds(), "1")
	if err != nil || g.Acquired {
		t.Fatalf("enqueue: %+v, %v; want refused", g, err)
	}
}

// Waiters queued one after another are granted the permit in that order.
func TestFIFOGrantsInArrivalOrder(t *testing.T) {
	const n = 6
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		s := newFIFO(t, b.Coordinator(t), "fifo-order", 1)
		holder := must(s.TryAcquire(ctx, time.Minute))(t)
		var (
			mu    sync.Mutex
			order []int
			wg    sync.WaitGroup
		)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p, err := s.Acquire(ctx, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				if _, err := p.Release(ctx); err != nil {
					t.Error(err)
				}
			}()
			waitQueued(t, raw, s, i+1)
		}
		release(t, holder)
		wg.Wait()
		if want := []int{0, 1, 2, 3, 4, 5}; !slices.Equal(order, want) {
			t.Fatalf("granted in order %v; want %v", order, want)
		}
		if q := queued(t, raw, s); len(q) != 0 {
			t.Fatalf("queue left: %q", q)
		}
	})
}

// TryAcquire is refused while a live waiter is queued, even when permits
// are free; the queued waiter then gets them.
func TestFIFOTryAcquireDoesNotJumpTheQueue(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord := b.Coordinator(t)
		s := newFIFO(t, coord, "fifo-try", 2)
		holder := must(s.TryAcquireN(ctx, 2, time.Minute))(t)
		const waiter = "P:1:AAAAAAAAAAAAAAAAAAAAAA" // a waiter that never comes back
		enqueueDead(t, coord, s, waiter, time.Minute)
		release(t, holder)
		if p, err := s.TryAcquire(ctx, time.Minute); !errors.Is(err, coordination.ErrNotAcquired) {
			t.Fatalf("TryAcquire with a waiter queued = %v, %v; want ErrNotAcquired", p, err)
		}
		if q := queued(t, b.Raw(t), s); !slices.Equal(q, []string{waiter}) {
			t.Fatalf("queue %q; want only the waiter (TryAcquire never queues)", q)
		}
		// The head's own attempt takes its permit; the other is free to all.
		e := must(engine.Of(coord))(t)
		g, err := semaphore.FIFOAcquire.Run(ctx, e, semaphore.FIFOKeys(s), waiter, int64(60000), int64(2), int64(60000), "1")
		if err != nil || !g.Acquired {
			t.Fatalf("the head's attempt = %+v, %v; want acquired", g, err)
		}
		if q := queued(t, b.Raw(t), s); len(q) != 0 {
			t.Fatalf("queue %q after the head's grant; want empty", q)
		}
		release(t, mustAcquireN(t, s, 1, time.Minute))
	})
}

// A waiter for every permit at the head of the queue is not starved by
// single-permit callers: while it waits, permits freed one at a time are
// taken by nobody (TryAcquire refused, Acquire callers queued behind it),
// and it gets all of them once all are free; the single-permit waiters
// behind it are granted after it releases, in their order.
func TestFIFOLargeRequestIsNotStarved(t *testing.T) {
	const capacity = 3
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		coord := b.Coordinator(t)
		s := newFIFO(t, coord, "fifo-large", capacity)
		var held []*semaphore.Permit
		for range capacity {
			held = append(held, mustAcquireN(t, s, 1, time.Minute))
		}
		big := make(chan *semaphore.Permit, 1)
		go func() {
			p, err := s.AcquireN(ctx, capacity, time.Minute)
			if err != nil {
				t.Error(err)
			}
			big <- p
		}()
		waitQueued(t, raw, s, 1)
		var (
			mu    sync.Mutex
			order []int
			wg    sync.WaitGroup
		)
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p, err := s.Acquire(ctx, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				// Held until the big waiter is done (it released first).
				if _, err := p.Release(ctx); err != nil {
					t.Error(err)
				}
			}()
			waitQueued(t, raw, s, 2+i)
		}
		for i, p := range held[:capacity-1] {
			release(t, p)
			time.Sleep(50 * time.Millisecond) // the woken head's attempt
			if p, err := s.TryAcquire(ctx, time.Minute); !errors.Is(err, coordination.ErrNotAcquired) {
				t.Fatalf("TryAcquire with %d permits free and a waiter queued = %v, %v; want ErrNotAcquired", i+1, p, err)
			}
			if st := must(s.State(ctx))(t); st.Used != int64(capacity-1-i) {
				t.Fatalf("State after %d releases = %+v: a waiter behind the head took a permit", i+1, st)
			}
			select {
			case <-big:
				t.Fatalf("the big waiter was granted with %d permits free", i+1)
			default:
			}
		}
		release(t, held[capacity-1])
		var p *semaphore.Permit
		select {
		case p = <-big:
		case <-time.After(5 * time.Second):
			t.Fatalf("the big waiter still waits with every permit free; queue %q", queued(t, raw, s))
		}
		if p == nil || p.N() != capacity {
			t.Fatalf("the big waiter got %v", p)
		}
		mu.Lock()
		if len(order) != 0 {
			t.Fatalf("single-permit waiters %v were granted before the big one released", order)
		}
		mu.Unlock()
		release(t, p)
		wg.Wait()
		// Both are granted at once (two permits free for them): the order
		// their goroutines record is not the grant order.
		slices.Sort(order)
		if !slices.Equal(order, []int{0, 1}) {
			t.Fatalf("the single-permit waiters granted: %v; want both", order)
		}
	})
}

// A queued waiter that dies (stops trying) leaves the queue once its alive
// time passes, and the waiter behind it gets the permit within the bound:
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
		s := newFIFO(t, coord, "fifo-dead", 1, semaphore.WithFIFOTiming(recheck, live))
		holder := mustAcquireN(t, s, 1, time.Minute)
		const dead = "P:1:DDDDDDDDDDDDDDDDDDDDDD"
		enqueueDead(t, coord, s, dead, live)
		got := make(chan time.Time, 1)
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			p, err := s.Acquire(wctx, time.Minute)
			if err != nil {
				close(got)
				return
			}
			got <- time.Now()
			_, _ = p.Release(ctx)
		}()
		waitQueued(t, raw, s, 2)
		if q := queued(t, raw, s); q[0] != dead {
			t.Fatalf("queue %q; want the dead waiter first", q)
		}
		released := time.Now()
		release(t, holder)
		select {
		case <-got:
			t.Fatal("the waiter behind a live head got the permit")
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
			t.Fatalf("the waiter behind a dead head still waits; queue %q", queued(t, raw, s))
		}
		if slices.Contains(queued(t, raw, s), dead) {
			t.Fatal("the dead waiter is still queued")
		}
	})
}

// A waiter whose context ends leaves the queue at once, and the waiter
// behind it gets the permit at the next release.
func TestFIFOCanceledWaiterLeavesTheQueue(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		s := newFIFO(t, b.Coordinator(t), "fifo-cancel", 1)
		holder := mustAcquireN(t, s, 1, time.Minute)
		cctx, cancel := context.WithCancel(ctx)
		first := make(chan error, 1)
		go func() {
			_, err := s.Acquire(cctx, time.Minute)
			first <- err
		}()
		waitQueued(t, raw, s, 1)
		head := queued(t, raw, s)[0]
		second := make(chan error, 1)
		go func() {
			p, err := s.Acquire(ctx, time.Minute)
			if err == nil {
				_, err = p.Release(ctx)
			}
			second <- err
		}()
		waitQueued(t, raw, s, 2)
		cancel()
		if err := <-first; !errors.Is(err, coordination.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
			t.Fatalf("canceled Acquire = %v; want ErrNotAcquired and context.Canceled", err)
		}
		testharness.WaitFor(t, 5*time.Second, "the canceled waiter leaves the queue", func() string {
			if q := queued(t, raw, s); len(q) != 1 || q[0] == head {
				return fmt.Sprintf("queue %q", q)
			}
			return ""
		})
		start := time.Now()
		release(t, holder)
		select {
		case err := <-second:
			if err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > 900*time.Millisecond {
				t.Fatalf("the next waiter got the permit %v after the release; want it woken at once", d)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the waiter behind a canceled one still waits")
		}
	})
}

// handoffCost returns the commands the coordinator sent, per hand-off,
// while a one-permit semaphore passed from a holder through n blocked
// waiters (each releasing at once), once all were waiting.
func handoffCost(t *testing.T, b *testharness.Backend, n int, fifo bool, opts ...semaphore.Option) float64 {
	t.Helper()
	ctx := context.Background()
	client := b.Client(t)
	raw := b.Raw(t)
	counter := testharness.CountCommands(client)
	coord := must(coordination.New(client, coordination.WithKeyPrefix(b.Prefix())))(t)
	defer func() {
		sctx, cancel := context.WithTimeout(ctx, testharness.ShutdownTimeout)
		defer cancel()
		_ = coord.Shutdown(sctx)
	}()
	e := must(engine.Of(coord))(t)
	key := fmt.Sprintf("handoff-%d-%v", n, fifo)
	if fifo {
		opts = append([]semaphore.Option{semaphore.WithFIFO(true)}, opts...)
	}
	s := must(semaphore.New(coord, key, 1, opts...))(t)
	holder := must(s.TryAcquire(ctx, time.Minute))(t)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := s.Acquire(ctx, time.Minute)
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := p.Release(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	testharness.WaitFor(t, 60*time.Second, "every waiter waits", func() string {
		w, _ := e.Waiters()
		q := 0
		if fifo {
			q = len(queued(t, raw, s))
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
// (a re-check period of a minute); COORD_FIFO_TABLE=1 also measures 1,000
// waiters and logs the default order at 200 and 1,000 (slow).
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
		slow := semaphore.WithRecheck(time.Minute)
		for _, n := range sizes {
			fair := handoffCost(t, b, n, true, slow, semaphore.WithFIFOTiming(time.Minute, 10*time.Minute))
			line := fmt.Sprintf("%s, %d waiters: fifo %.2f commands per hand-off", b.Name, n, fair)
			if n <= 50 || table {
				line += fmt.Sprintf(", default %.2f", handoffCost(t, b, n, false, slow))
			}
			t.Log(line)
			if fair > 4 {
				t.Errorf("%d waiters: %.2f commands per hand-off in the first-in first-out order; want at most 4", n, fair)
			}
		}
	}, testharness.Only("miniredis", "redis8", "cluster"))
}

// A FIFO semaphore's Adopt and ForceRelease use its order's release: a
// forced release, and the release of an adopted permit, wake the queue's
// head at once (the default release would leave it to its re-check, a
// minute here).
func TestFIFOAdoptAndForceReleaseWakeTheHead(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		s := newFIFO(t, b.Coordinator(t), "fifo-force", 1, semaphore.WithRecheck(time.Minute), semaphore.WithFIFOTiming(time.Minute, 10*time.Minute))
		for _, how := range []string{"ForceRelease", "adopted Release"} {
			holder := mustAcquireN(t, s, 1, time.Minute)
			got := make(chan error, 1)
			go func() {
				p, err := s.Acquire(ctx, time.Minute)
				if err == nil {
					_, err = p.Release(ctx)
				}
				got <- err
			}()
			waitQueued(t, raw, s, 1)
			start := time.Now()
			if how == "ForceRelease" {
				if ok, err := s.ForceRelease(ctx, holder.Token()); err != nil || !ok {
					t.Fatalf("ForceRelease = %v, %v", ok, err)
				}
			} else {
				a := must(s.Adopt(ctx, holder.Token()))(t)
				release(t, a)
			}
			select {
			case err := <-got:
				if err != nil {
					t.Fatal(err)
				}
				if d := time.Since(start); d > 900*time.Millisecond {
					t.Fatalf("%s: the head got the permit after %v; want it woken at once", how, d)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("%s: the queue's head was not woken", how)
			}
		}
	})
}

// A FIFO semaphore's key left without a TTL by an operator (PERSIST) gets
// it back from the next grant, as the default order's does, and a permit
// scored outside the layout there is refused with ErrBadState and nothing
// written. (A new user's finding: the grant failed with a Lua runtime
// error, "nonexistent global variable 'expiry'", and the key kept no TTL.)
func TestFIFOPersistedKeyGetsItsTTLBack(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		s := newSem(t, b.Coordinator(t), 3, semaphore.WithFIFO(true))
		p1 := mustAcquireN(t, s, 1, 10*time.Second)
		if err := raw.Persist(ctx, b.Key(key)).Err(); err != nil {
			t.Fatal(err)
		}
		p2, err := s.TryAcquire(ctx, 5*time.Second)
		if err != nil {
			t.Fatalf("TryAcquire on a key without a TTL: %v", err)
		}
		if d := must(raw.PTTL(ctx, b.Key(key)).Result())(t); d <= 5*time.Second || d > 10*time.Second {
			t.Fatalf("PTTL = %v after the grant; want the latest permit's (10 s)", d)
		}
		for _, p := range []*semaphore.Permit{p1, p2} {
			if out := release(t, p); out != coordination.Released {
				t.Fatalf("Release = %v", out)
			}
		}
		corrupted(t, b, s, func(float64) []redis.Z {
			return []redis.Z{{Score: 1e300, Member: "P:1:0f0e0d0c-0b0a-4909-8807-060504030201"}}
		})
		if err := raw.Persist(ctx, b.Key(key)).Err(); err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, b, raw)
		if _, err := s.TryAcquire(ctx, time.Second); !errors.Is(err, coordination.ErrBadState) {
			t.Fatalf("TryAcquire beside a permit scored 1e300: %v, want ErrBadState", err)
		}
		if after := snapshot(t, b, raw); after != before {
			t.Fatalf("the refused grant wrote:\n before %s\n after  %s", before, after)
		}
	})
}
