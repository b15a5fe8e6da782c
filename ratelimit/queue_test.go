package ratelimit

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// queued waits until the limiter's queue holds n permits.
func queued(t testing.TB, l *tlim, n int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for l.Statistics().QueuedPermits != n {
		if time.Now().After(deadline) {
			t.Fatalf("queued permits %d, want %d", l.Statistics().QueuedPermits, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// wantWaitError checks that a Wait returned no lease and a *WaitError for
// permits matching coordination.ErrNotAcquired, with a RetryAfter when
// retry is true (and none otherwise), and returns it.
func wantWaitError(t testing.TB, what string, le Lease, err error, permits int, retry bool) *WaitError {
	t.Helper()
	var we *WaitError
	if !errors.As(err, &we) || !errors.Is(err, coordination.ErrNotAcquired) {
		t.Fatalf("%s: %v (acquired=%v), want a *WaitError matching ErrNotAcquired", what, err, le.Acquired())
	}
	if le != (Lease{}) {
		t.Fatalf("%s: a lease came back with the error: acquired=%v", what, le.Acquired())
	}
	if we.Permits != permits || (we.RetryAfter > 0) != retry || we.RetryAfter < 0 {
		t.Fatalf("%s: %+v, want permits %d and RetryAfter present=%v", what, we, permits, retry)
	}
	return we
}

type tresult struct {
	name string
	le   Lease
	err  error
}

// startWait runs Wait(permits) in a goroutine, reporting to out.
func startWait(ctx context.Context, wg *sync.WaitGroup, l *tlim, name string, permits int, out chan<- tresult) {
	wg.Go(func() {
		le, err := l.Wait(ctx, permits)
		out <- tresult{name, le, err}
	})
}

// exhausted returns a GCRA limiter of burst 1 and a one-minute interval
// whose one permit is taken, and a channel for the results of startWait.
// Nothing comes back by itself during a test: the queue tests hand out
// permits one at a time (serveOne), so that the order they check cannot
// depend on how fast the machine runs. (With a 100-ms interval, a stall
// of the test during the set-up let the permit come back before the last
// waiter had queued.)
func exhausted(t *testing.T, b *testharness.Backend, opts ...Option) (*tlim, chan tresult) {
	t.Helper()
	key := "q"
	if len(opts) == 0 {
		key = "q:default"
	}
	l := build(t, b.Coordinator(t), kGCRA, key, 1, time.Minute, opts...)
	if !acquire(t, l, 1).Acquired() {
		t.Fatal("not acquired")
	}
	return l, make(chan tresult, 3)
}

// serveOne makes one more permit free on an exhausted limiter (a burst of
// burst, the same interval) and returns the result of the waiter it
// serves: Update wakes the head of the queue, which takes the permit; the
// next head finds none and sleeps until the next call.
func serveOne(t *testing.T, l *tlim, burst int, out <-chan tresult) tresult {
	t.Helper()
	update(t, l, GCRA{Burst: burst, Interval: time.Minute})
	r := <-out
	if r.err != nil || !r.le.Acquired() {
		t.Fatalf("%s: %v acquired=%v", r.name, r.err, r.le.Acquired())
	}
	return r
}

func TestQueueOldestFirstOrder(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		// A bounded queue, and the default: DefaultQueueWaiters waiters, oldest first.
		for _, opts := range [][]Option{{WithQueue(10, OldestFirst)}, nil} {
			l, out := exhausted(t, b, opts...)
			var wg sync.WaitGroup
			ctx := context.Background()
			for i, name := range []string{"a", "b", "c"} {
				startWait(ctx, &wg, l, name, 1, out)
				queued(t, l, int64(i+1))
			}
			var order []string
			for i := range 3 {
				order = append(order, serveOne(t, l, 2+i, out).name)
			}
			wg.Wait()
			if got := order[0] + order[1] + order[2]; got != "abc" {
				t.Fatalf("served %s, want abc", got)
			}
			if s := l.Statistics(); s.QueuedPermits != 0 || s.Granted != 4 {
				t.Fatalf("statistics %+v", s)
			}
		}
	})
}

func TestQueueNewestFirstEvictsOldest(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		l, out := exhausted(t, b, WithQueue(2, NewestFirst))
		var wg sync.WaitGroup
		ctx := context.Background()
		startWait(ctx, &wg, l, "a", 1, out)
		queued(t, l, 1)
		startWait(ctx, &wg, l, "b", 1, out)
		queued(t, l, 2)
		startWait(ctx, &wg, l, "c", 1, out) // full: evicts a, the oldest
		r := <-out
		if r.name != "a" {
			t.Fatalf("first result %s err=%v acquired=%v, want a evicted", r.name, r.err, r.le.Acquired())
		}
		if we := wantWaitError(t, "evicted", r.le, r.err, 1, false); we.PastDeadline || we.Denied || we.Err != nil ||
			!strings.Contains(we.Error(), "evicted") {
			t.Fatalf("evicted: %+v %q", we, we.Error())
		}
		queued(t, l, 2)
		var order []string
		for i := range 2 {
			order = append(order, serveOne(t, l, 2+i, out).name)
		}
		wg.Wait()
		if order[0] != "c" || order[1] != "b" {
			t.Fatalf("served %v, want [c b]", order)
		}
	})
}

func TestQueueLimitInPermitsCancellationAndClose(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		l := build(t, b.Coordinator(t), kGCRA, "q", 4, 10*time.Second, WithQueue(3, OldestFirst))
		if !acquire(t, l, 4).Acquired() {
			t.Fatal("not acquired")
		}
		out := make(chan tresult, 4)
		var wg sync.WaitGroup
		cctx, cancel := context.WithCancel(context.Background())
		startWait(cctx, &wg, l, "two", 2, out)
		queued(t, l, 2)
		// 2 more permits do not fit in a queue of 3: refused at once. It
		// did not try Redis (waiters are ahead of it), so no RetryAfter.
		le, err := l.Wait(context.Background(), 2)
		if we := wantWaitError(t, "overflow", le, err, 2, false); we.PastDeadline || we.Err != nil || !strings.Contains(we.Error(), "queue is full") {
			t.Fatalf("overflow: %+v %q", we, we.Error())
		}
		startWait(context.Background(), &wg, l, "one", 1, out) // 1 fits
		queued(t, l, 3)
		cancel() // cancellation removes a waiter
		r := <-out
		if r.name != "two" || !errors.Is(r.err, context.Canceled) {
			t.Fatalf("cancelled waiter: %s %v", r.name, r.err)
		}
		// It asked Redis before queuing: the GCRA's retry time for 2 permits
		// (20 s at most) is known.
		if we := wantWaitError(t, "cancelled waiter", r.le, r.err, 2, true); we.PastDeadline || we.Err != context.Canceled || we.RetryAfter > 20*time.Second {
			t.Fatalf("cancelled waiter: %+v", we)
		}
		queued(t, l, 1)
		l.Close() // Close fails the remaining waiter
		r = <-out
		if r.name != "one" || !errors.Is(r.err, coordination.ErrClosed) {
			t.Fatalf("closed waiter: %s %v", r.name, r.err)
		}
		wg.Wait()
		if _, err := l.Allow(context.Background(), 1); !errors.Is(err, coordination.ErrClosed) || !strings.HasSuffix(err.Error(), ": closed: the limiter was closed") {
			t.Fatalf("Allow after Close: %v", err)
		}
		// Close on nil limiters is a no-op, as on a closed one.
		for _, c := range []interface{ Close() error }{(*Limiter)(nil), (*ConcurrencyLimiter)(nil), (*Partitioned)(nil), (*PartitionedConcurrency)(nil), l} {
			if err := c.Close(); err != nil {
				t.Fatalf("Close on %T: %v", c, err)
			}
		}
		if _, err := l.Wait(context.Background(), 1); !errors.Is(err, coordination.ErrClosed) {
			t.Fatalf("Wait after Close: %v", err)
		}
	})
}

// Wait waits by default (DefaultQueueWaiters waiters); WithQueue(0, ...) makes it
// one attempt; a request larger than the limiter is an argument error at
// once either way.
func TestWaitQueuesByDefaultNeverWithQueueZero(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		l := build(t, b.Coordinator(t), kFixed, "dq", 1, 10*time.Second)
		if le, err := l.Wait(ctx, 1); err != nil || !le.Acquired() {
			t.Fatalf("Wait: %v", err)
		}
		out := make(chan tresult, 1)
		var wg sync.WaitGroup
		wctx, cancel := context.WithCancel(ctx) // no deadline: it may wait
		defer cancel()
		startWait(wctx, &wg, l, "w", 1, out)
		queued(t, l, 1) // no queue option: it waits
		cancel()
		r := <-out
		wg.Wait()
		if !errors.Is(r.err, coordination.ErrNotAcquired) || !errors.Is(r.err, context.Canceled) {
			t.Fatalf("Wait on an exhausted window: %v, want ErrNotAcquired and Canceled", r.err)
		}

		l0 := build(t, b.Coordinator(t), kFixed, "nq", 1, 10*time.Second, WithQueue(0, OldestFirst))
		if le, err := l0.Wait(ctx, 1); err != nil || !le.Acquired() {
			t.Fatalf("Wait: %v", err)
		}
		le, err := l0.Wait(ctx, 1) // WithQueue(0, ...): one attempt, refused with the server's RetryAfter
		if we := wantWaitError(t, "Wait with WithQueue(0)", le, err, 1, true); we.PastDeadline || we.RetryAfter > 10*time.Second {
			t.Fatalf("Wait with WithQueue(0): %+v", we)
		}
		for _, opts := range [][]Option{nil, {WithQueue(5, OldestFirst)}} {
			lq := build(t, b.Coordinator(t), kFixed, "q2", 1, 10*time.Second, opts...)
			_, err = lq.Wait(ctx, 2) // larger than the limiter: it can never be granted
			if name, _ := check.ArgumentName(err); name != "permits" || lq.Statistics().QueuedPermits != 0 {
				t.Fatalf("oversized Wait: %v, want an argument error naming permits", err)
			}
		}
	})
}

func TestConcurrencyQueueWokenByRelease(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		c := b.Coordinator(t)
		l := build(t, c, kConc, "cq", 1, 10*time.Second, WithQueue(4, OldestFirst))
		other := build(t, b.Coordinator(t), kConc, "cq", 1, 10*time.Second) // another process
		ctx := context.Background()
		// Local release wakes the waiter.
		h := acquire(t, l, 1)
		out := make(chan tresult, 1)
		var wg sync.WaitGroup
		startWait(ctx, &wg, l, "w", 1, out)
		queued(t, l, 1)
		start := time.Now()
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
		r := <-out
		if r.err != nil || !r.le.Acquired() {
			t.Fatalf("waiter: %v", r.err)
		}
		// Woken by the release, not by the waiter's re-check (every
		// engine.DefaultRecheck): a bound that a stall of the machine for
		// a second or two cannot reach.
		if d := time.Since(start); d >= engine.DefaultRecheck {
			t.Fatalf("woken after %v; want a wake-up by the release, before the waiter's re-check (%v)", d, engine.DefaultRecheck)
		}
		if err := r.le.Release(ctx); err != nil {
			t.Fatal(err)
		}
		// A release in another process wakes it through Pub/Sub.
		h2 := acquire(t, other, 1)
		if !h2.Acquired() {
			t.Fatal("other not acquired")
		}
		startWait(ctx, &wg, l, "w2", 1, out)
		queued(t, l, 1)
		time.Sleep(50 * time.Millisecond) // let it subscribe and sleep
		start = time.Now()
		if err := h2.Release(ctx); err != nil {
			t.Fatal(err)
		}
		r = <-out
		if r.err != nil || !r.le.Acquired() {
			t.Fatalf("waiter 2: %v", r.err)
		}
		if d := time.Since(start); d >= engine.DefaultRecheck {
			t.Fatalf("woken after %v by a remote release; want Pub/Sub, before the waiter's re-check (%v)", d, engine.DefaultRecheck)
		}
		_ = r.le.Release(ctx)
		wg.Wait()
	})
}
