package fencing

import (
	"context"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/fencelock"
)

// Lock is a held fencing-token lock. It is returned by [TryAcquire] and
// [Acquire] and is safe for concurrent use by multiple goroutines. Its
// lease methods (Release, Refresh, Verify, KeepAlive, Context, Done,
// Remaining, Key: the lease key, Token: the owner token) are those of the
// embedded [coordination.Lease], admitted through hooks as FENCED LOCK RENEW,
// VERIFY and RELEASE; it adds [Lock.FencingToken].
type Lock struct {
	coordination.Lease
	fence int64
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
	l := &Lock{fence: fence}
	engine.InitLease(&l.Lease, leaseKey, token, h)
	return l, nil
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
