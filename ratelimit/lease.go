package ratelimit

import (
	"context"
	"time"

	"github.com/coordkit/coordination/internal/engine"
)

// Lease is the answer to one [Limiter.Allow], [Limiter.Wait] or
// [Limiter.Reserve]: whether the permits were granted and, when they were
// not, when to try again.
//
// Leases of the fixed-window, sliding-window, token-bucket, GCRA and
// composite limiters are consumptive: the permits stay used whatever the
// caller does, and [Lease.Release] does nothing. A concurrency lease holds
// its permits until [Lease.Release] (or until it expires after its
// renewals stop). A reservation's permits are charged at their estimate
// until [Lease.Settle] charges the real cost.
//
// A Lease is a small value; copies refer to the same held permits. The zero
// Lease is not acquired and has no RetryAfter. Its methods are safe for
// concurrent use.
type Lease struct {
	acquired   bool
	hasRetry   bool
	failedOpen bool
	retry      time.Duration
	denied     bool
	available  int64
	held       *held
	cause      error // the failure a FailureMode answered
	// A consumptive grant: its limiter, id and permits (for refunds), and
	// for a reservation its settlement state.
	lim     *Limiter
	id      *string
	permits int
	res     *reservation
}

// Acquired reports whether the permits were granted.
func (l Lease) Acquired() bool { return l.acquired }

// Denied reports whether the request was refused because its identity is
// on the limiter's deny list ([WithDenyList]). Such a lease has no
// RetryAfter and an Available of -1.
func (l Lease) Denied() bool { return l.denied }

// RetryAfter returns how long to wait before the same request would be
// admitted, as computed by the server from its own clock, and true; or 0 and
// false when no such time is known. It is present (and at least 1 µs) for a
// request refused by a fixed window, sliding window, token bucket or GCRA
// limiter, and covers the whole batch of permits. It is absent for acquired
// leases, for concurrency limiters (nobody knows when a holder finishes),
// for denied identities ([Lease.Denied]), and for leases produced by a
// [FailureMode]. ([Limiter.Wait] returns no refused lease: its
// [*WaitError] carries the RetryAfter.)
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
// server was not asked (a denied identity, a failure mode). For a composite limiter it is the smallest of its components'.
// Other processes may have used them since.
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
// coordination.ErrLost). Run the protected work under it. Its Deadline is
// the lease's local deadline, moving later with each renewal, so a client
// given the context bounds its own request by the lease. For every other
// lease it returns a context that is never cancelled and has no deadline.
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

// refund gives a consumptive grant's permits back (one script call, not
// admitted: the middleware calls it when a later policy refuses the
// request). The key applies it only while its ring still holds the grant's
// id (at most 5 other grants in between) and only once; anything else
// does nothing. It reports whether the permits were given back.
func (l Lease) refund(ctx context.Context) (bool, error) {
	if !l.acquired || l.lim == nil || l.id == nil || l.res != nil {
		return false, nil
	}
	lim := l.lim
	lim.settingsMu.RLock()
	defer lim.settingsMu.RUnlock()
	sp := lim.sp
	args := make([]any, 3+len(sp.tail))
	args[0], args[1], args[2] = lim.op(sp, 'r'), l.permits, *newID()+*l.id
	copy(args[3:], sp.tail)
	r, err := engine.RateLimitAdjust.Run(ctx, lim.e, lim.keys, args...)
	if err != nil {
		return false, err
	}
	lim.available.Store(r.Available)
	return r.Applied, nil
}
