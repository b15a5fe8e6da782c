package semaphore

import (
	"context"
	"fmt"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/lease"
)

// Permit is one holder's share of a semaphore: N permits taken together by
// one acquisition, released together. It is returned by the acquire
// methods of [Semaphore] and is safe for concurrent use by multiple
// goroutines. A nil *Permit reports not held.
type Permit struct {
	sem    *Semaphore
	n      int64
	token  string
	member string
	h      *lease.Handle
}

func (s *Semaphore) newPermit(n int64, got lease.Acquired, ttl time.Duration) *Permit {
	p := &Permit{sem: s, n: n, token: got.Token, member: member(n, got.Token)}
	p.h = lease.New(s.coord, lease.Names{Primitive: primitive, Renew: hooks.SemaphoreRenew, Verify: hooks.SemaphoreVerify, Release: hooks.SemaphoreRelease},
		lease.Ops{
			Refresh: func(ctx context.Context, ttlMs int64) (bool, error) {
				ok, _, err := s.refresh(ctx, p.member, ttlMs)
				return ok, err
			},
			Verify: func(ctx context.Context) (bool, error) {
				ok, _, err := s.verify(ctx, p.member)
				return ok, err
			},
			Release:  p.release,
			NoExpiry: true,
		}, s.hm, got.Sent, ttl)
	return p
}

// release is the handle's owner-checked release. When it fails, whether
// the permits were given back is unknown: the permit is marked lost and
// the release is retried in the background (bounded, see lease.Cleanup).
func (p *Permit) release(ctx context.Context) (coordination.ReleaseOutcome, error) {
	out, _, err := p.sem.release(ctx, p.member)
	if err != nil {
		p.h.Lose(fmt.Errorf("%w: release failed, retrying in the background: %w", coordination.ErrLost, err))
		lease.Cleanup(p.sem.coord, "release", func(ctx context.Context) error {
			_, _, err := p.sem.release(ctx, p.member)
			return err
		})
	}
	return out, err
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
func (p *Permit) Remaining() time.Duration {
	if p == nil {
		return 0
	}
	return p.h.Remaining()
}

// Context returns a context that is cancelled when the permits are released
// (context.Cause is coordination.ErrReleased), lost, found gone by
// [Permit.Refresh] or [Permit.Verify], or when their local deadline passes
// or a release fails (the cause wraps coordination.ErrLost). Run the
// protected work under it. A nil *Permit returns an already-cancelled
// context.
func (p *Permit) Context() context.Context {
	if p == nil {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(coordination.ErrNotHeld)
		return ctx
	}
	return p.h.Context()
}

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
	if p == nil {
		return false, nil
	}
	return p.h.Refresh(ctx, ttl)
}

// Verify reports whether this holder's permits are live at the instant the
// script runs (one round trip, admitted as SEMAPHORE VERIFY; nothing is
// written). A false answer marks the permit lost. After the permit is
// released or lost it returns false without asking Redis.
func (p *Permit) Verify(ctx context.Context) (bool, error) {
	if p == nil {
		return false, nil
	}
	return p.h.Verify(ctx)
}

// Release gives the permits back and wakes waiters, in one round trip
// (admitted as SEMAPHORE RELEASE). It returns coordination.Released, or
// coordination.AlreadyReleased when the permits had expired, were released
// before (then without asking Redis), or when a re-sent request found its
// own release already done. It never returns NotOwned: a permit belongs to
// its holder alone.
//
// When Release fails (network error, cancelled ctx) the outcome is
// unknown: the permit is marked lost, its context cancelled, and the
// release is retried in the background for about a minute (see the package
// documentation). Calling Release again is allowed. A hook's rejection
// leaves the permit as it was.
func (p *Permit) Release(ctx context.Context) (coordination.ReleaseOutcome, error) {
	if p == nil {
		return coordination.AlreadyReleased, nil
	}
	return p.h.Release(ctx)
}

// KeepAlive starts renewing the permits in the background every TTL/3
// until they are released or lost. A renewal that finds them gone, a
// terminal error, or the local deadline passing while transient errors
// persist ends the keep-alive and cancels [Permit.Context] with a cause
// wrapping coordination.ErrLost. Renewals are not admitted through hooks.
// KeepAlive returns at once; calling it again, or on permits without
// expiry, does nothing. Release the permit (or let it be lost) to stop the
// background goroutine.
func (p *Permit) KeepAlive() {
	if p != nil {
		p.h.KeepAlive()
	}
}
