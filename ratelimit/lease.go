package ratelimit

import (
	"context"
	"time"

	"github.com/coordkit/coordination/internal/engine"
)

// Lease is the answer to one [Limiter.Allow] or [Limiter.Wait]: whether
// the permits were granted and, when they were not, when to try again.
//
// Leases of the fixed-window, sliding-window, token-bucket and GCRA limiters
// are consumptive: the permits stay used whatever the caller does, and
// [Lease.Release] does nothing. A concurrency lease holds its permits until
// [Lease.Release] (or until it expires after its renewals stop).
//
// A Lease is a small value; copies refer to the same held permits. The zero
// Lease is not acquired and has no RetryAfter. Its methods are safe for
// concurrent use.
type Lease struct {
	acquired   bool
	hasRetry   bool
	failedOpen bool
	retry      time.Duration
	available  int64
	held       *held
	cause      error // the failure a FailureMode answered
}

// Acquired reports whether the permits were granted.
func (l Lease) Acquired() bool { return l.acquired }

// RetryAfter returns how long to wait before the same request would be
// admitted, as computed by the server from its own clock, and true; or 0 and
// false when no such time is known. It is present (and at least 1 ms) for a
// request refused by a fixed window, sliding window, token bucket or GCRA
// limiter, and covers the whole batch of permits. It is absent for acquired
// leases, for concurrency limiters (nobody knows when a holder finishes),
// for requests larger than the limiter's capacity (they can never be
// admitted), for [Limiter.Wait] requests refused by a full queue without
// asking Redis or evicted from it, and for leases produced by a
// [FailureMode].
//
// It is a computed wait, not a reservation: other callers may take the
// permits first.
func (l Lease) RetryAfter() (time.Duration, bool) {
	if !l.hasRetry {
		return 0, false
	}
	return l.retry, true
}

// Available returns the permits the limiter reported free right after this
// decision (for a concurrency limiter: permits not held), or -1 when the
// server was not asked (an oversized request, a Wait refused by a full
// queue before asking or evicted from it, a failure mode). Other processes
// may have used them since.
func (l Lease) Available() int64 { return l.available }

// FailedOpen reports whether the lease was granted without asking Redis
// because Redis could not be reached and the limiter's failure mode is
// [FailOpen]. Such a lease consumed nothing and holds nothing.
func (l Lease) FailedOpen() bool { return l.failedOpen }

// Release returns a concurrency lease's permits to the limiter (one script
// call, admitted as RATE LIMIT RELEASE) and wakes waiters of the key, here
// and (through Redis Pub/Sub) in other processes. For every other lease
// and an unacquired lease it does nothing and returns nil.
//
// The lease counts as released from the moment Release is called: its
// context is cancelled (cause coordination.ErrReleased) and its renewal
// stops, so a renewal in flight cannot turn the release into a loss. When
// the release fails with a transient error or a cancelled ctx, the error
// is returned and the release is retried in the background until it gets
// an answer or the lease's time has passed; a terminal error (NOPERM)
// leaves the entry to expire after its lease duration. A second Release
// returns nil without asking Redis, and so does a release that finds the
// entry already gone (it expired).
func (l Lease) Release(ctx context.Context) error {
	if l.held == nil {
		return nil
	}
	return l.held.release(ctx)
}

// Context returns a context that a concurrency lease cancels when it is
// released (context.Cause is coordination.ErrReleased), or when it is lost
// (its renewal found it expired, could not reach Redis before the lease ran
// out, or its limiter was closed; the cause then matches
// coordination.ErrLost). Run the protected work under it. For every other
// lease it returns a context that is never cancelled.
func (l Lease) Context() context.Context {
	if l.held == nil {
		return context.Background()
	}
	return l.held.h.Context()
}

// held is one live concurrency lease.
type held struct {
	l *Limiter
	h *engine.Handle
}

func (h *held) release(ctx context.Context) error {
	_, err := h.h.Release(ctx) // Released or AlreadyReleased (expired): the permits are free
	h.l.forget(h)              // released locally whatever the answer
	return err
}
