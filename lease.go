package coordination

import (
	"context"
	"fmt"
	"time"

	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/sentinel"
)

// Lease is one held lease: the part every held handle of the library has
// in common. A lock ([github.com/coordkit/coordination/lock.Lock]), a
// hash-field lease ([github.com/coordkit/coordination/lock.FieldLease]), a
// fencing lock ([github.com/coordkit/coordination/fencing.Lock]), a
// read-write lease ([github.com/coordkit/coordination/rwlease.Lease]), a
// semaphore permit ([github.com/coordkit/coordination/semaphore.Permit]),
// a concurrency lease
// ([github.com/coordkit/coordination/ratelimit.ConcurrencyLease]) and a
// Redlock held on a quorum of nodes
// ([github.com/coordkit/coordination/redlock.Lock], whose server side is
// the quorum: its documentation gives where that changes what the methods
// do) embed it and add only their own accessors (a fencing token, a mode,
// a number of permits, a validity).
//
// A lease is identified by its owner token, which every refresh, verify
// and release checks on the server, so an expired holder never touches
// its successor's lease. Its local deadline is measured from the instant
// before the request that set the TTL was sent, minus a drift allowance
// (1% of the TTL plus 2 ms, at most half the TTL): the holder stops
// trusting the lease before the server expires it.
//
// Release semantics, the same for every lease: the lease counts as
// released from the moment [Lease.Release] is called (its context is
// cancelled with cause [ErrReleased] and its keep-alive stops, so a
// renewal in flight cannot turn the release into a loss); when the release
// fails with a transient error or a cancelled context, the caller gets the
// error and the owner-checked release is retried in the background, bounded
// by the lease's remaining time and about a minute; a terminal error
// (NOPERM) leaves the lease to expire at its TTL; a second Release returns
// [AlreadyReleased] without asking Redis.
//
// Hooks see each Refresh, Verify and Release once, as the primitive's
// RENEW, VERIFY and RELEASE operations (for example "LOCK RENEW", see
// package hooks);
// keep-alive renewals are not admitted.
//
// A Lease is safe for concurrent use by multiple goroutines. It is
// obtained only from a primitive's acquire functions; the zero Lease holds
// nothing.
type Lease struct {
	key, token string
	h          *engine.Handle
}

// initLease fills dst, a *Lease, with the held handle h of the lease at key
// (as the caller gave it) held by token; see engine.InitLease.
func initLease(dst any, key, token string, h *engine.Handle) {
	*dst.(*Lease) = Lease{key: key, token: token, h: h}
}

func (l *Lease) handle() *engine.Handle {
	if l == nil {
		return nil
	}
	return l.h
}

// Key returns the lease's key as the caller gave it (without the
// coordinator's prefix).
func (l *Lease) Key() string {
	if l == nil {
		return ""
	}
	return l.key
}

// Token returns the holder's owner token: 22 characters of base64url,
// random (a version 4 UUID; a ratelimit.ConcurrencyLease's, 22 random
// base64url characters).
// It identifies this holder in the stored lease (the primitive's package
// documentation gives where); it is not a fencing token.
func (l *Lease) Token() string {
	if l == nil {
		return ""
	}
	return l.token
}

// Remaining returns the local estimate of the time the lease is still
// held: its TTL from the instant before the last successful acquire or
// refresh request was sent, minus the drift allowance. It returns 0 once
// the lease is released, lost or past its local deadline, without asking
// Redis. Every lease has a TTL of at least 1 ms.
func (l *Lease) Remaining() time.Duration { return l.handle().Remaining() }

// Context returns a context that is cancelled when the lease is released
// (context.Cause is [ErrReleased]), or lost: found gone by a refresh,
// verify or keep-alive renewal, or past its local deadline (the cause
// matches [ErrLost]). Run the protected work under it. Its Deadline is the
// local deadline (where [Lease.Remaining] reaches zero), moving later with
// each successful renewal, so a database or HTTP client given the context
// bounds its own request by the lease. It is created on the first call; the zero Lease returns a
// context already cancelled (cause [ErrNotHeld]).
func (l *Lease) Context() context.Context { return l.handle().Context() }

// Refresh resets the lease's TTL to ttl if this owner still holds it, in
// one round trip. It returns false when the lease was lost (expired, or
// taken by another owner); the lease is then lost and its context
// cancelled. An expired owner's Refresh never revives its lease or touches
// anyone else's. After the lease is released or lost, Refresh returns false
// without asking Redis. Refresh waits for a keep-alive renewal in flight,
// so the last expiry set is the caller's.
//
// ttl is rounded up to whole milliseconds and must be at least 1 ms, for
// every lease, and at most 2562047h47m16.854s (about 292 years: the
// longest whole number of milliseconds a time.Duration holds), the bound of
// every duration the library sends, acquisition TTLs and options included.
//
// Errors: [ErrInvalidArgument] naming ttl, with nothing admitted or sent
// (`coordination: lock renew "KEY": invalid argument ttl: ...`, naming the
// operation and the key as every error of the refresh does); the hook's
// error when a hook rejects; Redis and network errors, which leave the
// lease held: when the refresh may have run anyway (a timeout, a lost
// connection) its local deadline becomes the earlier of the old one and
// the one ttl gives.
func (l *Lease) Refresh(ctx context.Context, ttl time.Duration) (bool, error) {
	return l.handle().Refresh(ctx, ttl)
}

// Verify reports whether this owner holds the lease at the instant the
// script runs, in one round trip; nothing is written. A false answer marks
// the lease lost; an error changes nothing. After the lease is released or
// lost it returns false without asking Redis.
func (l *Lease) Verify(ctx context.Context) (bool, error) { return l.handle().Verify(ctx) }

// Release deletes the lease if this owner holds it and wakes waiters, in
// one round trip. It returns [Released]; [AlreadyReleased] when the lease
// had expired, was released before (then without asking Redis), or a
// re-sent request found its own release done; [NotOwned] when another
// owner holds it now (nothing is changed; never for a semaphore permit,
// which belongs to its holder alone); [ReleaseUnknown] with the error when
// the release got no answer. See [Lease] for what a failed release does; a
// hook's rejection leaves the lease as it was.
func (l *Lease) Release(ctx context.Context) (ReleaseOutcome, error) {
	out, err := l.handle().Release(ctx)
	return ReleaseOutcome(out), err
}

// KeepAlive starts renewing the lease in the background until it is
// released or lost, every TTL/3 on the lease's own timeline: a renewal is
// due TTL/3 after the request that set the current TTL was sent (the
// acquisition's, then each successful renewal's or [Lease.Refresh]'s; a
// Refresh whose outcome is unknown, which may have shortened the lease,
// brings it forward). A KeepAlive called when that moment has passed
// (called late, or after an acquisition whose reply was slow, leaving less
// than TTL/3) renews at once, rather than TTL/3 later, past the local
// deadline. A leader's term renews every half lease duration the same
// way. A renewal that finds the lease gone, a terminal error, or the local
// deadline passing while transient errors persist ends the keep-alive and
// cancels [Lease.Context] with a cause matching [ErrLost]. KeepAlive
// returns at once; calling it again does nothing. Release the lease (or
// let it be lost) to stop the background goroutine.
func (l *Lease) KeepAlive() { l.handle().KeepAlive() }

// KeepAliveFor is [Lease.KeepAlive] with a maximum hold: maxHold after the
// call, if the lease is still held, renewal stops and [Lease.Context] is
// cancelled with a cause matching [ErrLost] that names the maximum hold;
// the lease is not released, and ends on the server at its TTL (at most
// one TTL later), unless [Lease.Release] is called, which still deletes it
// if this owner holds it. It bounds how long a holder that is alive but
// stuck (deadlocked, waiting forever on a resource) keeps others out:
// without it, the keep-alive renews for as long as the process runs.
// Choose maxHold above the longest legitimate hold. Each call starts its
// own bound (the earliest ends the lease) and the keep-alive, as
// KeepAlive. It returns at once.
//
// Errors: [ErrInvalidArgument] naming "maxHold" when it is not positive
// (nothing is started).
func (l *Lease) KeepAliveFor(maxHold time.Duration) error {
	if maxHold <= 0 {
		return check.InvalidArgument("maxHold", "must be positive, got %v", maxHold)
	}
	h := l.handle()
	if h == nil {
		return nil // the zero Lease holds nothing
	}
	h.KeepAlive()
	cause := &sentinel.LostError{Reason: fmt.Sprintf("the keep-alive's maximum hold (%v) passed; the lease is no longer renewed and ends at its TTL", maxHold)}
	t := time.AfterFunc(maxHold, func() { h.Lose(cause) })
	context.AfterFunc(h.Context(), func() { t.Stop() })
	return nil
}
