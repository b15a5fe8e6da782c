package fencing

import (
	"context"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/fencelock"
)

// Mutex is a fencing-token lock on a lease key and a counter key. Create it
// with [New]; it holds no state besides its keys and settings, so any number
// of Mutex values (in any number of processes) may share the keys, and one
// Mutex may be acquired again after each release. It is safe for concurrent
// use by multiple goroutines: each [Mutex.TryAcquire] or [Mutex.Acquire]
// that succeeds returns a [Lock] of its own, with its own owner token and
// fencing token. The zero value is not usable.
type Mutex struct {
	e                  *engine.Engine
	leaseKey, fenceKey string
	keys               engine.Keys // both keys, prefixed and slot-checked once
	holder             string
}

// Option configures a [Mutex].
type Option func(*config) error

type config struct {
	holder string
}

// WithHolder records holder, a description of the acquirer (a worker
// identity, a host name), in the lease hash's "holder" field beside the
// owner and fencing tokens, in the same script that takes the lease, so
// that observers (leader election's Leader, coordctl) can say who holds the
// lock. No operation checks it: ownership is the random owner token. Any
// bytes are allowed, stored as given, at most 256 (the bound of every
// identity the library stores): a longer holder makes [New] fail with an
// error wrapping coordination.ErrInvalidArgument naming "holder". The
// default, as an empty holder, is no holder field.
func WithHolder(holder string) Option {
	return func(c *config) error {
		if err := check.Size("holder", len(holder), check.MaxIdentityBytes); err != nil {
			return err
		}
		c.holder = holder
		return nil
	}
}

// New returns the fencing-token lock on leaseKey and fenceKey (without the
// coordinator's prefix; any non-empty bytes). It sends nothing to Redis.
//
// leaseKey expires; fenceKey holds the counter and must never expire. Both
// must hash to one Cluster slot (give them one {hash tag}, e.g.
// "{invoice:42}:lease" and "{invoice:42}:fence"); this is checked here, on
// the client, with the coordinator's prefix applied, whatever the client
// type.
//
// Errors:
//   - coordination.ErrInvalidArgument, naming the argument: nil coord, an
//     empty or longer than 1 KiB leaseKey or fenceKey, the same key twice,
//     an invalid option (a holder longer than 256 bytes).
//   - coordination.ErrInvalidArgument: the prefixed keys are in different Cluster
//     slots.
func New(coord *coordination.Coordinator, leaseKey, fenceKey string, opts ...Option) (*Mutex, error) {
	e, err := engine.Of(coord)
	if err != nil {
		return nil, err
	}
	keys, err := fencelock.Keys(e, leaseKey, fenceKey)
	if err != nil {
		return nil, err
	}
	var cfg config
	if err := check.Apply(&cfg, opts); err != nil {
		return nil, err
	}
	return &Mutex{e: e, leaseKey: leaseKey, fenceKey: fenceKey, keys: keys, holder: cfg.holder}, nil
}

// check returns an error wrapping coordination.ErrInvalidArgument for a nil
// or zero Mutex, which [New] never returns.
func (m *Mutex) check() error {
	if m == nil || m.e == nil {
		return check.InvalidArgument("mutex", "must not be nil; use fencing.New")
	}
	return nil
}

// LeaseKey returns the lease key as given to [New] (without the
// coordinator's prefix).
func (m *Mutex) LeaseKey() string { return m.leaseKey }

// FenceKey returns the counter key as given to [New] (without the
// coordinator's prefix).
func (m *Mutex) FenceKey() string { return m.fenceKey }

// TryAcquire takes the fencing-token lock if it is free and returns at once,
// in one round trip. One script checks that the lease key is free,
// increments the counter at the fence key and stores the owner token and
// the new fencing token (and the holder, see [WithHolder]) in the lease key
// with the TTL. ttl is rounded up to whole milliseconds and must be at
// least 1 ms.
//
// Errors:
//   - coordination.ErrNotAcquired: another owner holds the lease.
//   - coordination.ErrInvalidArgument (nothing sent): ttl < 1 ms; a nil or
//     zero Mutex.
//   - coordination.ErrBadState (nothing written, no lease created): the
//     counter is not a string, has a TTL, is not a canonical integer, is
//     negative, is beyond int64 or is at 9223372036854775807 (the error
//     names the counter key); the lease key holds a hash without owner or
//     fence, another owner's hash without a TTL (PERSISTed or RESTOREd
//     without one: its holder would never leave, so Acquire returns this
//     at once instead of waiting), or is not a hash (the error names the
//     lease key).
//   - the hook's error when a hook rejects; Redis and network errors.
//
// When the outcome is ambiguous (see coordination.IsAmbiguous) the lease
// may exist on the server: a background owner-checked release removes it
// (the counter keeps its increment; gaps are allowed).
func (m *Mutex) TryAcquire(ctx context.Context, ttl time.Duration) (*Lock, error) {
	return m.acquire(ctx, ttl, false)
}

// Acquire takes the fencing-token lock for ttl, waiting as long as ctx
// allows, without polling: after a contended attempt it subscribes to the
// lease key's release notifications (one shared Pub/Sub connection per
// coordinator), tries again, then sleeps until a release is announced or
// the holder's TTL (as the server reported it) runs out, re-checking at
// least every 5 s. Transient errors are retried with jittered backoff;
// every re-try reuses the same owner token, so a re-sent request never
// draws a second fencing token.
//
// Acquire is admitted through hooks once, as FENCED LOCK ACQUIRE, however
// long it waits. When ctx ends first it returns an error matching both
// coordination.ErrNotAcquired and ctx's error (context.Cause) when Redis
// answered its last attempt (an outage instead: see
// coordination.ErrNotAcquired). Other errors are those of
// [Mutex.TryAcquire].
func (m *Mutex) Acquire(ctx context.Context, ttl time.Duration) (*Lock, error) {
	return m.acquire(ctx, ttl, true)
}

func (m *Mutex) acquire(ctx context.Context, ttl time.Duration, block bool) (*Lock, error) {
	if err := m.check(); err != nil {
		return nil, engine.OpError(fencelock.Kind.AcquireOp, engine.Keys{}, err)
	}
	// The engine refuses a bad ttl, naming the operation and the lease key.
	h, token, fence, err := fencelock.Acquire(ctx, m.e, fencelock.Request{Keys: m.keys, TTL: ttl, Holder: m.holder, Block: block})
	if err != nil {
		return nil, err
	}
	l := &Lock{fence: fence}
	engine.InitLease(&l.Lease, m.leaseKey, token, h)
	return l, nil
}

// Lock is a held fencing-token lock. It is returned by [Mutex.TryAcquire]
// and [Mutex.Acquire] and is safe for concurrent use by multiple
// goroutines. Its lease methods (Release, Refresh, Verify, KeepAlive,
// Context, Remaining, Key: the lease key, Token: the owner token) are
// those of the embedded [coordination.Lease], admitted through hooks as
// FENCED LOCK RENEW, VERIFY and RELEASE; it adds [Lock.FencingToken].
type Lock struct {
	coordination.Lease
	fence int64
}

// FencingToken returns the lock's fencing token: a positive int64, strictly
// greater than every token handed out before from the same counter (within
// one retained Redis history; see the package documentation for what
// breaks that). It does not change when the lock is refreshed. Pass it with
// every write to the protected resource and let the resource reject older
// tokens ([Guarded.Set], or a SQL guard). A nil *Lock returns 0.
func (l *Lock) FencingToken() int64 {
	if l == nil {
		return 0
	}
	return l.fence
}
