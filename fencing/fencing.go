package fencing

import (
	"context"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/fencelock"
)

// Lock is a held fencing-token lock. It is returned by [TryAcquire] and
// [Acquire] and is safe for concurrent use by multiple goroutines. A nil
// *Lock reports not held.
type Lock struct {
	leaseKey string
	token    string
	fence    int64
	h        *engine.Handle
}

// TryAcquire takes the fencing-token lock if it is free and returns at once,
// in one round trip. One script checks that leaseKey is free, increments
// the counter at fenceKey and stores the owner token and the new fencing
// token in leaseKey with the TTL.
//
// leaseKey expires; fenceKey holds the counter and must never expire. Both
// must hash to one Cluster slot (give them one {hash tag}, e.g.
// "{invoice:42}:lease" and "{invoice:42}:fence"); this is checked on the
// client, with the coordinator's prefix applied, whatever the client type.
// ttl is rounded up to whole milliseconds and must be at least 1 ms.
//
// Errors:
//   - coordination.ErrNotAcquired: another owner holds the lease.
//   - coordination.ErrInvalidArgument (nothing sent): nil coord, empty
//     leaseKey or fenceKey, the same key twice, ttl < 1 ms.
//   - coordination.ErrCrossSlot (nothing sent): the keys are in different
//     Cluster slots.
//   - coordination.ErrBadState (nothing written, no lease created): the
//     counter has a TTL, is not a canonical integer, is negative, or is
//     beyond int64; the lease key holds a hash without owner or fence.
//     Also coordination.ErrCounterOverflow when the counter is at
//     9223372036854775807, and coordination.ErrWrongType when a key holds
//     the wrong Redis type.
//   - the hook's error when a hook rejects; Redis and network errors.
//
// When the outcome is ambiguous (see coordination.IsAmbiguous) the lease
// may exist on the server: a background owner-checked release removes it
// (the counter keeps its increment; gaps are allowed).
func TryAcquire(ctx context.Context, coord *coordination.Coordinator, leaseKey, fenceKey string, ttl time.Duration, opts ...AcquireOption) (*Lock, error) {
	return acquire(ctx, coord, leaseKey, fenceKey, ttl, false, opts)
}

// Acquire takes the fencing-token lock, waiting as long as ctx allows,
// without polling: after a contended attempt it subscribes to the lease
// key's release notifications (one shared Pub/Sub connection per
// coordinator), tries again, then sleeps until a release is announced or
// the holder's TTL (as the server reported it) runs out, re-checking at
// least every 5 s. Transient errors are retried with jittered backoff;
// every re-try reuses the same owner token, so a re-sent request never
// draws a second fencing token.
//
// Acquire is admitted through hooks once, as FENCED LOCK ACQUIRE. When ctx
// ends first it returns an error matching coordination.ErrNotAcquired and
// ctx's error. Other errors are those of [TryAcquire].
func Acquire(ctx context.Context, coord *coordination.Coordinator, leaseKey, fenceKey string, ttl time.Duration, opts ...AcquireOption) (*Lock, error) {
	return acquire(ctx, coord, leaseKey, fenceKey, ttl, true, opts)
}

// AcquireOption configures [TryAcquire] and [Acquire].
type AcquireOption func(*acquireOptions) error

type acquireOptions struct {
	holder string
}

// WithHolder records holder, a description of the acquirer (a worker
// identity, a host name), in the lease hash's "holder" field beside the
// owner and fencing tokens, in the same script that takes the lease, so
// that observers (leader election's Leader, coordctl) can say who holds the
// lock. No operation checks it: ownership is the random owner token. Any
// bytes are allowed; it is stored as given. The default is no holder field.
func WithHolder(holder string) AcquireOption {
	return func(o *acquireOptions) error {
		o.holder = holder
		return nil
	}
}

func acquire(ctx context.Context, coord *coordination.Coordinator, leaseKey, fenceKey string, ttl time.Duration, block bool, opts []AcquireOption) (*Lock, error) {
	e, err := engine.Of(coord)
	if err != nil {
		return nil, err
	}
	var o acquireOptions
	if err := engine.Apply(&o, opts); err != nil {
		return nil, err
	}
	keys, err := fencelock.Keys(e, leaseKey, fenceKey)
	if err != nil {
		return nil, err
	}
	if _, err := engine.Millis("ttl", ttl); err != nil {
		return nil, err
	}
	h, token, fence, err := fencelock.Acquire(ctx, e, fencelock.Request{Keys: keys, TTL: ttl, Holder: o.holder, Block: block})
	if err != nil {
		return nil, err
	}
	return &Lock{leaseKey: leaseKey, token: token, fence: fence, h: h}, nil
}

func (l *Lock) handle() *engine.Handle {
	if l == nil {
		return nil
	}
	return l.h
}

// FencingToken returns the lock's fencing token: a positive int64, strictly
// greater than every token handed out before from the same counter (within
// one retained Redis history; see the package documentation for what
// breaks that). It does not change when the lock is refreshed. Pass it with
// every write to the protected resource and let the resource reject older
// tokens ([GuardedSet], or a SQL guard). A nil *Lock returns 0.
func (l *Lock) FencingToken() int64 {
	if l == nil {
		return 0
	}
	return l.fence
}

// Key returns the lease key as given (without the coordinator's prefix).
func (l *Lock) Key() string {
	if l == nil {
		return ""
	}
	return l.leaseKey
}

// Token returns the owner token stored in the lease: 36 random characters
// (UUID v4) identifying this holder. It is not the fencing token.
func (l *Lock) Token() string {
	if l == nil {
		return ""
	}
	return l.token
}

// Remaining returns the local estimate of the time the lock is still held:
// the TTL measured from the instant before the last successful acquire or
// refresh request was sent, minus a drift allowance (1% of the TTL plus
// 2 ms). It is 0 once the lock is released, lost or locally expired; it
// never asks Redis.
func (l *Lock) Remaining() time.Duration { return l.handle().Remaining() }

// Context returns a context cancelled when the lock is released
// (context.Cause is coordination.ErrReleased) or lost or locally expired
// (the cause matches coordination.ErrLost). It is created on the first
// call. Run protected work under it. A
// nil *Lock returns an already-cancelled context.
// Its Deadline is the local deadline (where [Lock.Remaining] reaches zero),
// moving later with each successful renewal, so a database or HTTP client
// given the context bounds its own request by the lease; a lease without
// expiry has no deadline.
func (l *Lock) Context() context.Context { return l.handle().Context() }

// Done returns Context().Done().
func (l *Lock) Done() <-chan struct{} { return l.handle().Context().Done() }

// Refresh resets the lease's TTL to ttl if this owner still holds it, in one
// round trip (admitted as FENCED LOCK RENEW). The fencing token stays the
// same. It returns false when the lease was lost (the handle is then lost
// and its context cancelled); an expired owner's Refresh never touches the
// next owner's lease. After release or loss it returns false without asking
// Redis.
//
// Errors: coordination.ErrInvalidArgument for ttl < 1 ms (nothing sent);
// Redis and network errors, which leave the handle held.
func (l *Lock) Refresh(ctx context.Context, ttl time.Duration) (bool, error) {
	return l.handle().Refresh(ctx, ttl)
}

// Verify reports whether this owner holds the lease at the instant the
// script runs (one round trip, admitted as FENCED LOCK VERIFY; nothing is
// changed). A false answer marks the handle lost.
func (l *Lock) Verify(ctx context.Context) (bool, error) { return l.handle().Verify(ctx) }

// Release deletes the lease if this owner holds it and wakes waiters, in one
// round trip (admitted as FENCED LOCK RELEASE); the counter is kept. It
// returns Released; AlreadyReleased when the lease expired or this handle
// released it before (then without asking Redis); NotOwned when another
// owner holds it now (nothing is changed).
//
// The handle counts as released from the moment Release is called: its
// context is cancelled (cause coordination.ErrReleased) and its keep-alive
// stops. When the release fails with a transient error or a cancelled ctx,
// the error is returned and the owner-checked release is retried in the
// background until it gets an answer or the lease's TTL has passed.
func (l *Lock) Release(ctx context.Context) (coordination.ReleaseOutcome, error) {
	out, err := l.handle().Release(ctx)
	return coordination.ReleaseOutcome(out), err
}

// KeepAlive starts renewing the lease in the background every TTL/3 until it
// is released or lost. A renewal that finds the lease gone, a terminal
// error, or the local deadline passing while transient errors persist ends
// the keep-alive and cancels [Lock.Context] with a cause matching
// coordination.ErrLost. Renewals keep the fencing token and are not
// admitted through hooks. It returns at once; calling it again does
// nothing.
func (l *Lock) KeepAlive() { l.handle().KeepAlive() }
