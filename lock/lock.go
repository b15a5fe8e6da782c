package lock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/lease"
	"github.com/coordkit/coordination/lua"
)

// Lock is a held owner-token lock. It is returned by [TryAcquire] and
// [Acquire] and is safe for concurrent use by multiple goroutines. A nil
// *Lock reports not held.
type Lock struct {
	coord *coordination.Coordinator
	key   string
	token string
	h     *lease.Handle
}

// TryAcquire takes the lock at key for ttl if it is free, in one round
// trip, and returns at once.
//
// ttl is rounded up to whole milliseconds and must be at least 1 ms. The
// lock expires on the server ttl after the script ran unless refreshed
// ([Lock.Refresh], [Lock.KeepAlive]).
//
// Errors: coordination.ErrNotAcquired when another owner holds the lock;
// coordination.ErrInvalidArgument (naming coord, key or ttl) for bad input,
// with nothing sent; an error matching coordination.ErrWrongType when key
// holds a non-string value; the hook's error when a hook rejects; Redis and
// network errors as go-redis returns them. When the reply was lost (timeout,
// cancelled context, broken connection) the lock may have been taken on the
// server: a background owner-checked release removes it.
func TryAcquire(ctx context.Context, coord *coordination.Coordinator, key string, ttl time.Duration) (*Lock, error) {
	return acquire(ctx, coord, key, ttl, false)
}

// Acquire takes the lock at key for ttl, waiting as long as ctx allows. It
// does not poll: after a contended attempt it subscribes to the key's
// release notifications (one Pub/Sub connection per coordinator, shared by
// every waiter), tries once more, then sleeps until a release is announced
// or the holder's TTL (as the server reported it) runs out, re-checking at
// least every 5 s in case a notification was lost. Transient Redis errors
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
	if err := coord.Check(); err != nil {
		return nil, err
	}
	if err := coordination.CheckKey("key", key); err != nil {
		return nil, err
	}
	if _, err := coordination.Millis("ttl", ttl); err != nil {
		return nil, err
	}
	keys, _ := coord.Keys(key) // one key: no slot check to fail
	am, hm := lease.LockInstruments(coord, primitive)
	got, err := lease.Acquire(ctx, coord, lease.AcquireSpec{
		Op: hooks.LockAcquire, Primitive: primitive, Key: key, TTL: ttl,
		Try: func(ctx context.Context, token string, ttlMs int64) (bool, time.Duration, error) {
			cmd, err := coord.EvalKeys(ctx, lua.LockAcquire, keys, token, ttlMs)
			if err != nil {
				return false, 0, err
			}
			return decodeAttempt(cmd)
		},
		Cleanup: func(ctx context.Context, token string) error {
			_, err := lease.ReleaseWith(ctx, coord, lua.LockRelease, key, token)
			return err
		},
		Metrics: am,
	}, block)
	if err != nil {
		return nil, err
	}
	l := &Lock{coord: coord, key: key, token: got.Token}
	l.h = lease.New(coord, lease.Names{Primitive: primitive, Renew: hooks.LockRenew, Verify: hooks.LockVerify, Release: hooks.LockRelease},
		lease.ScriptOpsKeys(coord, keys, coord.Channel(key), got.Token, lease.Scripts{Refresh: lua.LockRefresh, Verify: lua.LockVerify, Release: lua.LockRelease}),
		hm, got.Sent, ttl)
	return l, nil
}

const primitive = "lock"

// decodeAttempt turns the acquire script's reply {1, ttl} / {0, pttl} into
// (acquired, the holder's remaining TTL).
func decodeAttempt(cmd *redis.Cmd) (bool, time.Duration, error) {
	v, err := cmd.Int64Slice()
	if err != nil {
		return false, 0, err
	}
	if len(v) != 2 {
		return false, 0, coordination.UnexpectedReply(lua.LockAcquire.Name(), v)
	}
	if v[0] == 1 {
		return true, 0, nil
	}
	return false, lease.RetryIn(v[1]), nil
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
func (l *Lock) Remaining() time.Duration {
	if l == nil {
		return 0
	}
	return l.h.Remaining()
}

// Context returns a context that is cancelled when the lock is released
// (context.Cause is coordination.ErrReleased), lost, or its local deadline
// passes (the cause wraps coordination.ErrLost). Run protected work under
// it. A nil *Lock returns an already-cancelled context.
func (l *Lock) Context() context.Context {
	if l == nil {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(coordination.ErrNotHeld)
		return ctx
	}
	return l.h.Context()
}

// Done returns Context().Done(): a channel closed when the lock is
// released, lost, or expires locally.
func (l *Lock) Done() <-chan struct{} { return l.Context().Done() }

// Refresh resets the lock's TTL to ttl if this owner still holds it, in one
// round trip (admitted as LOCK RENEW). It returns false when the lock was
// lost (expired, or taken by another owner); the handle is then lost and its
// context cancelled. An expired owner's Refresh never touches the next
// owner's lock. After the handle is released or lost, Refresh returns false
// without asking Redis.
//
// Errors: coordination.ErrInvalidArgument for ttl < 1 ms (nothing sent);
// Redis and network errors, which leave the handle unchanged (its local
// deadline still applies).
func (l *Lock) Refresh(ctx context.Context, ttl time.Duration) (bool, error) {
	if l == nil {
		return false, nil
	}
	return l.h.Refresh(ctx, ttl)
}

// Verify reports whether this owner holds the lock at the instant the
// script runs (one round trip, admitted as LOCK VERIFY; nothing is
// changed). A false answer marks the handle lost.
func (l *Lock) Verify(ctx context.Context) (bool, error) {
	if l == nil {
		return false, nil
	}
	return l.h.Verify(ctx)
}

// Release deletes the lock if this owner holds it and wakes waiters, in one
// round trip (admitted as LOCK RELEASE). It returns Released, or
// AlreadyReleased when the lock already expired or this handle released it
// before (then without asking Redis), or NotOwned when another owner holds
// it now (nothing is changed). An error (network, cancelled ctx) leaves the
// handle as it was: call Release again.
func (l *Lock) Release(ctx context.Context) (coordination.ReleaseOutcome, error) {
	if l == nil {
		return coordination.AlreadyReleased, nil
	}
	return l.h.Release(ctx)
}

// KeepAlive starts renewing the lock in the background every TTL/3 until it
// is released or lost. A renewal that finds the lock gone, a terminal
// error, or the local deadline passing while transient errors persist ends
// the keep-alive and cancels [Lock.Context] with a cause wrapping
// coordination.ErrLost. Renewals are not admitted through hooks. KeepAlive
// returns at once; calling it again does nothing. Release the lock (or let
// it be lost) to stop the background goroutine.
func (l *Lock) KeepAlive() {
	if l != nil {
		l.h.KeepAlive()
	}
}
