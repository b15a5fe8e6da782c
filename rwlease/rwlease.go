package rwlease

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/sentinel"
)

const primitive = "rwlease"

// The lease kinds of the two modes: their hook names, scripts and
// instruments (coordination.rwlease.* with mode=read or mode=write). A
// lease's id is its sorted-set member, "R:<token>" or "W:<token>".
var (
	readKind = &engine.LeaseKind{
		Primitive: primitive,
		AcquireOp: hooks.RWLeaseReadAcquire, RenewOp: hooks.RWLeaseRenew, VerifyOp: hooks.RWLeaseVerify, ReleaseOp: hooks.RWLeaseRelease,
		Acquire: scriptAcquire, Refresh: scriptRefresh, Verify: scriptVerify, Release: scriptRelease,
		Abandon: scriptAbandon,
		Metrics: metrics,
		Attrs:   []attribute.KeyValue{attribute.String("mode", "read")},
	}
	writeKind = &engine.LeaseKind{
		Primitive: primitive,
		AcquireOp: hooks.RWLeaseWriteAcquire, RenewOp: hooks.RWLeaseRenew, VerifyOp: hooks.RWLeaseVerify, ReleaseOp: hooks.RWLeaseRelease,
		Acquire: scriptAcquire, Refresh: scriptRefresh, Verify: scriptVerify, Release: scriptRelease,
		Abandon: scriptAbandon,
		Metrics: metrics,
		Attrs:   []attribute.KeyValue{attribute.String("mode", "write")},
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

// DefaultRecheck is the default re-check period of a blocked
// [RWMutex.Read] or [RWMutex.Write]; see [WithRecheck].
const DefaultRecheck = 5 * time.Second

// RWMutex is a read-write lease on one Redis key. Create it with [New]; it
// holds no state besides its key and settings, so any number of RWMutex
// values (in any number of processes) may share a key, provided they use
// the same [Policy], and one RWMutex may be acquired any number of times,
// in either mode. It is safe for concurrent use by multiple goroutines:
// each acquisition that succeeds returns a [Lease] of its own. The zero
// value is not usable.
type RWMutex struct {
	e       *engine.Engine
	key     string
	keys    engine.Keys // key, prefixed once
	recheck time.Duration
	policy  Policy
	marker  int64 // ms a blocked waiter's waiting marker lives; 0 for none
}

// Option configures an [RWMutex].
type Option func(*config) error

type config struct {
	recheck time.Duration
	policy  Policy
}

// WithRecheck sets how often a blocked [RWMutex.Read] or [RWMutex.Write]
// tries again when no release was announced: the longest a lost Pub/Sub
// message can delay it. A blocked waiter that records itself as waiting
// (see [Policy]) renews that record at each attempt; the record lives twice
// this period, which is therefore the longest a waiter that crashed holds
// the other side back. It must be at least 1 ms. The default is
// [DefaultRecheck] (5 s).
func WithRecheck(d time.Duration) Option {
	return check.AtLeast("recheck", d, time.Millisecond, func(c *config) { c.recheck = d })
}

// Policy is how an [RWMutex] orders readers and writers that wait for each
// other (see the package documentation, "Fairness"). Every process sharing
// a key must use the same policy.
type Policy int

// The policies. The default is [PhaseFair].
const (
	// PhaseFair: read phases and write phases alternate. A writer blocked
	// in Write holds new readers back (they wait, recording themselves);
	// when a write lease is released, every reader that waited through it
	// is given a read lease before the next writer, and new readers wait
	// for the writer after them. Neither side starves: a reader waits for
	// at most the read phase in progress and one write phase (two when a
	// write lease expires instead of being released: see the package
	// documentation), and the writers, together, get every other phase
	// (Brandenburg and Anderson, "Spin-Based Reader-Writer Synchronization
	// for Multiprocessor Real-Time Systems", Real-Time Systems 46(1), 2010,
	// phase-fair reader-writer locks).
	PhaseFair Policy = iota + 1
	// WriterPreference: a writer blocked in Write holds new readers back
	// until no writer holds or waits; readers do not record themselves. A
	// steady stream of writers starves readers.
	WriterPreference
	// ReaderPreference: readers ignore waiting writers and writers do not
	// record themselves. A steady stream of overlapping readers starves
	// writers.
	ReaderPreference
)

// String returns "phase-fair", "writer-preference" or
// "reader-preference".
func (p Policy) String() string {
	switch p {
	case PhaseFair:
		return "phase-fair"
	case WriterPreference:
		return "writer-preference"
	case ReaderPreference:
		return "reader-preference"
	}
	return "Policy(?)"
}

// WithPolicy sets the fairness [Policy] of every acquisition of this
// RWMutex. Use the same policy in every process sharing a key. The default
// is [PhaseFair]. An unknown policy is refused by [New] with an error
// wrapping coordination.ErrInvalidArgument naming policy.
func WithPolicy(p Policy) Option {
	return func(c *config) error {
		if p < PhaseFair || p > ReaderPreference {
			return check.InvalidArgument("policy", "%d is not PhaseFair, WriterPreference or ReaderPreference", int(p))
		}
		c.policy = p
		return nil
	}
}

// New returns the read-write lease on key (without the coordinator's
// prefix; any non-empty bytes). It sends nothing to Redis. One sorted set per key, so
// Redis Cluster needs no hash tag.
//
// It returns an error wrapping coordination.ErrInvalidArgument, naming the
// argument, when coord is nil, key is empty or longer than 1 KiB, or an
// option is invalid (a recheck below 1 ms).
func New(coord *coordination.Coordinator, key string, opts ...Option) (*RWMutex, error) {
	e, err := engine.Of(coord)
	if err != nil {
		return nil, err
	}
	if err := check.Key("key", key); err != nil {
		return nil, err
	}
	cfg := config{recheck: DefaultRecheck, policy: PhaseFair}
	if err := check.Apply(&cfg, opts); err != nil {
		return nil, err
	}
	m := &RWMutex{e: e, key: key, keys: e.Key(key), recheck: cfg.recheck, policy: cfg.policy}
	if cfg.policy != ReaderPreference {
		m.marker, _ = check.Millis("recheck", 2*cfg.recheck)
	}
	return m, nil
}

// check returns an error wrapping coordination.ErrInvalidArgument for a nil
// or zero RWMutex, which [New] never returns.
func (m *RWMutex) check() error {
	if m == nil || m.e == nil {
		return check.InvalidArgument("rwmutex", "must not be nil; use rwlease.New")
	}
	return nil
}

// Key returns the key as given to [New] (without the coordinator's prefix).
func (m *RWMutex) Key() string { return m.key }

// Lease is a held read or write lease. It is returned by
// [RWMutex.TryRead], [RWMutex.Read], [RWMutex.TryWrite] and
// [RWMutex.Write] and is safe for concurrent use by multiple goroutines.
// Its lease methods are those of the embedded [coordination.Lease],
// admitted through hooks as RWLEASE RENEW, VERIFY and RELEASE; its member
// in the sorted set is "R:<Token>" for a read lease and "W:<Token>" for a
// write lease. It adds [Lease.Mode].
type Lease struct {
	coordination.Lease
	mode Mode
}

// TryRead takes a shared read lease for ttl, in one round trip, and returns
// at once: granted when no writer holds the key and, under [PhaseFair] (the
// default) or [WriterPreference], no writer waits in [RWMutex.Write]. Any
// number of readers hold the key together. It never records itself as a
// waiting reader.
//
// ttl is rounded up to whole milliseconds and must be at least 1 ms. The
// lease expires on the server ttl after the script ran unless refreshed
// ([coordination.Lease.Refresh], [coordination.Lease.KeepAlive]).
//
// Errors: coordination.ErrNotAcquired when a writer holds or waits;
// coordination.ErrInvalidArgument (naming ttl, or rwmutex for a nil or zero
// RWMutex) with nothing sent; an error matching coordination.ErrBadState
// when the key holds something other than a sorted set, or
// coordination.ErrBadState when it holds a sorted set of another layout
// (a member that is not R:, W: or Q:<token> where one is looked for, or a
// lowest or highest score that no TTL gives, such as +inf; Refresh and
// Release refuse that too), both with nothing written; the hook's error when a hook rejects; Redis
// and network errors as go-redis returns them. When the outcome is
// ambiguous (see coordination.IsAmbiguous) the lease may have been taken on
// the server: a background owner-checked release removes it.
func (m *RWMutex) TryRead(ctx context.Context, ttl time.Duration) (*Lease, error) {
	return m.acquire(ctx, ttl, ReadMode, false)
}

// Read takes a shared read lease for ttl, waiting as long as ctx allows
// while a writer holds the key or (unless [ReaderPreference]) waits for it.
// Under [PhaseFair] (the default) its first refused attempt records it as a
// waiting reader (renewed at each attempt, removed when it acquires or at
// once when ctx ends first), and the release of the write lease it waited
// behind gives it a read lease, which its next attempt (woken by that
// release) takes up. It does not poll: after a refused attempt it subscribes to the key's
// release notifications (one Pub/Sub connection per coordinator, shared by
// every waiter), tries once more, then sleeps until a release is
// announced, the writer's lease (or the waiting writers' markers) expire
// as the server reported, or the re-check period passes ([WithRecheck]).
// Transient Redis errors (see coordination.IsTransient) are retried with
// jittered backoff.
//
// Read is admitted through hooks once, as RWLEASE READ ACQUIRE, however
// long it waits. When ctx ends first it returns an error matching both
// coordination.ErrNotAcquired and ctx's error (context.Cause) when Redis answered
// its last attempt (an outage instead: see coordination.ErrNotAcquired). Other errors
// are those of [RWMutex.TryRead].
func (m *RWMutex) Read(ctx context.Context, ttl time.Duration) (*Lease, error) {
	return m.acquire(ctx, ttl, ReadMode, true)
}

// TryWrite takes the exclusive write lease for ttl, in one round trip, and
// returns at once: granted when no live reader or writer holds the key
// (expired ones do not count). It never records itself as a waiting
// writer. Arguments and errors are those of [RWMutex.TryRead];
// coordination.ErrNotAcquired means a live reader or writer holds the key.
func (m *RWMutex) TryWrite(ctx context.Context, ttl time.Duration) (*Lease, error) {
	return m.acquire(ctx, ttl, WriteMode, false)
}

// Write takes the exclusive write lease for ttl, waiting as long as ctx
// allows, without polling (as [RWMutex.Read] does), until every live
// reader and writer has released or expired. Unless [ReaderPreference],
// its first refused attempt records it as a waiting writer, so that new
// readers queue behind it; each later attempt renews that record, and it is
// removed when Write acquires, or at once (one more round trip) when ctx
// ends first. Under [PhaseFair] the readers that waited behind a write
// lease hold the key after it, before the next writer.
//
// Write is admitted through hooks once, as RWLEASE WRITE ACQUIRE, however
// long it waits. When ctx ends first it returns an error matching both
// coordination.ErrNotAcquired and ctx's error (context.Cause) when Redis answered
// its last attempt (an outage instead: see coordination.ErrNotAcquired). Other errors
// are those of [RWMutex.TryRead].
func (m *RWMutex) Write(ctx context.Context, ttl time.Duration) (*Lease, error) {
	return m.acquire(ctx, ttl, WriteMode, true)
}

func (m *RWMutex) acquire(ctx context.Context, ttl time.Duration, mode Mode, block bool) (*Lease, error) {
	kind := readKind
	if mode == WriteMode {
		kind = writeKind
	}
	if err := m.check(); err != nil {
		return nil, engine.OpError(kind.AcquireOp, engine.Keys{}, err)
	}
	// The engine refuses a bad ttl, naming the operation and the key.
	token, err := engine.NewToken()
	if err != nil {
		return nil, err
	}
	// The acquire script's arguments after the TTL: for a reader, 1 to
	// queue behind waiting writers, then how long its own waiting marker
	// lives (ms; 0 for none: phase-fair blocking reads only); for a writer,
	// how long its waiting marker lives (ms; 0 for none).
	member := "R:" + token
	var marker int64
	if block {
		marker = m.marker
	}
	extra := []any{int64(0), int64(0)}
	if mode == ReadMode {
		if m.policy != ReaderPreference {
			extra[0] = int64(1)
		}
		if m.policy != PhaseFair {
			marker = 0
		}
		extra[1] = marker
	} else {
		member = "W:" + token
		extra = extra[:1]
		extra[0] = marker
	}
	h, _, err := m.e.Acquire(ctx, &engine.AcquireRequest{
		Kind: kind, Keys: m.keys, ID: []any{member}, TTL: ttl, Extra: extra, Block: block, Recheck: m.recheck,
	})
	if err != nil {
		if marker > 0 && engine.Classify(err) == engine.Canceled && errors.Is(err, sentinel.ErrNotAcquired) {
			dropMarker(ctx, m.e, m.keys, member, time.Duration(marker)*time.Millisecond)
		}
		return nil, err
	}
	l := &Lease{mode: mode}
	engine.InitLease(&l.Lease, m.key, token, h)
	return l, nil
}

// dropMarker removes the waiting marker of a Write (or phase-fair Read)
// that gave up (and its lease, had an attempt taken it, or a writer's
// release handed it one, without the caller learning), at once, so that
// others queued behind it go on; when that fails it is retried in the
// background until the marker would have expired anyway. Not admitted: the
// Write or Read was.
func dropMarker(ctx context.Context, e *engine.Engine, keys engine.Keys, member string, life time.Duration) {
	release := func(ctx context.Context) error {
		_, err := scriptRelease.Run(ctx, e, keys, member)
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	err := release(ctx)
	cancel()
	if err != nil && engine.Classify(err) != engine.Terminal {
		e.Cleanup("acquire", life, release)
	}
}

// Mode returns [ReadMode] or [WriteMode] (0 for a nil *Lease).
func (l *Lease) Mode() Mode {
	if l == nil {
		return 0
	}
	return l.mode
}
