package semaphore

import (
	"context"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/engine"
)

// Permit is one holder's share of a semaphore: N permits taken together by
// one acquisition, released together. It is returned by the acquire
// methods of [Semaphore] and is safe for concurrent use by multiple
// goroutines. A nil *Permit reports not held.
type Permit struct {
	sem   *Semaphore
	n     int64
	token string
	id    [1]any // the handle's id: the member, as a script argument
	h     *engine.Handle
}

func (p *Permit) handle() *engine.Handle {
	if p == nil {
		return nil
	}
	return p.h
}

// Key returns the semaphore's key (without the coordinator's prefix).
func (p *Permit) Key() string {
	if p == nil {
		return ""
	}
	return p.sem.key
}

// Token returns the holder's owner token: 36 characters, random (UUID v4).
// The permit's member in the sorted set is "P:<N>:<Token>".
func (p *Permit) Token() string {
	if p == nil {
		return ""
	}
	return p.token
}

// N returns the number of permits held (1 for TryAcquire and Acquire).
func (p *Permit) N() int64 {
	if p == nil {
		return 0
	}
	return p.n
}

// Remaining returns the local estimate of the time the permits are still
// held: the TTL measured from the instant before the last successful
// acquire or refresh request was sent, minus a drift allowance (1% of the
// TTL plus 2 ms). It returns [Forever] for permits without expiry, and 0
// once they are released, lost or locally expired, without asking Redis.
func (p *Permit) Remaining() time.Duration { return p.handle().Remaining() }

// Context returns a context that is cancelled when the permits are
// released (context.Cause is coordination.ErrReleased, from the moment
// [Permit.Release] is called), or lost: found gone by [Permit.Refresh],
// [Permit.Verify] or a keep-alive renewal, or past their local deadline
// (the cause matches coordination.ErrLost). Run the protected work under
// it. It is created on the first call. A nil *Permit returns an
// already-cancelled context (cause coordination.ErrNotHeld).
// Its Deadline is the local deadline (where [Permit.Remaining] reaches zero),
// moving later with each successful renewal, so a database or HTTP client
// given the context bounds its own request by the lease; a lease without
// expiry has no deadline.
func (p *Permit) Context() context.Context { return p.handle().Context() }

// Done returns Context().Done().
func (p *Permit) Done() <-chan struct{} { return p.Context().Done() }

// Refresh sets the permits to expire ttl from now if this holder still
// holds them, in one round trip (admitted as SEMAPHORE RENEW). A ttl of 0
// removes the expiry (see the package documentation). It returns false when
// the permits expired or were removed; the permit is then lost and its
// context cancelled. An expired holder's Refresh never revives its permits
// or touches anyone else's. After the permit is released or lost, Refresh
// returns false without asking Redis.
//
// Errors: coordination.ErrInvalidArgument naming ttl (negative, or between
// 0 and 1 ms), with nothing sent; the hook's error when a hook rejects;
// Redis and network errors, which leave the permit held: when the refresh
// may have run anyway (a timeout, a lost connection) its local deadline
// becomes the earlier of the old one and the one ttl gives. Refresh waits
// for a keep-alive renewal in flight, so the last expiry set is the
// caller's.
func (p *Permit) Refresh(ctx context.Context, ttl time.Duration) (bool, error) {
	return p.handle().Refresh(ctx, ttl)
}

// Verify reports whether this holder's permits are live at the instant the
// script runs (one round trip, admitted as SEMAPHORE VERIFY; nothing is
// written). A false answer marks the permit lost; an error changes
// nothing. After the permit is released or lost it returns false without
// asking Redis.
func (p *Permit) Verify(ctx context.Context) (bool, error) { return p.handle().Verify(ctx) }

// Release gives the permits back and wakes waiters, in one round trip
// (admitted as SEMAPHORE RELEASE). It returns coordination.Released, or
// coordination.AlreadyReleased when the permits had expired, were released
// before (then without asking Redis), or when a re-sent request found its
// own release already done. It never returns NotOwned: a permit belongs to
// its holder alone.
//
// The permit counts as released from the moment Release is called: its
// context is cancelled (cause coordination.ErrReleased) and its keep-alive
// stops, so a renewal in flight cannot turn the release into a loss. When
// the release fails with a transient error or a cancelled ctx, the error
// is returned and the owner-checked release is retried in the background
// until it gets an answer, the permits' TTL has passed or about a minute
// has passed (see the package documentation); a terminal error (NOPERM)
// leaves the permits to expire at their TTL. A hook's rejection leaves the
// permit as it was.
func (p *Permit) Release(ctx context.Context) (coordination.ReleaseOutcome, error) {
	out, err := p.handle().Release(ctx)
	return coordination.ReleaseOutcome(out), err
}

// KeepAlive starts renewing the permits in the background every TTL/3
// until they are released or lost. A renewal that finds them gone, a
// terminal error, or the local deadline passing while transient errors
// persist ends the keep-alive and cancels [Permit.Context] with a cause
// matching coordination.ErrLost. Renewals are not admitted through hooks.
// KeepAlive returns at once; calling it again, or on permits without
// expiry, does nothing. Release the permit (or let it be lost) to stop the
// background goroutine. On a nil *Permit it does nothing.
func (p *Permit) KeepAlive() {
	if p != nil {
		p.h.KeepAlive()
	}
}
