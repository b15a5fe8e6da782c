package lock

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/lockcore"
)

// kind is the owner-token lock's lease kind: its hook names, scripts and
// instruments (coordination.lock.* with kind=lock).
var kind = &engine.LeaseKind{
	Primitive: "lock",
	AcquireOp: hooks.LockAcquire, RenewOp: hooks.LockRenew, VerifyOp: hooks.LockVerify, ReleaseOp: hooks.LockRelease,
	First: lockcore.Try, Acquire: lockcore.Acquire, Refresh: lockcore.Refresh, Verify: lockcore.Verify, Release: lockcore.Release,
	Abandon: lockcore.Abandon,
	Metrics: lockcore.Metrics,
	Attrs:   []attribute.KeyValue{attribute.String("kind", "lock")},
}

// Mutex is the owner-token lock on one key: a value with no state of its
// own on the client, created by [New] without I/O. Each successful
// [Mutex.TryAcquire] or [Mutex.Acquire] returns a new [Lock] (with a new
// owner token), so one Mutex serves any number of acquisitions, one after
// another or competing with each other. A Mutex is safe for concurrent use
// by multiple goroutines.
type Mutex struct {
	e    *engine.Engine
	key  string      // as given to New, without the prefix
	keys engine.Keys // key, prefixed once
	fifo *config     // WithFIFO(true)'s settings; nil in the default order
}

// New returns the lock on key (without the coordinator's prefix; any
// non-empty bytes, at most 1 KiB), configured by opts ([WithFIFO]). It
// sends nothing to Redis.
//
// It returns an error wrapping coordination.ErrInvalidArgument, naming the
// argument, when coord is nil (or not made by coordination.New) or key is
// empty or too long.
func New(coord *coordination.Coordinator, key string, opts ...Option) (*Mutex, error) {
	e, err := engine.Of(coord)
	if err != nil {
		return nil, err
	}
	if err := check.Key("key", key); err != nil {
		return nil, err
	}
	c := config{recheck: fifoRecheck, live: fifoLive}
	if err := check.Apply(&c, opts); err != nil {
		return nil, err
	}
	if c.fifo {
		keys, err := fifoKeys(e, key)
		if err != nil {
			return nil, err
		}
		return &Mutex{e: e, key: key, keys: keys, fifo: &c}, nil
	}
	return &Mutex{e: e, key: key, keys: e.Key(key)}, nil
}

// check returns an error wrapping coordination.ErrInvalidArgument for a nil
// or zero Mutex, which [New] never returns.
func (m *Mutex) check() error {
	if m == nil || m.e == nil {
		return check.InvalidArgument("mutex", "must not be nil; use lock.New")
	}
	return nil
}

// Key returns the lock's key as given to [New] (without the coordinator's
// prefix).
func (m *Mutex) Key() string {
	if m == nil {
		return ""
	}
	return m.key
}

// Lock is a held owner-token lock. It is returned by [Mutex.TryAcquire]
// and [Mutex.Acquire] and is safe for concurrent use by multiple
// goroutines. Its lease methods (Release, Refresh, Verify, KeepAlive,
// Context, Remaining, Key, Token) are those of the embedded
// [coordination.Lease], admitted through hooks as LOCK RENEW, LOCK VERIFY
// and LOCK RELEASE; the key holds [coordination.Lease.Token].
type Lock struct {
	coordination.Lease
	id [1]any // the handle's id: the token, as a script argument
}

// TryAcquire takes the lock for ttl if it is free, in one round trip, and
// returns at once. It never waits.
//
// ttl is rounded up to whole milliseconds and must be at least 1 ms. The
// lock expires on the server ttl after the command ran unless refreshed
// ([coordination.Lease.Refresh], [coordination.Lease.KeepAlive]).
//
// Errors of the operation name it and the key (`coordination: lock
// acquire "KEY": ...`) and wrap: coordination.ErrNotAcquired when another
// owner holds the lock; coordination.ErrInvalidArgument naming the
// argument (ctx, ttl, or mutex for a nil Mutex, then without a key) for
// bad input, refused before the operation starts, with nothing admitted
// or sent; an error matching
// coordination.ErrBadState when the key holds a non-string value (wrong
// Redis type) or a string that is no owner token
// (someone else's value; nothing is written). An owner token without a
// TTL (PERSISTed) reads as held here (SET NX GET does not report the TTL);
// [Mutex.Acquire] reports it as ErrBadState; the hook's error when a hook
// rejects; an error wrapping coordination.ErrClosed after the
// coordinator's Shutdown began; Redis and network errors as go-redis
// returns them (a NOPERM reply when the ACL denies a command the script
// runs). When the outcome is ambiguous (see coordination.IsAmbiguous) the
// lock may have been taken on the server: a background owner-checked
// release removes it.
func (m *Mutex) TryAcquire(ctx context.Context, ttl time.Duration) (*Lock, error) {
	return m.acquire(ctx, ttl, false)
}

// Acquire takes the lock for ttl, waiting as long as ctx allows. It does
// not poll: after a contended attempt it subscribes to the key's release
// notifications (one Pub/Sub connection per coordinator, shared by every
// waiter), tries once more, then sleeps until a release is announced or
// the holder's TTL (as the server reported it) runs out, re-checking at
// least every 5 s in case a notification was lost. A holder without a TTL
// (an owner token someone PERSISTed) would never leave: Acquire returns
// coordination.ErrBadState for it instead of waiting. Transient Redis
// errors (see coordination.IsTransient) are retried with jittered backoff.
//
// Acquire is admitted through hooks once, as LOCK ACQUIRE, however long it
// waits. When ctx ends first it returns an error matching both
// coordination.ErrNotAcquired and ctx's error (context.Cause) when Redis answered
// its last attempt (an outage instead: see coordination.ErrNotAcquired). Other errors
// are those of [Mutex.TryAcquire].
func (m *Mutex) Acquire(ctx context.Context, ttl time.Duration) (*Lock, error) {
	return m.acquire(ctx, ttl, true)
}

func (m *Mutex) acquire(ctx context.Context, ttl time.Duration, block bool) (*Lock, error) {
	if err := m.check(); err != nil {
		return nil, engine.OpError(kind.AcquireOp, engine.Keys{}, err)
	}
	// The engine refuses a bad ttl, naming the operation and the key.
	token, err := engine.NewToken()
	if err != nil {
		return nil, err
	}
	l := &Lock{id: [1]any{token}}
	r := &engine.AcquireRequest{Kind: kind, Keys: m.keys, ID: l.id[:], TTL: ttl, Block: block}
	if m.fifo != nil {
		r.Kind, r.Recheck, r.Extra = fifoKind, m.fifo.recheck, []any{m.fifo.live.Milliseconds()}
	}
	h, _, err := m.e.Acquire(ctx, r)
	if err != nil {
		return nil, err
	}
	engine.InitLease(&l.Lease, m.key, token, h)
	return l, nil
}
