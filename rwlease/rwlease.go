package rwlease

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/engine"
)

const primitive = "rwlease"

// The lease kinds of the two modes: their hook names, scripts and
// instruments (coordination.rwlease.* with mode=read or mode=write). A
// lease's id is its sorted-set member, "R:<token>" or "W:<token>".
var (
	readKind = &engine.LeaseKind{
		Primitive: primitive,
		AcquireOp: hooks.RWLeaseReadAcquire, RenewOp: hooks.RWLeaseRenew, VerifyOp: hooks.RWLeaseVerify, ReleaseOp: hooks.RWLeaseRelease,
		Acquire: engine.RWLeaseAcquire, Refresh: engine.RWLeaseRefresh, Verify: engine.RWLeaseVerify, Release: engine.RWLeaseRelease,
		ReleaseMark: true,
		Metrics:     engine.RWLeaseMetrics,
		Attrs:       []attribute.KeyValue{attribute.String("mode", "read")},
	}
	writeKind = &engine.LeaseKind{
		Primitive: primitive,
		AcquireOp: hooks.RWLeaseWriteAcquire, RenewOp: hooks.RWLeaseRenew, VerifyOp: hooks.RWLeaseVerify, ReleaseOp: hooks.RWLeaseRelease,
		Acquire: engine.RWLeaseAcquire, Refresh: engine.RWLeaseRefresh, Verify: engine.RWLeaseVerify, Release: engine.RWLeaseRelease,
		ReleaseMark: true,
		Metrics:     engine.RWLeaseMetrics,
		Attrs:       []attribute.KeyValue{attribute.String("mode", "write")},
	}
)

// Mode is the mode of a lease: [ReadMode] (shared) or [WriteMode]
// (exclusive).
type Mode int

// The modes.
const (
	ReadMode  Mode = iota + 1 // shared with other readers; member "R:<token>"
	WriteMode                 // exclusive; member "W:<token>"
)

// String returns "read" or "write".
func (m Mode) String() string {
	switch m {
	case ReadMode:
		return "read"
	case WriteMode:
		return "write"
	}
	return "Mode(?)"
}

// DefaultRecheck is the default re-check period of a blocked [Read] or
// [Write]; see [WithRecheck].
const DefaultRecheck = 5 * time.Second

// Option configures one acquisition ([TryRead], [Read], [TryWrite],
// [Write]).
type Option func(*config) error

type config struct {
	recheck    time.Duration
	preference bool
}

// WithRecheck sets how often a blocked [Read] or [Write] tries again when
// no release was announced: the longest a lost Pub/Sub message can delay
// it. A writer waiting with writer preference also renews its waiting
// marker at each attempt; the marker lives twice this period, which is
// therefore the longest a waiting writer that crashed holds new readers
// back. It must be at least 1 ms. The default is [DefaultRecheck] (5 s).
func WithRecheck(d time.Duration) Option {
	return engine.AtLeast("recheck", d, time.Millisecond, func(c *config) { c.recheck = d })
}

// WithWriterPreference turns writer preference on or off for this
// acquisition (see the package documentation): with it off, a reader does
// not queue behind waiting writers, and a blocked writer does not record
// that it waits. Use the same setting in every process sharing a key. The
// default is on.
func WithWriterPreference(on bool) Option {
	return func(c *config) error {
		c.preference = on
		return nil
	}
}

// Lease is a held read or write lease. It is returned by [TryRead],
// [Read], [TryWrite] and [Write] and is safe for concurrent use by
// multiple goroutines. A nil *Lease reports not held.
type Lease struct {
	key, token string
	mode       Mode
	h          *engine.Handle
}

// TryRead takes a shared read lease on key for ttl, in one round trip, and
// returns at once: granted when no writer holds the key and, with writer
// preference (the default), no writer waits in [Write]. Any number of
// readers hold the key together.
//
// key is any non-empty bytes, without the coordinator's prefix. ttl is
// rounded up to whole milliseconds and must be at least 1 ms. The lease
// expires on the server ttl after the script ran unless refreshed
// ([Lease.Refresh], [Lease.KeepAlive]).
//
// Errors: coordination.ErrNotAcquired when a writer holds or waits;
// coordination.ErrInvalidArgument (naming coord, key, ttl or recheck) for
// bad input, with nothing sent; an error matching coordination.ErrWrongType
// when key holds something other than a sorted set, or
// coordination.ErrBadState when it holds a sorted set of another layout,
// both with nothing written; the hook's error when a hook rejects; Redis
// and network errors as go-redis returns them. When the outcome is
// ambiguous (see coordination.IsAmbiguous) the lease may have been taken on
// the server: a background owner-checked release removes it.
func TryRead(ctx context.Context, coord *coordination.Coordinator, key string, ttl time.Duration, opts ...Option) (*Lease, error) {
	return acquire(ctx, coord, key, ttl, ReadMode, false, opts)
}

// Read takes a shared read lease on key for ttl, waiting as long as ctx
// allows while a writer holds the key or (with writer preference) waits
// for it. It does not poll: after a refused attempt it subscribes to the
// key's release notifications (one Pub/Sub connection per coordinator,
// shared by every waiter), tries once more, then sleeps until a release is
// announced, the writer's lease (or the waiting writers' markers) expire as
// the server reported, or the re-check period passes ([WithRecheck]).
// Transient Redis errors (see coordination.Classify) are retried with
// jittered backoff.
//
// Read is admitted through hooks once, as RWLEASE READ ACQUIRE, however
// long it waits. When ctx ends first it returns an error matching both
// coordination.ErrNotAcquired and ctx's error (context.Cause). Other errors
// are those of [TryRead].
func Read(ctx context.Context, coord *coordination.Coordinator, key string, ttl time.Duration, opts ...Option) (*Lease, error) {
	return acquire(ctx, coord, key, ttl, ReadMode, true, opts)
}

// TryWrite takes the exclusive write lease on key for ttl, in one round
// trip, and returns at once: granted when no live reader or writer holds
// the key (expired ones do not count). It never records itself as a
// waiting writer. Arguments and errors are those of [TryRead];
// coordination.ErrNotAcquired means a live reader or writer holds the key.
func TryWrite(ctx context.Context, coord *coordination.Coordinator, key string, ttl time.Duration, opts ...Option) (*Lease, error) {
	return acquire(ctx, coord, key, ttl, WriteMode, false, opts)
}

// Write takes the exclusive write lease on key for ttl, waiting as long as
// ctx allows, without polling (as [Read] does), until every live reader
// and writer has released or expired. With writer preference (the
// default), its first refused attempt records it as a waiting writer, so
// that new readers queue behind it; each later attempt renews that record,
// and it is removed when Write acquires, or at once (one more round trip)
// when ctx ends first.
//
// Write is admitted through hooks once, as RWLEASE WRITE ACQUIRE, however
// long it waits. When ctx ends first it returns an error matching both
// coordination.ErrNotAcquired and ctx's error (context.Cause). Other errors
// are those of [TryRead].
func Write(ctx context.Context, coord *coordination.Coordinator, key string, ttl time.Duration, opts ...Option) (*Lease, error) {
	return acquire(ctx, coord, key, ttl, WriteMode, true, opts)
}

func acquire(ctx context.Context, coord *coordination.Coordinator, key string, ttl time.Duration, mode Mode, block bool, opts []Option) (*Lease, error) {
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
	cfg := config{recheck: DefaultRecheck, preference: true}
	if err := engine.Apply(&cfg, opts); err != nil {
		return nil, err
	}
	token, err := engine.NewToken()
	if err != nil {
		return nil, err
	}
	// The acquire script's last argument: for a reader, 1 to queue behind
	// waiting writers; for a writer, how long its waiting marker lives (ms;
	// 0 for none).
	kind, member, extra := readKind, "R:"+token, int64(0)
	var marker int64
	if mode == ReadMode {
		if cfg.preference {
			extra = 1
		}
	} else {
		kind, member = writeKind, "W:"+token
		if block && cfg.preference {
			marker, _ = engine.Millis("recheck", 2*cfg.recheck)
		}
		extra = marker
	}
	keys := e.Key(key)
	h, _, err := e.Acquire(ctx, &engine.AcquireRequest{
		Kind: kind, Keys: keys, ID: []any{member}, TTL: ttl, Extra: []any{extra}, Block: block, Recheck: cfg.recheck,
	})
	if err != nil {
		if marker > 0 && engine.Classify(err) == engine.Canceled && errors.Is(err, engine.ErrNotAcquired) {
			dropMarker(ctx, e, keys, member, time.Duration(marker)*time.Millisecond)
		}
		return nil, err
	}
	return &Lease{key: key, token: token, mode: mode, h: h}, nil
}

// dropMarker removes the waiting marker of a Write that gave up (and the
// write lease, had an attempt taken it without the caller learning), at
// once, so that readers queued behind it go on; when that fails it is
// retried in the background until the marker would have expired anyway.
// Not admitted: the Write was.
func dropMarker(ctx context.Context, e *engine.Engine, keys engine.Keys, member string, life time.Duration) {
	release := func(ctx context.Context) error {
		_, err := engine.RWLeaseRelease.Run(ctx, e, keys, member)
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	err := release(ctx)
	cancel()
	if err != nil && engine.Classify(err) != engine.Terminal {
		e.Cleanup("acquire", life, release)
	}
}

func (l *Lease) handle() *engine.Handle {
	if l == nil {
		return nil
	}
	return l.h
}

// Key returns the lease's key as given (without the coordinator's prefix).
func (l *Lease) Key() string {
	if l == nil {
		return ""
	}
	return l.key
}

// Mode returns [ReadMode] or [WriteMode] (0 for a nil *Lease).
func (l *Lease) Mode() Mode {
	if l == nil {
		return 0
	}
	return l.mode
}

// Token returns the holder's owner token: 36 characters, random (UUID
// v4). The lease's member in the sorted set is "R:<Token>" for a read
// lease and "W:<Token>" for a write lease.
func (l *Lease) Token() string {
	if l == nil {
		return ""
	}
	return l.token
}

// Remaining returns the local estimate of the time the lease is still
// held: the TTL measured from the instant before the last successful
// acquire or refresh request was sent, minus a drift allowance (1% of the
// TTL plus 2 ms). It returns 0 once the lease is released, lost or locally
// expired, without asking Redis.
func (l *Lease) Remaining() time.Duration { return l.handle().Remaining() }

// Context returns a context that is cancelled when the lease is released
// (context.Cause is coordination.ErrReleased), lost, or its local deadline
// passes (the cause matches coordination.ErrLost). Run the protected reads
// or writes under it. It is created on the first call. A nil *Lease
// returns an already-cancelled context (cause coordination.ErrNotHeld).
// Its Deadline is the local deadline (where [Lease.Remaining] reaches zero),
// moving later with each successful renewal, so a database or HTTP client
// given the context bounds its own request by the lease; a lease without
// expiry has no deadline.
func (l *Lease) Context() context.Context { return l.handle().Context() }

// Done returns Context().Done().
func (l *Lease) Done() <-chan struct{} { return l.handle().Context().Done() }

// Refresh sets the lease to expire ttl from now if this holder's entry is
// still live, in one round trip (admitted as RWLEASE RENEW). Readers
// refresh even while a writer waits. It returns false when the entry
// expired or was removed; the lease is then lost and its context
// cancelled, and an expired holder never revives its entry. After the
// lease is released or lost, Refresh returns false without asking Redis.
//
// Errors: coordination.ErrInvalidArgument for ttl < 1 ms (nothing sent);
// Redis and network errors, which leave the lease held (its local deadline
// still applies, shortened to what ttl gives when the refresh may have
// run).
func (l *Lease) Refresh(ctx context.Context, ttl time.Duration) (bool, error) {
	return l.handle().Refresh(ctx, ttl)
}

// Verify reports whether this holder's entry is live at the instant the
// script runs (one round trip, admitted as RWLEASE VERIFY; nothing is
// written). A false answer marks the lease lost; an error changes nothing.
func (l *Lease) Verify(ctx context.Context) (bool, error) { return l.handle().Verify(ctx) }

// Release removes this holder's entry and wakes waiters, in one round trip
// (admitted as RWLEASE RELEASE). It returns coordination.Released, or
// coordination.AlreadyReleased when the entry had expired, was released
// before (then without asking Redis), or when a request re-sent by go-redis
// found its own release done. It never returns NotOwned: an entry belongs
// to its holder alone, so a lost handle cannot remove anyone else's.
//
// The lease counts as released from the moment Release is called: its
// context is cancelled (cause coordination.ErrReleased) and its keep-alive
// stops. When the release fails with a transient error or a cancelled ctx,
// the error is returned and the owner-checked release is retried in the
// background until it gets an answer or the lease's TTL has passed; a
// terminal error (NOPERM) leaves the entry to expire at its TTL.
func (l *Lease) Release(ctx context.Context) (coordination.ReleaseOutcome, error) {
	out, err := l.handle().Release(ctx)
	return coordination.ReleaseOutcome(out), err
}

// KeepAlive starts renewing the lease in the background every TTL/3 until
// it is released or lost. A renewal that finds the entry gone, a terminal
// error, or the local deadline passing while transient errors persist
// ends the keep-alive and cancels [Lease.Context] with a cause matching
// coordination.ErrLost. Renewals are not admitted through hooks. KeepAlive
// returns at once; calling it again does nothing. A reader kept alive
// keeps writers out for as long as it holds.
func (l *Lease) KeepAlive() { l.handle().KeepAlive() }
