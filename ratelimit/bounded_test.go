package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// Without WithQueue, the local queue holds DefaultQueueWaiters requests
// whatever their permits: one more is refused at once as a full queue
// (a *WaitError, no RetryAfter: it did not ask Redis), and a request for
// many permits still queues.
func TestDefaultQueueBound(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		l, _ := exhausted(t, b)
		out := make(chan tresult, DefaultQueueWaiters)
		var wg sync.WaitGroup
		for i := range DefaultQueueWaiters {
			startWait(ctx, &wg, l, fmt.Sprint(i), 1, out)
		}
		queued(t, l, DefaultQueueWaiters)
		le, err := l.Wait(ctx, 1)
		if we := wantWaitError(t, "waiter 1001", le, err, 1, false); we.PastDeadline || we.Err != nil || !strings.Contains(we.Error(), "the local queue is full") {
			t.Fatalf("waiter 1001: %+v %q", we, we.Error())
		}
		if s := l.Statistics(); s.QueuedPermits != DefaultQueueWaiters {
			t.Fatalf("after the refusal: %d permits queued, want %d", s.QueuedPermits, DefaultQueueWaiters)
		}
		l.Close()
		for range DefaultQueueWaiters {
			if r := <-out; !errors.Is(r.err, coordination.ErrClosed) {
				t.Fatalf("waiter %s after Close: %v", r.name, r.err)
			}
		}
		wg.Wait()

		// The bound counts waiters: 3000 permits of a 5000-permit window wait.
		big := build(t, b.Coordinator(t), kFixed, "q:big", 5000, 10*time.Second)
		if !acquire(t, big, 5000).Acquired() {
			t.Fatal("not acquired")
		}
		wctx, cancel := context.WithCancel(ctx)
		bout := make(chan tresult, 1)
		startWait(wctx, &wg, big, "big", 3000, bout)
		queued(t, big, 3000)
		cancel()
		if r := <-bout; !errors.Is(r.err, context.Canceled) {
			t.Fatalf("big waiter: %v", r.err)
		}
		wg.Wait()
	})
}

func TestWithMaxPartitionsArgument(t *testing.T) {
	factory := func(string) (*Limiter, error) { return nil, errors.New("unused") }
	for _, n := range []int{0, -1} {
		_, err := NewPartitioned(factory, WithMaxPartitions(n))
		if name, _ := check.ArgumentName(err); name != "maxPartitions" || !errors.Is(err, coordination.ErrInvalidArgument) {
			t.Fatalf("WithMaxPartitions(%d): %v, want an argument error naming maxPartitions", n, err)
		}
	}
	var p *Partitioned
	if name, _ := check.ArgumentName(p.UpdateAll(context.Background(), FixedWindow{Limit: 1, Window: time.Second})); name != "limiter" {
		t.Fatalf("UpdateAll on nil: %q", name)
	}
	var pc *PartitionedConcurrency
	if name, _ := check.ArgumentName(pc.UpdateAll(context.Background(), 1)); name != "limiter" {
		t.Fatalf("UpdateAll on nil: %q", name)
	}
}

// Past the cap, creating a partition evicts the least recently used one
// not in use; its Redis state is kept; partitions in use (a queued Wait, a
// held lease) are never evicted, their calls and leases unaffected.
func TestMaxPartitionsLRU(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		c := b.Coordinator(t)
		ctx := context.Background()
		var mu sync.Mutex
		made := map[string]int{}
		p, err := NewPartitioned(func(part string) (*Limiter, error) {
			mu.Lock()
			made[part]++
			mu.Unlock()
			return New(c, PartitionKey("lru", part), FixedWindow{Limit: 2, Window: 10 * time.Second})
		}, WithMaxPartitions(2))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		allow := func(part string) bool {
			t.Helper()
			d, err := p.Allow(ctx, part, 1)
			if err != nil {
				t.Fatal(err)
			}
			return d.Allowed()
		}
		// a, b, then a again: b is the least recently used.
		if !allow("a") || !allow("b") || !allow("a") {
			t.Fatal("refused")
		}
		if !allow("c") || p.Len() != 2 { // evicts b
			t.Fatalf("len %d, want 2", p.Len())
		}
		// a was kept: refused now (its 2 permits are used), not created again.
		if allow("a") || made["a"] != 1 {
			t.Fatalf("a: a third grant in the window, or made %d times, want 1", made["a"])
		}
		// b comes back (evicting c, the least recently used) and continues
		// its Redis state: one grant left of 2.
		if !allow("b") || allow("b") || made["b"] != 2 || p.Len() != 2 {
			t.Fatalf("b made %d times, len %d", made["b"], p.Len())
		}

		// A partition with a queued Wait is not evicted, whatever its age.
		wctx, cancel := context.WithCancel(ctx)
		out := make(chan error, 1)
		go func() {
			_, err := p.Wait(wctx, "a", 1) // a is exhausted: it queues
			out <- err
		}()
		deadline := time.Now().Add(5 * time.Second)
		for {
			p.p.mu.Lock()
			e := p.p.m["a"]
			p.p.mu.Unlock()
			if e.lim.Statistics().QueuedPermits == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the Wait did not queue")
			}
			time.Sleep(time.Millisecond)
		}
		for _, part := range []string{"d", "e", "f"} {
			allow(part)
		}
		if made["a"] != 1 || p.Len() != 2 {
			t.Fatalf("a made %d times, len %d: the partition in use was evicted", made["a"], p.Len())
		}
		cancel()
		if err := <-out; !errors.Is(err, context.Canceled) || !errors.Is(err, coordination.ErrNotAcquired) {
			t.Fatalf("Wait: %v", err)
		}

		// A held lease keeps its partition; when every partition is in
		// use, the count exceeds the cap until they are idle.
		pc, err := NewPartitionedConcurrency(func(part string) (*ConcurrencyLimiter, error) {
			return NewConcurrency(c, PartitionKey("lruc", part), 1, WithLeaseDuration(200*time.Millisecond))
		}, WithMaxPartitions(1))
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		x, err := pc.TryAcquire(ctx, "x", 1)
		if err != nil {
			t.Fatal(err)
		}
		y, err := pc.TryAcquire(ctx, "y", 1)
		if err != nil {
			t.Fatal(err)
		}
		if pc.Len() != 2 {
			t.Fatalf("len %d, want 2 (both in use)", pc.Len())
		}
		if _, err := y.Release(ctx); err != nil {
			t.Fatal(err)
		}
		// Churn: each new partition evicts the idle one, never x, whose
		// lease renews itself past its duration meanwhile.
		for i := range 6 {
			z, err := pc.TryAcquire(ctx, fmt.Sprint("z", i), 1)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := z.Release(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if ok, err := x.Verify(ctx); !ok || err != nil {
			t.Fatalf("x after the churn: held=%v %v", ok, err)
		}
		if _, err := pc.TryAcquire(ctx, "x", 1); !errors.Is(err, coordination.ErrNotAcquired) {
			t.Fatalf("second lease on x: %v, want refused (x still holds its permit)", err)
		}
		if out, err := x.Release(ctx); err != nil || out != coordination.Released {
			t.Fatalf("release x: %v %v", out, err)
		}
		if pc.Len() != 2 {
			t.Fatalf("len %d, want 2 (x and the last z)", pc.Len())
		}
		if _, err := pc.TryAcquire(ctx, "w", 1); err != nil { // x is idle now: evicted
			t.Fatal(err)
		}
		if pc.Len() != 1 {
			t.Fatalf("len %d, want 1", pc.Len())
		}
	})
}

// Many goroutines over more partitions than the cap: each partition's
// grants are exactly its algorithm's, whatever was evicted meanwhile (the
// Redis state is the truth), and the count comes back to the cap.
func TestMaxPartitionsConcurrent(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		c := b.Coordinator(t)
		ctx := context.Background()
		const (
			maxParts = 4
			parts    = 24
			workers  = 12
			calls    = 40
			limit    = 5
		)
		var created atomic.Int64
		p, err := NewPartitioned(func(part string) (*Limiter, error) {
			created.Add(1)
			return New(c, PartitionKey("lruconc", part), FixedWindow{Limit: limit, Window: time.Minute})
		}, WithMaxPartitions(maxParts))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		pc, err := NewPartitionedConcurrency(func(part string) (*ConcurrencyLimiter, error) {
			return NewConcurrency(c, PartitionKey("lruconcc", part), 2, WithLeaseDuration(5*time.Second))
		}, WithMaxPartitions(maxParts))
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		var (
			mu      sync.Mutex
			tried   = map[string]int{}
			granted = map[string]int{}
			wg      sync.WaitGroup
			fail    atomic.Value
		)
		for w := range workers {
			wg.Go(func() {
				for i := range calls {
					part := fmt.Sprint((w*7 + i*5) % parts)
					d, err := p.Allow(ctx, part, 1)
					if err != nil {
						fail.Store(err)
						return
					}
					mu.Lock()
					tried[part]++
					if d.Allowed() {
						granted[part]++
					}
					mu.Unlock()
					h, err := pc.Acquire(ctx, part, 1)
					if err != nil {
						fail.Store(err)
						return
					}
					if _, err := h.Release(ctx); err != nil {
						fail.Store(err)
						return
					}
				}
			})
		}
		wg.Wait()
		if err := fail.Load(); err != nil {
			t.Fatal(err)
		}
		for part, n := range tried {
			if want := min(n, limit); granted[part] != want {
				t.Fatalf("partition %s: %d granted of %d calls, want %d", part, granted[part], n, want)
			}
		}
		if created.Load() <= parts {
			t.Fatalf("%d limiters created for %d partitions: nothing was evicted", created.Load(), parts)
		}
		// Every lease was released: each partition's 2 permits are free.
		for i := range parts {
			h1, err1 := pc.TryAcquire(ctx, fmt.Sprint(i), 1)
			h2, err2 := pc.TryAcquire(ctx, fmt.Sprint(i), 1)
			if err1 != nil || err2 != nil {
				t.Fatalf("partition %d: %v %v", i, err1, err2)
			}
			_, _ = h1.Release(ctx)
			_, _ = h2.Release(ctx)
		}
		if _, err := p.Allow(ctx, "new", 1); err != nil {
			t.Fatal(err)
		}
		if p.Len() != maxParts || pc.Len() != maxParts {
			t.Fatalf("len %d and %d, want %d", p.Len(), pc.Len(), maxParts)
		}
	})
}

// UpdateAll changes the live partitions and those created afterwards;
// bad settings change nothing.
func TestPartitionedUpdateAll(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		c := b.Coordinator(t)
		ctx := context.Background()
		p, err := NewPartitioned(func(part string) (*Limiter, error) {
			return New(c, PartitionKey("upd", part), FixedWindow{Limit: 2, Window: 10 * time.Second})
		}, WithMaxPartitions(2))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		grants := func(part string, n int) int {
			t.Helper()
			got := 0
			for range n {
				d, err := p.Allow(ctx, part, 1)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed() {
					got++
				}
			}
			return got
		}
		if g := grants("a", 1); g != 1 {
			t.Fatalf("a: %d", g)
		}
		// Refused, with nothing changed: an invalid limit, another algorithm.
		for s, name := range map[Settings]string{
			FixedWindow{Limit: 0, Window: time.Second}: "limit",
			GCRA{Burst: 5, Interval: time.Second}:      "settings",
			nil:                                        "settings",
		} {
			if got, _ := check.ArgumentName(p.UpdateAll(ctx, s)); got != name {
				t.Fatalf("UpdateAll(%#v): argument %q, want %q", s, got, name)
			}
		}
		if g := grants("a", 3); g != 1 {
			t.Fatalf("a after refused updates: %d more grants, want 1 (limit 2)", g)
		}
		if err := p.UpdateAll(ctx, FixedWindow{Limit: 4, Window: 10 * time.Second}); err != nil {
			t.Fatal(err)
		}
		if g := grants("a", 3); g != 2 { // live: 2 used of 4
			t.Fatalf("a after UpdateAll: %d more grants, want 2", g)
		}
		// New partitions, and a evicted then created again, get 4.
		if g := grants("b", 5); g != 4 {
			t.Fatalf("b: %d grants, want 4", g)
		}
		if g := grants("c", 5); g != 4 { // evicts a
			t.Fatalf("c: %d grants, want 4", g)
		}
		if err := p.UpdateAll(ctx, FixedWindow{Limit: 6, Window: 10 * time.Second}); err != nil {
			t.Fatal(err)
		}
		if g := grants("a", 5); g != 2 { // a was not live: its count (4) stays, the limit is 6
			t.Fatalf("a after a second UpdateAll: %d grants, want 2", g)
		}
		p.Close()
		if err := p.UpdateAll(ctx, FixedWindow{Limit: 6, Window: 10 * time.Second}); !errors.Is(err, coordination.ErrClosed) {
			t.Fatalf("UpdateAll after Close: %v", err)
		}

		// Concurrency: the new limit applies to live and later partitions.
		pc, err := NewPartitionedConcurrency(func(part string) (*ConcurrencyLimiter, error) {
			return NewConcurrency(c, PartitionKey("updc", part), 1, WithLeaseDuration(5*time.Second))
		})
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		h, err := pc.TryAcquire(ctx, "x", 1)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := check.ArgumentName(pc.UpdateAll(ctx, 0)); got != "limit" {
			t.Fatalf("UpdateAll(0): argument %q, want limit", got)
		}
		if _, err := pc.TryAcquire(ctx, "x", 1); !errors.Is(err, coordination.ErrNotAcquired) {
			t.Fatalf("x after a refused update: %v", err)
		}
		if err := pc.UpdateAll(ctx, 2); err != nil {
			t.Fatal(err)
		}
		h2, err := pc.TryAcquire(ctx, "x", 1)
		if err != nil {
			t.Fatalf("x after UpdateAll(2): %v", err)
		}
		if _, err := pc.TryAcquire(ctx, "x", 1); !errors.Is(err, coordination.ErrNotAcquired) {
			t.Fatalf("x: a third lease of 2: %v", err)
		}
		if _, err := pc.TryAcquire(ctx, "y", 2); err != nil {
			t.Fatalf("y (new, limit 2): %v", err)
		}
		_, _ = h.Release(ctx)
		_, _ = h2.Release(ctx)
	})
}
