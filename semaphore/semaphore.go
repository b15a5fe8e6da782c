package semaphore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/engine"
)

const primitive = "semaphore"

// kind is the semaphore permit's lease kind: its hook names, scripts and
// instruments (coordination.semaphore.*, no attributes besides result on
// acquire_wait). A permit's id is its sorted-set member "P:<n>:<token>".
var kind = &engine.LeaseKind{
	Primitive: primitive,
	AcquireOp: hooks.SemaphoreAcquire, RenewOp: hooks.SemaphoreRenew, VerifyOp: hooks.SemaphoreVerify, ReleaseOp: hooks.SemaphoreRelease,
	Acquire: acquireScript, Refresh: refreshScript, Verify: verifyScript, Release: releaseScript,
	Abandon:  abandonScript,
	WaitFlag: true,
	Metrics:  leaseMetrics,
}

// MaxCapacity is the largest capacity (and so the largest number of permits
// one holder may take): 2^53-1, the largest integer the scripts' Lua
// numbers hold exactly.
const MaxCapacity = 1<<53 - 1

// DefaultRecheck is the default re-check period of a blocked
// [Semaphore.Acquire]; see [WithRecheck].
const DefaultRecheck = 5 * time.Second

// Semaphore is a counting semaphore on one Redis key. Create it with
// [New]; it holds no state besides its settings, so any number of
// Semaphore values (in any number of processes) may share a key, provided
// they use the same capacity or a capacity was set in the key
// ([Semaphore.SetCapacity]). It is safe for concurrent use by
// multiple goroutines. The zero value is not usable.
type Semaphore struct {
	e        *engine.Engine
	key      string
	keys     engine.Keys // key, prefixed once
	capacity int64
	capArg   []any // the capacity as the acquire script's extra argument
	recheck  time.Duration
	fifo     *fifoConfig // WithFIFO(true)'s acquisition; nil in the default order
}

// Option configures a [Semaphore].
type Option func(*config) error

type config struct {
	recheck time.Duration
	fifo    bool
	// fifoRecheck and fifoLive are the first-in first-out waiters'
	// longest re-check period and how long a queued waiter counts as alive
	// after each of its attempts (fifoRecheck and fifoLive; tests shorten
	// them).
	fifoRecheck, fifoLive time.Duration
}

// WithRecheck sets how often a blocked [Semaphore.Acquire] re-reads the
// semaphore when no release was announced: the longest a lost Pub/Sub
// message can delay a waiter. It must be at least 1 ms. The default is
// [DefaultRecheck] (5 s).
func WithRecheck(d time.Duration) Option {
	return check.AtLeast("recheck", d, time.Millisecond, func(c *config) { c.recheck = d })
}

// New returns a semaphore of capacity permits on key (without the
// coordinator's prefix; any non-empty bytes). It sends nothing to Redis.
//
// capacity must be between 1 and [MaxCapacity], and every process using key
// must pass the same capacity, until one sets a capacity in the key with
// [Semaphore.SetCapacity], which then wins for everyone (see the package
// documentation, Capacity).
//
// It returns an error wrapping coordination.ErrInvalidArgument, naming the
// argument, when coord is nil, key is empty, capacity is out of range or an
// option is invalid.
func New(coord *coordination.Coordinator, key string, capacity int64, opts ...Option) (*Semaphore, error) {
	e, err := engine.Of(coord)
	if err != nil {
		return nil, err
	}
	if err := check.Key("key", key); err != nil {
		return nil, err
	}
	if capacity < 1 || capacity > MaxCapacity {
		return nil, check.InvalidArgument("capacity", "must be between 1 and %d, got %d", int64(MaxCapacity), capacity)
	}
	cfg := config{recheck: DefaultRecheck, fifoRecheck: fifoRecheck, fifoLive: fifoLive}
	if err := check.Apply(&cfg, opts); err != nil {
		return nil, err
	}
	s := &Semaphore{e: e, key: key, keys: e.Key(key), capacity: capacity, capArg: []any{capacity}, recheck: cfg.recheck}
	if cfg.fifo {
		if s.fifo, err = newFIFO(e, key, capacity, min(cfg.recheck, cfg.fifoRecheck), cfg.fifoLive); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// check returns an error wrapping coordination.ErrInvalidArgument for a nil
// or zero Semaphore, which [New] never returns.
func (s *Semaphore) check() error {
	if s == nil || s.e == nil {
		return check.InvalidArgument("semaphore", "must not be nil; use semaphore.New")
	}
	return nil
}

// Key returns the semaphore's key as given to [New] (without the
// coordinator's prefix).
func (s *Semaphore) Key() string { return s.key }

// Capacity returns the capacity given to [New]. Once a capacity was set
// in the key ([Semaphore.SetCapacity], [Semaphore.Drain]), that one is in
// force instead: [Semaphore.State] reads it.
func (s *Semaphore) Capacity() int64 { return s.capacity }

// TryAcquire takes one permit for ttl if one is free, in one round trip,
// and returns at once. It is TryAcquireN(ctx, 1, ttl).
func (s *Semaphore) TryAcquire(ctx context.Context, ttl time.Duration) (*Permit, error) {
	return s.acquire(ctx, 1, ttl, false)
}

// TryAcquireN takes n permits for ttl if n are free, all or nothing, in one
// round trip, and returns at once. It never queues: when fewer than n are
// free it returns coordination.ErrNotAcquired and changes nothing (besides
// pruning expired permits).
//
// ttl is rounded up to whole milliseconds and must be at least 1 ms: a
// permit always has a lease (keep it with [coordination.Lease.KeepAlive]
// for as long as it is needed). The permits expire on the server ttl after
// the script ran unless refreshed ([coordination.Lease.Refresh],
// [coordination.Lease.KeepAlive]).
//
// Errors: coordination.ErrNotAcquired when fewer than n permits are free
// (none is while draining: the error then reads `coordination: semaphore
// acquire "KEY": not acquired: the semaphore is draining (nothing is
// granted until Resume)`, from the same one round trip);
// coordination.ErrInvalidArgument naming n (below 1 or above the capacity
// given to New, whatever capacity is set in the key)
// or ttl (below 1 ms, 0 included, or above 2562047h47m16.854s: the whole
// milliseconds a time.Duration holds), with nothing sent;
// coordination.ErrConfigMismatch when a live permit exists and the
// capacity recorded in the key differs from [Semaphore.Capacity] while no
// capacity was set in the key (see the package documentation, Capacity),
// with nothing written; an error matching coordination.ErrBadState, with
// nothing written, when the key holds something else or a score the
// acquisition goes by is outside the layout (a capacity record outside
// 1..[MaxCapacity], another record not below 0, or a permit's expiry that
// is not a whole millisecond within the longest TTL from now: the
// caller's own, the earliest live one on a refusal, the latest on a key
// left without a TTL; see the package doc, "Storage"); the hook's
// error when a hook rejects; Redis and network errors as go-redis returns
// them. When the outcome is ambiguous (see coordination.IsAmbiguous) the
// permits may have been taken on the server: a background owner-checked
// release gives them back.
func (s *Semaphore) TryAcquireN(ctx context.Context, n int64, ttl time.Duration) (*Permit, error) {
	return s.acquire(ctx, n, ttl, false)
}

// Acquire takes one permit for ttl, waiting as long as ctx allows. It is
// AcquireN(ctx, 1, ttl).
func (s *Semaphore) Acquire(ctx context.Context, ttl time.Duration) (*Permit, error) {
	return s.acquire(ctx, 1, ttl, true)
}

// AcquireN takes n permits for ttl, all or nothing, waiting as long as ctx
// allows. It does not poll: after a refused attempt it subscribes to the
// key's release notifications, tries once more, then sleeps until a
// release is announced, the earliest live permit expires (as the server
// reported it) or the re-check period passes, and tries again. Transient
// Redis errors (see coordination.IsTransient) are retried with jittered
// backoff. A waiter for many permits may wait while smaller requests keep
// succeeding: there is no queue, unless the Semaphore was made [WithFIFO]
// (then blocked waiters are granted in arrival order, a waiter for many
// permits included). While the semaphore is draining
// ([Semaphore.Drain]) it waits for [Semaphore.Resume]; a capacity raised
// by [Semaphore.SetCapacity] wakes it at once.
//
// AcquireN is admitted through hooks once, as SEMAPHORE ACQUIRE, however
// long it waits. When ctx ends first it returns an error matching both
// coordination.ErrNotAcquired and ctx's error (context.Cause) when Redis answered
// its last attempt (an outage instead: see coordination.ErrNotAcquired). Other errors
// are those of [Semaphore.TryAcquireN]; when any attempt's outcome was
// ambiguous and the call fails, the permits it may have taken are given
// back in the background.
func (s *Semaphore) AcquireN(ctx context.Context, n int64, ttl time.Duration) (*Permit, error) {
	return s.acquire(ctx, n, ttl, true)
}

func (s *Semaphore) acquire(ctx context.Context, n int64, ttl time.Duration, block bool) (*Permit, error) {
	if err := s.check(); err != nil {
		return nil, engine.OpError(kind.AcquireOp, engine.Keys{}, err)
	}
	if n < 1 || n > s.capacity {
		return nil, engine.OpError(kind.AcquireOp, s.keys, check.InvalidArgument("n", "must be between 1 and the capacity %d, got %d", s.capacity, n))
	}
	// The engine refuses a bad ttl, naming the operation and the key.
	token, err := engine.NewToken()
	if err != nil {
		return nil, err
	}
	p := &Permit{sem: s, n: n}
	p.id[0] = member(n, token)
	r := &engine.AcquireRequest{
		Kind: kind, Keys: s.keys, ID: p.id[:], TTL: ttl, Extra: s.capArg,
		Block: block, Recheck: s.recheck,
	}
	if s.fifo != nil {
		r.Kind, r.Keys, r.Extra, r.Recheck = fifoKind, s.fifo.keys, s.fifo.extra, s.fifo.recheck
	}
	h, g, err := s.e.Acquire(ctx, r)
	if err != nil {
		if !block && g.Value == draining && errors.Is(err, coordination.ErrNotAcquired) {
			// Said, as the refusal it is: not a want of free permits.
			return nil, engine.NameOp(kind.AcquireOp, s.keys, errDraining)
		}
		return nil, err
	}
	engine.InitLease(&p.Lease, s.key, token, h)
	return p, nil
}

// errDraining is a TryAcquire's refusal while the semaphore is draining.
var errDraining = fmt.Errorf("%w: the semaphore is draining (nothing is granted until Resume)", coordination.ErrNotAcquired)

// member is the sorted-set member of a holder of n permits: the permit's
// id in every script.
func member(n int64, token string) string {
	var digits [20]byte
	return "P:" + string(strconv.AppendInt(digits[:0], n, 10)) + ":" + token
}

// State is a snapshot of a semaphore's live permits at one server instant.
type State struct {
	// Capacity is the capacity recorded in the key, or 0 when the key does
	// not exist (no permit is held).
	Capacity int64
	// Used is the number of permits held by live holders.
	Used int64
	// Holders is the number of live holders (each holds one or more
	// permits).
	Holders int
	// NoExpiry is the number of live holders whose permits never expire:
	// members scored +inf, which the library never writes (every permit
	// has a TTL) but a key edited by hand may hold (see the package
	// documentation, Permits without expiry).
	NoExpiry int
	// CapacitySet is true when the capacity was set in the key
	// ([Semaphore.SetCapacity], [Semaphore.Drain]): Capacity is then in
	// force for every Semaphore on the key, whatever capacity [New] was
	// given, and the key stays while no permit is held.
	CapacitySet bool
	// Draining is true from [Semaphore.Drain] until [Semaphore.Resume]:
	// no permit is granted.
	Draining bool
}

// Free returns the number of permits free for a caller of capacity
// capacity: capacity - Used, never negative, and 0 while Draining. Pass
// st.Capacity when CapacitySet (it is then in force for every caller).
func (st State) Free(capacity int64) int64 {
	if st.Draining {
		return 0
	}
	return max(capacity-st.Used, 0)
}

// State reads the semaphore's live permits in one round trip (admitted as
// SEMAPHORE READ). It writes nothing: expired permits are left out, not
// pruned. The answer may be stale by the time it returns.
//
// Errors: an error matching coordination.ErrBadState
// when the key holds something else, a record outside the layout (see
// [Semaphore.TryAcquireN]) or a live member that is not a permit; the hook's
// error when a hook rejects; Redis and network errors.
func (s *Semaphore) State(ctx context.Context) (State, error) {
	if err := s.check(); err != nil {
		return State{}, engine.OpError(hooks.SemaphoreRead, engine.Keys{}, err)
	}
	ctx, op, err := s.e.Admit(ctx, hooks.SemaphoreRead, primitive, s.keys)
	if err != nil {
		return State{}, err
	}
	r, err := readScript.Run(ctx, s.e, s.keys)
	if err != nil {
		return State{}, op.End(err)
	}
	return State{Capacity: r.Capacity, Used: r.Used, Holders: int(r.Holders), NoExpiry: int(r.NoExpiry),
		CapacitySet: r.Mode > 0, Draining: r.Mode == 2}, op.End(nil)
}

// SetCapacity sets the semaphore's capacity to capacity permits in its
// key, for every Semaphore on the key in every process, in one round trip
// (admitted as SEMAPHORE UPDATE). From then on the capacity set in the key
// is in force for every acquisition, whatever capacity [New] was given
// (no coordination.ErrConfigMismatch), until another SetCapacity; the key
// stays (without a TTL) while no permit is held, so that the setting is
// kept, and goes only when deleted by hand.
//
// Held permits are never revoked. Raising the capacity takes effect at
// once: blocked [Semaphore.Acquire] callers on the key, in every process,
// are woken and granted as the new capacity allows. Lowering it keeps
// every held permit valid until released or expired; no permit is
// granted until the permits in use fall below the new capacity. While
// draining ([Semaphore.Drain]) the new capacity is recorded and applies
// after [Semaphore.Resume].
//
// A caller takes at most the capacity given to its own [New] in one
// acquisition ([Semaphore.TryAcquireN]), whatever is set in the key; a
// request for more permits than the capacity set is refused (Acquire
// waits) until the capacity is raised.
//
// It is safe for concurrent use, and safe to re-run (a re-send after a
// lost reply sets the same capacity). Errors:
// coordination.ErrInvalidArgument naming capacity (below 1 or above
// [MaxCapacity]; use Drain to grant none) or semaphore (nil), with
// nothing sent; an error matching coordination.ErrBadState when the key
// holds something else or a record outside the layout, nothing written;
// the hook's error when a hook rejects; Redis and network errors.
func (s *Semaphore) SetCapacity(ctx context.Context, capacity int64) error {
	if err := s.check(); err != nil {
		return engine.OpError(hooks.SemaphoreUpdate, engine.Keys{}, err)
	}
	if capacity < 1 || capacity > MaxCapacity {
		return engine.OpError(hooks.SemaphoreUpdate, s.keys,
			check.InvalidArgument("capacity", "must be between 1 and %d, got %d (Drain grants none)", int64(MaxCapacity), capacity))
	}
	return s.configure(ctx, hooks.SemaphoreUpdate, verbCapacity, capacity)
}

// Drain stops granting permits on the key, for every Semaphore on it in
// every process, and waits until no permit is held (released or expired),
// as long as ctx allows; it is admitted through hooks once, as SEMAPHORE
// DRAIN, however long it waits. Held permits are not revoked: their
// holders keep working, refresh and release them as usual. The drain
// lasts until [Semaphore.Resume], also when Drain returns an error:
// acquisitions meanwhile are refused ([Semaphore.TryAcquire] returns
// an error matching coordination.ErrNotAcquired that says the semaphore
// is draining) or wait ([Semaphore.Acquire]: until Resume, not until a
// permit expires). Drain sets
// the capacity in force in the key as [Semaphore.SetCapacity] does (the
// capacity given to [New] when the key does not exist).
//
// Each attempt is one round trip; between attempts Drain waits on the
// key's release notifications, the earliest permit's expiry (as the
// server reported it) or the re-check period ([WithRecheck]), and retries
// transient errors with jittered backoff. It returns nil once no permit
// is live. It is safe for concurrent use; several drains may wait at once.
//
// When ctx ends first it returns an error matching both
// coordination.ErrNotAcquired and context.Cause(ctx) when Redis answered
// its last attempt (permits were still held), as every blocking
// operation that gave up does (see coordination.ErrNotAcquired); other
// errors as [Semaphore.SetCapacity] has them (semaphore for a nil one).
func (s *Semaphore) Drain(ctx context.Context) error {
	if err := s.check(); err != nil {
		return engine.OpError(hooks.SemaphoreDrain, engine.Keys{}, err)
	}
	ctx, op, err := s.e.Admit(ctx, hooks.SemaphoreDrain, primitive, s.keys)
	if err != nil {
		return err
	}
	err = s.e.Wait(ctx, engine.WaitConfig{Key: s.keys.Full()[0], Recheck: s.recheck}, func(ctx context.Context) (engine.Attempt, error) {
		g, err := configureScript.Run(ctx, s.e, s.keys, verbDrain, s.capacity)
		if err != nil {
			return engine.Attempt{}, err
		}
		return engine.Attempt{Done: g.Acquired, RetryIn: g.RetryIn}, nil
	})
	return op.End(err)
}

// Resume ends a drain ([Semaphore.Drain]) in one round trip (admitted as
// SEMAPHORE UPDATE): permits are granted again under the capacity set in
// the key, and blocked [Semaphore.Acquire] callers on the key, in every
// process, are woken. It changes nothing when the semaphore is not
// draining. It is safe for concurrent use and to re-run. Errors: as
// [Semaphore.SetCapacity]'s (semaphore for a nil one).
func (s *Semaphore) Resume(ctx context.Context) error {
	if err := s.check(); err != nil {
		return engine.OpError(hooks.SemaphoreUpdate, engine.Keys{}, err)
	}
	return s.configure(ctx, hooks.SemaphoreUpdate, verbResume, s.capacity)
}

// The verbs of semaphore_configure.
const (
	verbCapacity = "capacity"
	verbDrain    = "drain"
	verbResume   = "resume"
)

// configure runs semaphore_configure's verb once, admitted as name.
func (s *Semaphore) configure(ctx context.Context, name, verb string, capacity int64) error {
	ctx, op, err := s.e.Admit(ctx, name, primitive, s.keys)
	if err != nil {
		return err
	}
	_, err = configureScript.Run(ctx, s.e, s.keys, verb, capacity)
	return op.End(err)
}
