package ratelimit

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// TestWaitNeverNilErrorWithoutPermits walks every way a Wait can return
// without its permits, on every algorithm: each returns a *WaitError
// (matching coordination.ErrNotAcquired) and no lease, never a nil error.
// The time scale is a minute, so nothing returns during the test and every
// refusal's RetryAfter is tens of seconds.
func TestWaitNeverNilErrorWithoutPermits(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		c := b.Coordinator(t)
		for _, k := range every {
			exhaust := func(name string, opts ...Option) *tlim {
				t.Helper()
				l := build(t, c, k, "wait:"+name+":"+string(k), 2, time.Minute, opts...)
				if !acquire(t, l, 2).Acquired() {
					t.Fatalf("%s/%s: the first 2 permits were refused", k, name)
				}
				return l
			}
			conc := k == kConc

			// The server's retry time (about a minute) is past a deadline
			// 30 s away: Wait returns at once, long before the deadline.
			// A concurrency limiter has no retry time: it waits, and ends
			// with the context (below).
			if !conc {
				l := exhaust("deadline")
				dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				le, err := l.Wait(dctx, 1)
				ended := dctx.Err()
				cancel()
				we := wantWaitError(t, string(k)+": past the deadline", le, err, 1, true)
				if !we.PastDeadline || we.Denied || we.Err != nil || ended != nil || errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("%s: past the deadline: %+v (context ended: %v), want PastDeadline before the deadline", k, we, ended)
				}
				if we.RetryAfter <= 29*time.Second || we.RetryAfter > 75*time.Second {
					t.Fatalf("%s: past the deadline: RetryAfter %v, want past the deadline and at most a window", k, we.RetryAfter)
				}
				if !strings.Contains(err.Error(), "past the context's deadline") {
					t.Fatalf("%s: message %q does not say the deadline cannot be met", k, err)
				}
				if q := l.Statistics().QueuedPermits; q != 0 {
					t.Fatalf("%s: %d permits left queued", k, q)
				}
			}

			// The context ends while queued: cancelled, and (concurrency)
			// its deadline passing.
			{
				l := exhaust("cancel")
				cctx, cancel := context.WithCancel(ctx)
				out := make(chan tresult, 1)
				var wg sync.WaitGroup
				startWait(cctx, &wg, l, "w", 1, out)
				queued(t, l, 1)
				cancel()
				r := <-out
				wg.Wait()
				// It asked Redis before queuing: a consumptive limiter's
				// retry time is known, a concurrency limiter has none.
				we := wantWaitError(t, string(k)+": cancelled while queued", r.le, r.err, 1, !conc)
				if !errors.Is(r.err, context.Canceled) || we.Err != context.Canceled || we.PastDeadline || we.Denied {
					t.Fatalf("%s: cancelled while queued: %+v, want Err context.Canceled", k, we)
				}
				if conc {
					dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
					le, err := l.Wait(dctx, 1)
					cancel()
					we := wantWaitError(t, "concurrency: deadline while queued", le, err, 1, false)
					if !errors.Is(err, context.DeadlineExceeded) || we.PastDeadline {
						t.Fatalf("concurrency: deadline while queued: %+v, want DeadlineExceeded", we)
					}
				}
			}

			// A bounded queue: a request behind a waiter that does not fit
			// fails without asking Redis (no RetryAfter); one that asked
			// first and does not fit carries the server's RetryAfter.
			{
				l := exhaust("full", WithQueue(1, OldestFirst))
				wctx, cancel := context.WithCancel(ctx)
				out := make(chan tresult, 1)
				var wg sync.WaitGroup
				startWait(wctx, &wg, l, "w", 1, out)
				queued(t, l, 1)
				le, err := l.Wait(ctx, 1)
				if we := wantWaitError(t, string(k)+": queue full", le, err, 1, false); we.PastDeadline || we.Err != nil || !strings.Contains(err.Error(), "queue is full") {
					t.Fatalf("%s: queue full: %+v %q", k, we, err)
				}
				cancel()
				<-out
				wg.Wait()
				le, err = l.Wait(ctx, 2) // the queue is empty: it asks, then does not fit
				if we := wantWaitError(t, string(k)+": too large for the queue", le, err, 2, !conc); we.PastDeadline || !strings.Contains(err.Error(), "queue is full") {
					t.Fatalf("%s: too large for the queue: %+v %q", k, we, err)
				}
			}

			// WithQueue(0, ...): one attempt, its refusal an error.
			{
				l := exhaust("noqueue", WithQueue(0, OldestFirst))
				le, err := l.Wait(ctx, 1)
				if we := wantWaitError(t, string(k)+": WithQueue(0)", le, err, 1, !conc); we.PastDeadline || !strings.Contains(err.Error(), "does not queue") {
					t.Fatalf("%s: WithQueue(0): %+v %q", k, we, err)
				}
			}

			// NewestFirst: a newer request evicts the oldest waiter.
			{
				l := exhaust("evict", WithQueue(1, NewestFirst))
				wctx, cancel := context.WithCancel(ctx)
				out := make(chan tresult, 2)
				var wg sync.WaitGroup
				startWait(wctx, &wg, l, "old", 1, out)
				queued(t, l, 1)
				startWait(wctx, &wg, l, "new", 1, out)
				r := <-out
				if r.name != "old" {
					t.Fatalf("%s: %s returned first (%v), want old evicted", k, r.name, r.err)
				}
				if we := wantWaitError(t, string(k)+": evicted", r.le, r.err, 1, false); we.PastDeadline || we.Err != nil || !strings.Contains(r.err.Error(), "evicted") {
					t.Fatalf("%s: evicted: %+v %q", k, we, r.err)
				}
				queued(t, l, 1)
				cancel()
				r = <-out
				wg.Wait()
				if r.name != "new" || !errors.Is(r.err, context.Canceled) {
					t.Fatalf("%s: the newer waiter: %s %v, want cancelled", k, r.name, r.err)
				}
			}

			// Still a grant when one is due, and a grant only.
			{
				l := build(t, c, k, "wait:grant:"+string(k), 2, time.Minute)
				le, err := l.Wait(ctx, 2)
				if err != nil || !le.Acquired() {
					t.Fatalf("%s: Wait on a fresh limiter: %v acquired=%v", k, err, le.Acquired())
				}
				_ = le.Release(ctx)
			}
		}
	})
}

// TestWaitErrorShape checks the error's matching and message without a
// server.
func TestWaitErrorShape(t *testing.T) {
	we := &WaitError{Permits: 3, RetryAfter: 1500 * time.Millisecond, PastDeadline: true, why: whyDeadline}
	if !errors.Is(we, coordination.ErrNotAcquired) || errors.Is(we, context.DeadlineExceeded) {
		t.Fatalf("%v: matching", we)
	}
	if got, want := we.Error(), "coordination: rate limit acquire: wait for 3 permits: not acquired: the server's retry time (after 1.5s) is past the context's deadline"; got != want {
		t.Fatalf("message %q, want %q", got, want)
	}
	ce := &WaitError{Permits: 1, RetryAfter: time.Second, Err: context.Canceled, why: whyCanceled}
	if !errors.Is(ce, context.Canceled) || !errors.Is(ce, coordination.ErrNotAcquired) {
		t.Fatalf("%v: matching", ce)
	}
	if got, want := ce.Error(), "coordination: rate limit acquire: wait for 1 permit: not acquired: the context ended while queued (retry after 1s): context canceled"; got != want {
		t.Fatalf("message %q, want %q", got, want)
	}
	var target *WaitError
	if wrapped := errors.Join(errors.New("x"), ce); !errors.As(wrapped, &target) || target != ce {
		t.Fatal("errors.As does not find a wrapped WaitError")
	}
}

// A WaitError names the operation and the limiter's key as the caller gave
// it, as every error of the library does (it said "ratelimit: wait for ..."
// with no key before).
func TestWaitErrorNamesTheKey(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		lim, err := New(b.Coordinator(t), "api:wait-error", FixedWindow{Limit: 1, Window: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		defer lim.Close()
		if d, err := lim.Allow(ctx, 1); err != nil || !d.Allowed() {
			t.Fatalf("first Allow: %v, %v", d, err)
		}
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err = lim.Wait(wctx, 1)
		var we *WaitError
		want := `coordination: rate limit acquire "api:wait-error": wait for 1 permit: not acquired: the server's retry time (after `
		if !errors.As(err, &we) || !we.PastDeadline || !strings.HasPrefix(err.Error(), want) {
			t.Fatalf("Wait past the window = %v, want a *WaitError beginning %q", err, want)
		}
	})
}
