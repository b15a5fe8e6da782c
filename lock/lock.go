package lock

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/engine"
)

// kind is the owner-token lock's lease kind: its hook names, scripts and
// instruments (coordination.lock.* with kind=lock).
var kind = &engine.LeaseKind{
	Primitive: "lock",
	AcquireOp: hooks.LockAcquire, RenewOp: hooks.LockRenew, VerifyOp: hooks.LockVerify, ReleaseOp: hooks.LockRelease,
	First: engine.LockTry, Acquire: engine.LockAcquire, Refresh: engine.LockRefresh, Verify: engine.LockVerify, Release: engine.LockRelease,
	ReleaseMark: true,
	Metrics:     engine.LockMetrics,
	Attrs:       []attribute.KeyValue{attribute.String("kind", "lock")},
}

// Lock is a held owner-token lock. It is returned by [TryAcquire] and
// [Acquire] and is safe for concurrent use by multiple goroutines. A nil
// *Lock reports not held.
type Lock struct {
	key   string
	token string
	id    [1]any // the handle's id: the token, as a script argument
	h     *engine.Handle
}

// TryAcquire takes the lock at key for ttl if it is free, in one round
// trip, and returns at once.
//
// key is any non-empty bytes, without the coordinator's prefix. ttl is
// rounded up to whole milliseconds and must be at least 1 ms. The lock
// expires on the server ttl after the script ran unless refreshed
// ([Lock.Refresh], [Lock.KeepAlive]).
//
// Errors name the operation and key (`coordination: lock acquire "KEY":
// ...`) and wrap: coordination.ErrNotAcquired when another owner holds the
// lock; coordination.ErrInvalidArgument (naming ctx, coord, key or ttl)
// for bad input, with nothing sent; an error matching
// coordination.ErrWrongType when key holds a non-string value;
// coordination.ErrBadState when it holds a string that is no owner token
// (someone else's value; nothing is written). An owner token without a
// TTL (PERSISTed) reads as held here (SET NX GET does not report the TTL);
// [Acquire] reports it as ErrBadState; the hook's error when a hook rejects; Redis and
// network errors as go-redis returns them (a NOPERM reply when the ACL
// denies a command the script runs). When the outcome is ambiguous (see
// coordination.IsAmbiguous) the lock may have been taken on the server: a
// background owner-checked release removes it.
func TryAcquire(ctx context.Context, coord *coordination.Coordinator, key string, ttl time.Duration) (*Lock, error) {
	return acquire(ctx, coord, key, ttl, false)
}

// Acquire takes the lock at key for ttl, waiting as long as ctx allows. It
// does not poll: after a contended attempt it subscribes to the key's
// release notifications (one Pub/Sub connection per coordinator, shared by
// every waiter), tries once more, then sleeps until a release is announced
// or the holder's TTL (as the server reported it) runs out, re-checking at
// least every 5 s in case a notification was lost. A holder without a TTL
// (an owner token someone PERSISTed) would never leave: Acquire returns
// coordination.ErrBadState for it instead of waiting. Transient Redis errors
// (see coordination.Classify) are retried with jittered backoff.
//
// Acquire is admitted through hooks once, as LOCK ACQUIRE, however long it
// waits. When ctx ends first it returns an error matching both
// coordination.ErrNotAcquired and ctx's error (context.Cause). Other errors
// are those of [TryAcquire].
func Acquire(ctx context.Context, coord *coordination.Coordinator, key string, ttl time.Duration) (*Lock, error) {
	return acquire(ctx, coord, key, ttl, true)
}

func acquire(ctx context.Context, coord *coordination.Coordinator, key string, ttl time.Duration, block bool) (*Lock, error) {
	e, err := engine.Of(coord)
	if err != nil {
		return nil, err
	}
	if err := engine.CheckKey("key", key); err != nil {
		return nil, err
	}
	if _, err := engine.Millis("ttl", ttl); err != nil {
		return nil, err
	}
	token, err := engine.NewToken()
	if err != nil {
		return nil, err
	}
	l := &Lock{key: key, token: token, id: [1]any{token}}
	h, _, err := e.Acquire(ctx, &engine.AcquireRequest{Kind: kind, Keys: e.Key(key), ID: l.id[:], TTL: ttl, Block: block})
	if err != nil {
		return nil, err
	}
	l.h = h
	return l, nil
}

func (l *Lock) handle() *engine.Handle {
	if l == nil {
		return nil
	}
	return l.h
}

// Key returns the lock's key as given (without the coordinator's prefix).
func (l *Lock) Key() string {
	if l == nil {
		return ""
	}
	return l.key
}

// Token returns the owner token stored in the lock: 36 characters, random
// (UUID v4). It identifies this holder; it is not a fencing token (see
// package fencing for one).
func (l *Lock) Token() string {
	if l == nil {
		return ""
	}
	return l.token
}

// Remaining returns the local estimate of the time the lock is still held:
// the TTL measured from the instant before the last successful acquire or
// refresh request was sent, minus a drift allowance (1% of the TTL plus
// 2 ms). It returns 0 once the lock is released, lost or locally expired,
// without asking Redis.
func (l *Lock) Remaining() time.Duration { return l.handle().Remaining() }

// Context returns a context that is cancelled when the lock is released
// (context.Cause is coordination.ErrReleased), lost, or its local deadline
// passes (the cause matches coordination.ErrLost). Run protected work under
// it. It is created on the first call. A nil *Lock returns an
// already-cancelled context (cause coordination.ErrNotHeld).
func (l *Lock) Context() context.Context { return l.handle().Context() }

// Done returns Context().Done(): a channel closed when the lock is
// released, lost, or expires locally.
func (l *Lock) Done() <-chan struct{} { return l.handle().Context().Done() }

// Refresh resets the lock's TTL to ttl if this owner still holds it, in one
// round trip (admitted as LOCK RENEW). It returns false when the lock was
// lost (expired, or taken by another owner); the handle is then lost and its
// context cancelled. An expired owner's Refresh never touches the next
// owner's lock. After the handle is released or lost, Refresh returns false
// without asking Redis.
//
// Errors: coordination.ErrInvalidArgument for ttl < 1 ms (nothing sent);
// Redis and network errors, which leave the handle held (its local
// deadline still applies, shortened to what ttl gives when the refresh may
// have run).
func (l *Lock) Refresh(ctx context.Context, ttl time.Duration) (bool, error) {
	return l.handle().Refresh(ctx, ttl)
}

// Verify reports whether this owner holds the lock at the instant the
// script runs (one round trip, admitted as LOCK VERIFY; nothing is
// changed). A false answer marks the handle lost; an error changes
// nothing.
func (l *Lock) Verify(ctx context.Context) (bool, error) { return l.handle().Verify(ctx) }

// Release deletes the lock if this owner holds it and wakes waiters, in one
// round trip (admitted as LOCK RELEASE). It returns Released;
// AlreadyReleased when the lock already expired, or this handle released it
// before (then without asking Redis); NotOwned when another owner holds it
// now (nothing is changed); coordination.ReleaseUnknown with the error when
// the release got no answer.
//
// The handle counts as released from the moment Release is called: its
// context is cancelled (cause coordination.ErrReleased) and its keep-alive
// stops. When the release fails with a transient error or a cancelled ctx,
// the error is returned and the owner-checked release is retried in the
// background until it gets an answer or the lock's TTL has passed; a
// terminal error (NOPERM) leaves the lock to expire at its TTL.
func (l *Lock) Release(ctx context.Context) (coordination.ReleaseOutcome, error) {
	out, err := l.handle().Release(ctx)
	return coordination.ReleaseOutcome(out), err
}

// KeepAlive starts renewing the lock in the background every TTL/3 until it
// is released or lost. A renewal that finds the lock gone, a terminal
// error, or the local deadline passing while transient errors persist ends
// the keep-alive and cancels [Lock.Context] with a cause matching
// coordination.ErrLost. Renewals are not admitted through hooks. KeepAlive
// returns at once; calling it again does nothing.
func (l *Lock) KeepAlive() { l.handle().KeepAlive() }
