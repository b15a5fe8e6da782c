package ratelimit

import (
	"context"
	"time"

	"github.com/coordkit/coordination/internal/lease"
)

// Lease is the answer to one [Limiter.Acquire] or [Limiter.Wait]: whether
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
// admitted), and for leases produced by a [FailureMode].
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
// server was not asked (an oversized request, a failure mode). Other
// processes may have used them since.
func (l Lease) Available() int64 { return l.available }

// FailedOpen reports whether the lease was granted without asking Redis
// because Redis could not be reached and the limiter's failure mode is
// [FailOpen]. Such a lease consumed nothing and holds nothing.
func (l Lease) FailedOpen() bool { return l.failedOpen }

// Release returns a concurrency lease's permits to the limiter (one script
// call, admitted as RATE LIMIT RELEASE) and stops its renewal; waiters of
// the key are woken. For every other lease, an unacquired lease, or a lease
// released before, it does nothing and returns nil.
//
// Errors are Redis and network errors; the lease then stays held (and
// renewed): call Release again. When the lease was already gone on the
// server (it expired) Release returns nil.
func (l Lease) Release(ctx context.Context) error {
	if l.held == nil {
		return nil
	}
	return l.held.release(ctx)
}

// Context returns a context that a concurrency lease cancels when it is
// released, or when it is lost (its renewal found it expired, or could not
// reach Redis before the lease ran out; context.Cause then wraps
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
	l      *limiter
	member string
	h      *lease.Handle
}

func (h *held) release(ctx context.Context) error {
	out, err := h.h.Release(ctx)
	if err != nil {
		return err
	}
	h.l.forget(h)
	_ = out // Released or AlreadyReleased (expired): either way the permits are free
	return nil
}
