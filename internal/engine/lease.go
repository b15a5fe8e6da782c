package engine

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/instrument"
	"github.com/coordkit/coordination/internal/sentinel"
	"github.com/coordkit/coordination/internal/timing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// LeaseKind describes one kind of held lease (a lock, a fenced lock, a
// semaphore permit, a concurrency lease ...): its hook names, its scripts
// and its instruments. Primitives declare one as a package variable; it is
// immutable after first use and shared by every handle of the kind.
//
// Script arguments follow one convention: a lease is identified by its
// keys and its id arguments (ARGV[1..k], usually the owner token); the
// acquire script takes id..., ttl ms, extra...; refresh takes id..., ttl
// ms; verify and release take id... only, and release publishes on
// the key's channel itself (the Lua fragment notify).
type LeaseKind struct {
	Primitive                               string // hooks primitive kind, e.g. "lock"
	AcquireOp, RenewOp, VerifyOp, ReleaseOp string // hook operation names

	Acquire *Script[decode.Grant]
	// First, when set, is sent instead of Acquire for a non-blocking
	// acquisition and for the first attempt of a blocking one: a plain
	// command cheaper than the script (the lock's SET NX GET PX), with the
	// same arguments and a decode.Grant decoder that recognises the caller's own
	// lease after a re-send. Later attempts of a blocking acquisition use
	// the Acquire script.
	First   *Command[decode.Grant]
	Refresh *Script[bool]
	Verify  *Script[bool]
	Release *Script[decode.Outcome]
	// Abandon, when set, is run instead of Release by the background
	// cleanup of an ambiguous acquisition, with the release's keys and id
	// and one more argument, a record's TTL in ms ([AbandonFor]): it
	// releases the id if held and leaves a record of it that the kind's
	// Acquire (and First) refuse for that id, so that the acquisition's
	// request, still on its way and reaching the server after the cleanup,
	// takes nothing. Its reply reads as Release's.
	Abandon *Script[decode.Outcome]

	// WaitFlag makes the Acquire script take one more argument after the
	// extra ones: "1" on the attempts of a blocking acquisition (which may
	// sleep after a refusal: the script then marks the lease so that its
	// release notifies waiters), "0" on a non-blocking one.
	WaitFlag bool
	// Queued says that the Acquire script queues a refused blocking
	// caller, first in first out, and that the releases wake only the
	// queue's head, publishing its id (the first, a string) as the
	// message: a blocking acquisition then wakes only on its own id
	// ([WaitConfig] Only), and when one that sent an attempt fails, its
	// Release script is run in the background ([Engine.Cleanup], owner-checked
	// with its id, as after an ambiguous failure), which takes it out of
	// the queue (and wakes the next head when the lease is free).
	Queued bool
	// HandleKeys is how many of the acquire keys the refresh, verify and
	// release scripts take (the first ones); 0 means all.
	HandleKeys int
	// NoExpiry accepts a TTL of 0: a lease that lasts until released.
	NoExpiry bool
	// KeepAliveEvery is the keep-alive's renewal period as a fraction of
	// the TTL: it renews every TTL/KeepAliveEvery. 0 means 3.
	KeepAliveEvery int

	Metrics instrument.Lease
	// Attrs are the attributes of every instrument of the kind, e.g.
	// kind=lock; none when empty.
	Attrs []attribute.KeyValue

	once                           sync.Once
	base, waitAcquired, waitGaveUp metric.MeasurementOption
	// baseAdd and baseRecord are base as option lists, built once: passing
	// a fresh variadic list to an instrument allocates on every call.
	baseAdd    []metric.AddOption
	baseRecord []metric.RecordOption
	// ttl is the last TTL argument, converted to an interface once: most
	// users of a kind use one TTL.
	ttl atomic.Pointer[boxedInt]
}

type boxedInt struct {
	n int64
	v any
}

// ttlArg returns ms as a command argument.
func (k *LeaseKind) ttlArg(ms int64) any {
	if b := k.ttl.Load(); b != nil && b.n == ms {
		return b.v
	}
	b := &boxedInt{n: ms, v: ms}
	k.ttl.Store(b)
	return b.v
}

func (k *LeaseKind) init() {
	k.once.Do(func() {
		k.base = instrument.Attrs(k.Attrs...)
		k.baseAdd = []metric.AddOption{k.base}
		k.baseRecord = []metric.RecordOption{k.base}
		k.waitAcquired = instrument.Attrs(append(append([]attribute.KeyValue(nil), k.Attrs...), attribute.String("result", "acquired"))...)
		k.waitGaveUp = instrument.Attrs(append(append([]attribute.KeyValue(nil), k.Attrs...), attribute.String("result", "gave_up"))...)
	})
}

// forever is what [Handle.Remaining] returns for a held lease without
// expiry: the largest time.Duration.
const forever = time.Duration(math.MaxInt64)

type state int

const (
	held state = iota
	released
	lost
	shut // ended locally by Engine.Shutdown, still on the server until its TTL
)

// Handle is the client-side life of one held lease, the same for every
// kind: a local deadline estimated from the instant before the request that
// set the TTL was sent, owner-checked refresh, verify and release, a
// keep-alive, and a context that exists only once someone asks for it.
// Its methods are safe for concurrent use; on a nil *Handle they report a
// lease that is not held.
//
// Release semantics, one for every kind: Release marks the handle released
// locally before it sends anything (its context is cancelled with
// sentinel.ErrReleased; a keep-alive renewal in flight can no longer mark it lost);
// when the release fails with a transient error or a cancellation, the
// owner-checked release is retried in the background (bounded by the
// lease's remaining time and [CleanupLimit]) and the caller gets the
// error; a second Release returns decode.AlreadyReleased without asking Redis.
//
// Its server operations go through a [Backend]: the kind's scripts on one
// engine, or a group's (redlock's quorum, see [NewGroupHandle]).
//
// After [Engine.Shutdown] (of any of its engines) a held handle ends
// locally, without sending anything: its keep-alive stops, its context is cancelled with
// [errLeaseShutdown], Remaining returns 0, and Refresh, Verify and Release
// fail with an error wrapping sentinel.ErrClosed; the lease ends on the server at
// its TTL. A handle registers with the engine only once its context or
// keep-alive exists; one without either ends when it is next used.
type Handle struct {
	e     *Engine   // the engine of the lease (of a group: its first)
	es    []*Engine // every engine the lease lives on: one, or a group's
	one   [1]*Engine
	b     Backend
	kind  *LeaseKind
	keys  Keys
	id    []any
	start time.Time

	// refreshMu serializes refreshes, so that the expiry the server applied
	// last is the one recorded here.
	refreshMu sync.Mutex

	mu       sync.Mutex
	ttl      time.Duration
	deadline time.Time // zero: no expiry
	state    state
	cause    error
	ctx      context.Context // created on first use
	cancel   context.CancelCauseFunc
	timer    *time.Timer // local expiry; only once ctx exists
	keep     chan struct{}
	// moved tells a running keep-alive that the deadline or the TTL
	// changed (a refresh), so that it reschedules its next renewal; nil
	// until a keep-alive starts.
	moved chan struct{}
	unreg func() // unregisters shutdownEnd from the engine; nil when not registered
	// releasedHeld: the lease was held, within its local deadline, when
	// the last Release began (see [Handle.RunRelease]).
	releasedHeld bool
}

// heldAtRelease reports whether the lease was held, within its local
// deadline, when the last Release began.
func (h *Handle) heldAtRelease() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.releasedHeld
}

func newHandle(e *Engine, kind *LeaseKind, keys Keys, id []any, sent time.Time, ttl time.Duration) *Handle {
	h := &Handle{e: e, b: kindBackend{}, kind: kind, keys: keys, id: id, start: sent, ttl: ttl}
	h.one[0] = e
	h.es = h.one[:]
	if kind.Metrics.Active != nil {
		kind.init()
		e.Add(kind.Metrics.Active, 1, kind.baseAdd...)
	}
	if ttl > 0 {
		h.deadline = sent.Add(ttl - timing.Drift(ttl))
	}
	return h
}

// Backend carries a Handle's server operations: refresh, verify and
// release (with its background retry). The Handle keeps the lease's local
// life, the same for every backend: deadline, context, keep-alive, the
// release semantics and shutdown. The default backend is the LeaseKind's
// scripts on one engine; redlock's quorum of nodes is another. A backend's
// methods may be called concurrently (refreshes one at a time).
type Backend interface {
	// CheckTTL validates a refresh's ttl and returns it in milliseconds:
	// an error wrapping sentinel.ErrInvalidArgument naming "ttl" otherwise.
	CheckTTL(h *Handle, ttl time.Duration) (int64, error)
	// Drift is the clock-drift allowance taken off ttl for the local
	// deadline.
	Drift(ttl time.Duration) time.Duration
	// Refresh resets the lease's TTL to ttl (ms milliseconds) on the
	// servers, owner-checked. False reports the lease gone; a backend that
	// ends the lease on an error calls h.Lose before returning it.
	Refresh(ctx context.Context, h *Handle, ttl time.Duration, ms int64) (bool, error)
	// Verify reports whether the servers hold the lease for this owner.
	Verify(ctx context.Context, h *Handle) (bool, error)
	// Release removes the lease, owner-checked, and retries what failed
	// transiently in the background for at most left.
	Release(ctx context.Context, h *Handle, left time.Duration) (decode.Outcome, error)
	// Settled reports whether a later Release returns decode.AlreadyReleased
	// without asking the servers (false: a Release that returned an error
	// may be called again to ask those that did not answer).
	Settled() bool
	// Expired is called once when the local deadline ended the lease.
	Expired(h *Handle)
}

// kindBackend is the default Backend: the kind's scripts on one engine.
type kindBackend struct{}

// CheckTTL converts ttl to whole milliseconds (0 only for a kind with
// NoExpiry), or returns an error wrapping sentinel.ErrInvalidArgument naming "ttl".
func (kindBackend) CheckTTL(h *Handle, ttl time.Duration) (int64, error) {
	return check.TTLMillis(ttl, h.kind.NoExpiry)
}

// Drift is the single-node allowance, [timing.Drift].
func (kindBackend) Drift(ttl time.Duration) time.Duration { return timing.Drift(ttl) }

// Refresh runs the kind's refresh script (owner-checked) with ms as the
// new TTL in milliseconds: one round trip.
func (kindBackend) Refresh(ctx context.Context, h *Handle, _ time.Duration, ms int64) (bool, error) {
	ttlArg := [1]any{h.kind.ttlArg(ms)}
	return h.kind.Refresh.run(ctx, h.e, h.keys, h.id, ttlArg[:])
}

// Verify runs the kind's verify script: one round trip.
func (kindBackend) Verify(ctx context.Context, h *Handle) (bool, error) {
	return h.kind.Verify.Run(ctx, h.e, h.keys, h.id...)
}

// Release runs the kind's release script, and on a non-terminal error
// retries it in the background for at most left (CleanupLimit for a lease
// without expiry).
func (kindBackend) Release(ctx context.Context, h *Handle, left time.Duration) (decode.Outcome, error) {
	out, err := h.RunRelease(ctx, h.e, h.kind.Release, h.keys, h.id...)
	if err != nil && Classify(err) != Terminal {
		if h.ttl == 0 {
			left = CleanupLimit
		}
		h.e.Cleanup("release", left, func(ctx context.Context) error {
			_, err := h.kind.Release.Run(ctx, h.e, h.keys, h.id...)
			return err
		})
	}
	return out, err
}

// RunRelease runs the release script s of the handle's lease on engine e
// (keys k, arguments args) and reports what its first send did, without
// any record on the server: when go-redis re-sent the script after a write
// whose reply was lost (the engine counted two writes) and the re-send
// found the lease gone (decode.AlreadyReleased) or another owner's
// (decode.NotOwned, a holder that came after the first send released),
// the first send released it, provided the handle still held the lease
// locally when Release began (before its local deadline, not found lost):
// nobody else could have ended it meanwhile, except by deleting the key
// by hand (or a forced release) while the first reply was lost, which is
// then reported as Released too. Without a re-send the reply stands.
func (h *Handle) RunRelease(ctx context.Context, e *Engine, s *Script[decode.Outcome], k Keys, args ...any) (decode.Outcome, error) {
	out, st, err := s.runSent(ctx, e, k, args)
	if err == nil && out != decode.Released && st.resent() && h.heldAtRelease() {
		out = decode.Released
	}
	return out, err
}

// Settled is always true: one node answers once.
func (kindBackend) Settled() bool { return true }

// Expired does nothing: the key expires on its node by its TTL.
func (kindBackend) Expired(*Handle) {}

// NewGroupHandle returns the handle of a lease held on several engines
// through b (redlock's quorum), acquired by a request sent at sent with
// ttl: its operations are admitted with AdmitGroup under kind's names, and
// the Shutdown of any of the engines ends it. Their errors name the first
// of keys (the lease's key as the caller gave it; b runs its own keys).
// Nothing is sent.
func NewGroupHandle(es []*Engine, kind *LeaseKind, b Backend, keys Keys, sent time.Time, ttl time.Duration) *Handle {
	h := &Handle{e: es[0], es: es, b: b, kind: kind, keys: keys.First(), start: sent, ttl: ttl}
	h.deadline = sent.Add(ttl - b.Drift(ttl))
	if kind.Metrics.Active != nil {
		kind.init()
		h.e.Add(kind.Metrics.Active, 1, kind.baseAdd...)
	}
	return h
}

// admit admits the operation name of the handle's kind: through the hooks
// of its engine, or of every engine of a group.
func (h *Handle) admit(ctx context.Context, name string) (context.Context, Op, error) {
	if len(h.es) > 1 {
		return AdmitGroup(ctx, h.es, name, h.kind.Primitive, h.keys)
	}
	return h.e.Admit(ctx, name, h.kind.Primitive, h.keys)
}

// closed reports whether the Shutdown of one of the handle's engines began.
func (h *Handle) closed() bool { return ClosedAny(h.es) != nil }

// Adopt returns the handle of a lease that a script of the primitive's own
// created (one whose answer is more than a Grant: idempotency's Begin),
// sent at sent with ttl, identified by id in kind's scripts. Nothing is
// sent.
func (e *Engine) Adopt(kind *LeaseKind, keys Keys, id []any, sent time.Time, ttl time.Duration) *Handle {
	return newHandle(e, kind, keys, id, sent, ttl)
}

// Forget ends a held handle locally without sending anything, for a lease
// that another operation ended (a completed or abandoned claim): its
// context is cancelled with sentinel.ErrReleased and its keep-alive stops.
func (h *Handle) Forget() {
	if h == nil {
		return
	}
	h.end(released, sentinel.ErrReleased)
}

// Context returns a context cancelled when the lease is released (cause
// sentinel.ErrReleased), lost or locally expired (cause a *[sentinel.LostError]), or its
// engine shut down (cause [errLeaseShutdown]), whose Deadline is the
// lease's current local deadline (see [leaseContext]). It is created on the
// first call.
func (h *Handle) Context() context.Context {
	if h == nil {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(sentinel.ErrNotHeld)
		return ctx
	}
	h.checkExpiry()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ctx == nil {
		ctx, cancel := leaseContext(h.localDeadline)
		h.ctx = ctx
		if h.state == held && !h.registerLocked() {
			h.state, h.cause = shut, errLeaseShutdown
		}
		if h.state != held {
			cancel(h.cause)
		} else {
			h.cancel = cancel
			if !h.deadline.IsZero() {
				h.timer = time.AfterFunc(time.Until(h.deadline), h.checkExpiry)
			}
		}
	}
	return h.ctx
}

// localDeadline returns the local deadline and true, or false for a lease
// without expiry.
func (h *Handle) localDeadline() (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.deadline, !h.deadline.IsZero()
}

// leaseContext returns a held lease's context, cancelled only by cancel,
// whose Deadline reports deadline(): the lease's local deadline as it is
// when asked. A successful renewal moves it later, so, unlike a context of
// context.WithDeadline, successive calls to Deadline can return later
// times; a database or HTTP client that reads it when a request starts
// bounds that request by the lease as known then, and a context derived
// with context.WithTimeout or WithDeadline keeps the earlier of its own
// deadline and the lease's at its creation. The local deadline passing
// does not cancel the context by itself: the caller's timer does.
func leaseContext(deadline func() (time.Time, bool)) (context.Context, context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &leaseCtx{Context: ctx, deadline: deadline}, cancel
}

type leaseCtx struct {
	context.Context
	deadline func() (time.Time, bool)
}

// Deadline returns the lease's local deadline as it is now, and false for
// a lease without expiry.
func (c *leaseCtx) Deadline() (time.Time, bool) { return c.deadline() }

// String names the context kind, as the standard library's contexts do.
func (c *leaseCtx) String() string { return "coordination.LeaseContext" }

// TTL returns the TTL of the last successful acquire or refresh.
func (h *Handle) TTL() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ttl
}

// Remaining returns the local estimate of the time left: 0 once released,
// lost or past the local deadline, [forever] for a lease without expiry.
func (h *Handle) Remaining() time.Duration {
	if h == nil {
		return 0
	}
	h.mu.Lock()
	st, dl := h.state, h.deadline
	h.mu.Unlock()
	switch {
	case st != held:
		return 0
	case h.closed():
		h.shutdownEnd()
		return 0
	case dl.IsZero():
		return forever
	}
	if left := time.Until(dl); left > 0 {
		return left
	}
	h.checkExpiry()
	return 0
}

// Held reports whether the handle still considers itself the holder.
func (h *Handle) Held() bool { return h.Remaining() > 0 }

// checkExpiry marks the lease lost when its local deadline has passed.
func (h *Handle) checkExpiry() {
	h.mu.Lock()
	if h.state == held && h.closed() {
		h.mu.Unlock()
		h.shutdownEnd()
		return
	}
	if h.state != held || h.deadline.IsZero() || time.Now().Before(h.deadline) {
		h.mu.Unlock()
		return
	}
	cancel := h.endLocked(lost, &sentinel.LostError{Reason: "local lease deadline passed without a successful renewal"})
	h.mu.Unlock()
	h.afterEnd(lost, cancel)
	h.b.Expired(h)
}

// Lose marks the lease lost with cause (which should match sentinel.ErrLost): the
// context is cancelled, the keep-alive stops, the loss is counted. It does
// nothing when the lease was already released or lost.
func (h *Handle) Lose(cause error) { h.end(lost, cause) }

// end moves a held lease to st with cause: the context is cancelled, the
// keep-alive stops, the end is counted. It does nothing once the lease
// ended.
func (h *Handle) end(st state, cause error) {
	h.mu.Lock()
	if h.state != held {
		h.mu.Unlock()
		return
	}
	cancel := h.endLocked(st, cause)
	h.mu.Unlock()
	h.afterEnd(st, cancel)
}

// endLocked moves a held lease to st with cause and returns the context's
// cancel function (nil when no context exists yet); h.mu must be held.
func (h *Handle) endLocked(st state, cause error) context.CancelCauseFunc {
	h.state, h.cause = st, cause
	if h.timer != nil {
		h.timer.Stop()
	}
	if h.keep != nil {
		close(h.keep)
		h.keep = nil
	}
	if h.unreg != nil {
		h.unreg()
		h.unreg = nil
	}
	c := h.cancel
	h.cancel = nil
	return c
}

// registerLocked registers the handle to be ended by the Shutdown of any
// of its engines (once, when its context or keep-alive starts) and reports
// false when one has begun; h.mu must be held.
func (h *Handle) registerLocked() bool {
	if h.unreg != nil {
		return true
	}
	unregs := make([]func(), 0, len(h.es))
	for _, e := range h.es {
		u, ok := e.OnShutdown(h.shutdownEnd)
		if !ok {
			for _, u := range unregs {
				u()
			}
			return false
		}
		unregs = append(unregs, u)
	}
	h.unreg = unregs[0]
	if len(unregs) > 1 {
		h.unreg = func() {
			for _, u := range unregs {
				u()
			}
		}
	}
	return true
}

// shutdownEnd ends a held lease locally because its engine shut down: the
// keep-alive stops, the context is cancelled with errLeaseShutdown, nothing
// is sent (the lease ends on the server at its TTL).
func (h *Handle) shutdownEnd() { h.end(shut, errLeaseShutdown) }

func (h *Handle) afterEnd(st state, cancel context.CancelCauseFunc) {
	if cancel != nil {
		cancel(h.causeOf())
	}
	k := h.kind
	k.init()
	if st == lost && k.Metrics.Lost != nil {
		h.e.Add(k.Metrics.Lost, 1, k.baseAdd...)
	}
	if k.Metrics.Active != nil { // counted by newHandle, NewGroupHandle
		h.e.Add(k.Metrics.Active, -1, k.baseAdd...)
	}
	if k.Metrics.Hold != nil {
		h.e.Histogram(k.Metrics.Hold).Record(context.Background(), time.Since(h.start).Seconds(), k.baseRecord...)
	}
}

func (h *Handle) causeOf() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cause
}

// setDeadlineLocked records a TTL applied by a request sent at sent; h.mu
// must be held.
func (h *Handle) setDeadlineLocked(sent time.Time, ttl time.Duration) {
	h.ttl = ttl
	defer h.movedLocked()
	if ttl == 0 {
		h.deadline = time.Time{}
		if h.timer != nil {
			h.timer.Stop()
		}
		return
	}
	h.deadline = sent.Add(ttl - h.b.Drift(ttl))
	h.resetTimerLocked()
}

// movedLocked tells a running keep-alive that the deadline or the TTL
// changed; h.mu must be held.
func (h *Handle) movedLocked() {
	if h.moved == nil {
		return
	}
	select {
	case h.moved <- struct{}{}:
	default: // told already
	}
}

func (h *Handle) resetTimerLocked() {
	if h.timer != nil {
		h.timer.Reset(time.Until(h.deadline))
	} else if h.ctx != nil && h.state == held {
		h.timer = time.AfterFunc(time.Until(h.deadline), h.checkExpiry)
	}
}

// Refresh resets the lease's TTL, owner-checked, admitted as the kind's
// RenewOp. It returns false without a Redis call once the handle is
// released or lost; a false answer marks it lost; an error leaves it held
// (when the refresh may have run, the local deadline becomes the earlier of
// the old one and the one ttl gives).
//
// Bad input (a bad ttl; a nil ctx, refused by the admission) is refused
// before admission with an error naming the operation and the lease's
// key, as every error of the refresh does.
func (h *Handle) Refresh(ctx context.Context, ttl time.Duration) (bool, error) {
	if h == nil {
		return false, check.Context(ctx)
	}
	ms, err := h.b.CheckTTL(h, ttl)
	if err != nil {
		return false, OpError(h.kind.RenewOp, h.keys, err)
	}
	ctx, op, err := h.admit(ctx, h.kind.RenewOp)
	if err != nil {
		return false, err
	}
	h.refreshMu.Lock()
	defer h.refreshMu.Unlock()
	if !h.Held() {
		return false, op.End(nil)
	}
	ok, err := h.refresh(ctx, ttl, ms)
	return ok, op.End(err)
}

// refresh runs one refresh; h.refreshMu must be held.
func (h *Handle) refresh(ctx context.Context, ttl time.Duration, ms int64) (bool, error) {
	sent := time.Now()
	ok, err := h.b.Refresh(ctx, h, ttl, ms)
	if err != nil {
		if ttl > 0 && h.e.Ambiguous(err) {
			h.mu.Lock()
			if d := sent.Add(ttl - h.b.Drift(ttl)); h.state == held && (h.deadline.IsZero() || d.Before(h.deadline)) {
				h.deadline = d
				h.resetTimerLocked()
				h.movedLocked()
			}
			h.mu.Unlock()
		}
		return false, err
	}
	if !ok {
		h.Lose(&sentinel.LostError{Reason: "the lease is no longer held by this owner"})
		return false, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state != held {
		return false, nil
	}
	h.setDeadlineLocked(sent, ttl)
	return true, nil
}

// Verify asks Redis whether the lease is still held by this owner,
// admitted as the kind's VerifyOp. A false answer marks the handle lost;
// an error changes nothing. It returns false without a Redis call once the
// handle is released or lost.
func (h *Handle) Verify(ctx context.Context) (bool, error) {
	if h == nil {
		return false, check.Context(ctx)
	}
	ctx, op, err := h.admit(ctx, h.kind.VerifyOp)
	if err != nil {
		return false, err
	}
	if !h.Held() {
		return false, op.End(nil)
	}
	ok, err := h.b.Verify(ctx, h)
	if err != nil {
		return false, op.End(err)
	}
	if !ok {
		h.Lose(&sentinel.LostError{Reason: "verify found the lease held by no one or by another owner"})
	}
	return ok, op.End(nil)
}

// Release deletes the lease if this owner holds it, admitted as the kind's
// ReleaseOp; see the type's documentation for the semantics.
func (h *Handle) Release(ctx context.Context) (decode.Outcome, error) {
	if h == nil {
		if err := check.Context(ctx); err != nil {
			return 0, err
		}
		return decode.AlreadyReleased, nil
	}
	ctx, op, err := h.admit(ctx, h.kind.ReleaseOp)
	if err != nil {
		return 0, err
	}
	out, err := h.GiveBack(ctx)
	return out, op.End(err)
}

// GiveBack is what Release does, as part of the lease owner's own work
// rather than an operation of its own, so not admitted through hooks (as
// keep-alive renewals are not): for a primitive whose public operation
// owns the lease's whole life (a leader's term, given back when Run's
// term ends). Its outcomes and errors are Release's.
func (h *Handle) GiveBack(ctx context.Context) (decode.Outcome, error) {
	if err := ClosedAny(h.es); err != nil {
		h.shutdownEnd()
		return 0, err
	}
	h.checkExpiry()
	h.mu.Lock()
	if h.state == released && h.b.Settled() {
		h.mu.Unlock()
		return decode.AlreadyReleased, nil
	}
	was := h.state
	h.releasedHeld = was == held && (h.deadline.IsZero() || time.Now().Before(h.deadline))
	var cancel context.CancelCauseFunc
	if was == held {
		cancel = h.endLocked(released, sentinel.ErrReleased)
	} else {
		h.state = released // lost before: keep its cause
	}
	left := time.Until(h.deadline) + h.b.Drift(h.ttl)
	h.mu.Unlock()
	if was == held {
		h.afterEnd(released, cancel)
	}
	out, err := h.b.Release(ctx, h, left)
	if err != nil {
		return 0, err
	}
	return out, nil
}

// KeepAlive starts the background renewal at the kind's period (TTL/3 by
// default); see [Handle.KeepAliveEvery].
func (h *Handle) KeepAlive() {
	if h == nil {
		return
	}
	every := h.kind.KeepAliveEvery
	if every <= 0 {
		every = 3
	}
	h.KeepAliveEvery(every)
}

// KeepAliveEvery starts renewing the lease in the background until it is
// released or lost, on the lease's own timeline rather than from the call:
// a renewal is due once TTL/every has passed since the request that set
// the current TTL was sent (the acquisition's, then each successful
// renewal's or refresh's), at once when that moment has passed already (a
// KeepAlive called late, or an acquisition whose reply was slow); a
// Refresh reschedules it, as does a refresh whose outcome is unknown that
// moved the local deadline earlier (see [Handle.renewIn]). every is at
// least 2. Renewals are not admitted through hooks. A renewal that finds
// the lease gone marks it lost; a terminal error marks it lost with a
// *sentinel.LostError carrying the error; transient errors are retried
// with backoff until the local deadline passes. It does nothing when the
// handle keeps alive already, is not held, or has no expiry. It returns at
// once.
func (h *Handle) KeepAliveEvery(every int) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state != held || h.keep != nil || h.ttl == 0 {
		return
	}
	if !h.registerLocked() {
		return // shut down: Remaining and Context end the handle
	}
	// Each engine's Shutdown waits for the keep-alive.
	for i, e := range h.es {
		if !e.track() {
			for _, t := range h.es[:i] {
				t.untrack()
			}
			return
		}
	}
	h.keep = make(chan struct{})
	if h.moved == nil {
		h.moved = make(chan struct{}, 1)
	}
	go func(stop chan struct{}) {
		defer func() {
			for _, e := range h.es {
				e.untrack()
			}
		}()
		h.keepAlive(stop, max(every, 2))
	}(h.keep)
}

// renewIn returns how long until the keep-alive's next renewal is due
// (0: now, or overdue): when Remaining has fallen to due, the local life a
// TTL gives (TTL less the drift allowance) less one period (TTL/every).
// For a deadline set by a request sent at sent, that is sent + TTL/every:
// the period counts from the lease's own timeline, not from the call that
// started the keep-alive or from a timer that fired late, so a lease that
// has little time left is renewed at once rather than left to its local
// deadline while the server still holds it. A deadline that an uncertain
// refresh moved earlier brings it forward by as much. due is at least
// life/every, which matters only for a drift allowance above
// TTL - TTL/every (a redlock's large drift factor with every = 2).
func (h *Handle) renewIn(every int) time.Duration {
	h.mu.Lock()
	ttl, dl := h.ttl, h.deadline
	h.mu.Unlock()
	if ttl == 0 || dl.IsZero() {
		return 0 // the loop ends
	}
	period := ttl / time.Duration(every)
	life := ttl - h.b.Drift(ttl)
	due := max(life-period, life/time.Duration(every))
	return max(time.Until(dl)-due, 0)
}

func (h *Handle) keepAlive(stop chan struct{}, every int) {
	timer := time.NewTimer(h.renewIn(every))
	defer timer.Stop()
	failures := 0 // consecutive failed renewals
	for {
		select {
		case <-stop:
			return
		case <-h.moved:
			// A refresh changed the deadline or the TTL: reschedule on the
			// new timeline, after failures too (a successful refresh moved
			// the deadline later; an uncertain one earlier, and renewing
			// sooner than the backoff is then right).
			failures = 0
			timer.Reset(h.renewIn(every))
			continue
		case <-timer.C:
		}
		if failures == 0 {
			if d := h.renewIn(every); d > 0 {
				timer.Reset(d) // not due: the deadline moved later meanwhile
				continue
			}
		}
		h.refreshMu.Lock()
		ttl := h.TTL()
		left := h.Remaining()
		if ttl == 0 || left == 0 {
			// A Refresh removed the expiry, or the lease is over.
			h.refreshMu.Unlock()
			h.mu.Lock()
			if h.keep == stop {
				close(stop)
				h.keep = nil
			}
			h.mu.Unlock()
			return
		}
		ms, _ := check.Millis("ttl", ttl)
		// Bound each renewal by the time left, so a hung connection cannot
		// hold it past the deadline.
		ctx, cancel := context.WithTimeout(context.Background(), left)
		ok, err := h.refresh(ctx, ttl, ms)
		cancel()
		h.refreshMu.Unlock()
		switch {
		case err == nil && ok:
			failures = 0
			timer.Reset(h.renewIn(every))
		case err == nil:
			h.countRenewalFailure()
			return // refresh marked it lost, or it was released meanwhile
		case h.closed():
			return // Shutdown ended the lease; the refresh was not sent
		case !h.Held():
			h.countRenewalFailure()
			h.e.logger.Warn("coordination: a lease renewal failed; the lease is lost",
				"primitive", h.kind.Primitive, "error", Describe(err))
			return // the backend ended the lease
		default:
			h.countRenewalFailure()
			if Classify(err) == Terminal {
				h.Lose(&sentinel.LostError{Reason: "renewal failed", Err: err})
				return
			}
			failures++
			d := timing.Backoff(failures, 10*time.Millisecond, max(ttl/6, time.Millisecond))
			h.e.logger.Warn("coordination: lease renewal failed; retrying until the local deadline",
				"primitive", h.kind.Primitive, "error", Describe(err), "retry_in", d)
			timer.Reset(d)
		}
	}
}

func (h *Handle) countRenewalFailure() {
	h.kind.init()
	if h.kind.Metrics.RenewalFailures == nil {
		return
	}
	h.e.Add(h.kind.Metrics.RenewalFailures, 1, h.kind.baseAdd...)
}

var leaseInit func(dst any, key, token string, h *Handle) // see [Install]

// InitLease fills dst, a *coordination.Lease, with a held handle h of the
// lease at key (as the caller gave it) held by token.
func InitLease(dst any, key, token string, h *Handle) { leaseInit(dst, key, token, h) }
