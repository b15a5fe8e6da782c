package ratelimit

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/instrument"
	"github.com/coordkit/coordination/internal/sentinel"
)

const primitive = "rate_limit"

// Limiter is a consumptive distributed rate limiter on one Redis key
// (fixed window, sliding window, token bucket, GCRA, throttle, sliding log
// or composite), built
// by [New] with the settings of its algorithm. Every process whose limiter
// uses the same key and algorithm shares one budget; each decision is one
// Lua script run atomically on the server with the server's clock.
//
// Its methods follow golang.org/x/time/rate: [Limiter.Allow] decides at
// once, [Limiter.Wait] waits, [Limiter.Reserve] holds an estimate to
// settle. A Limiter is safe for concurrent use by multiple goroutines. The
// zero value is not usable.
//
// (A [ConcurrencyLimiter] is built on the same machinery: it holds one
// Limiter whose algorithm is concurrency, never returned to callers.)
type Limiter struct {
	e    *engine.Engine
	key  string // as the caller gave it
	keys engine.Keys
	opts options

	// settingsMu is held shared by every attempt (one consistent set of
	// settings each) and exclusively by Update.
	settingsMu sync.RWMutex
	sp         *spec

	granted, rejected atomic.Int64
	available         atomic.Int64
	active            atomic.Int64 // calls in progress (for partition eviction)

	mu     sync.Mutex
	closed bool
	queue  list.List // of *waiter
	queued int64     // permits in queue
	heldM  map[*held]struct{}

	batch *batch // WithBatch's block; nil without

	// alt decides in this process: every decision of a local limiter
	// (NewLocal), a Redis limiter's while Redis is unavailable
	// (WithLocalFallback); nil without.
	alt *localState
}

// Statistics are one limiter instance's counters, not cluster-wide figures.
type Statistics struct {
	// Granted counts grants returned by this instance: allowed decisions
	// and reservations, acquired concurrency leases (including those
	// granted by FailOpen).
	Granted int64
	// Rejected counts refusals returned by this instance: refused
	// decisions and reservations, and [*WaitError] refusals of Wait,
	// TryAcquire and Acquire (not a context that ended while queued).
	Rejected int64
	// QueuedPermits is the number of permits waiting in the local queue now.
	QueuedPermits int64
	// AvailablePermits is the number of free permits in the latest reply
	// from Redis (a local limiter, or a local fallback: the latest local
	// decision), or -1 before the first. Other processes may have used
	// them since.
	AvailablePermits int64
}

// decision is one answer, from a script or decided locally.
type verdict struct {
	acquired  bool
	denied    bool
	available int64         // -1: the server was not asked
	retry     time.Duration // with hasRetry: the server-computed retry time
	hasRetry  bool
	hint      time.Duration // concurrency: earliest lease expiry, 0: none
	held      *held
	mark      int64 // a refundable grant's mark (see how), -1: none
	permits   int
	tooLarge  bool // refused because the permits exceed the capacity (the middleware's form)
	listed    bool // granted without a decision: the identity is on the allow list
	near      bool // granted by Redis, leaving at most a fifth of the capacity free
	loc       bool // decided in this process (a local limiter, a fallback)
}

// refused is a refusal decided without the server: a full queue, an
// evicted waiter.
var refused = verdict{available: -1, mark: -1}

// how is how a call decides: a plain call (Allow, Wait, Reserve) is 0.
type how uint8

const (
	// oversize: more permits than the capacity are a refusal marked
	// tooLarge instead of an error (the middleware's form).
	oversize how = 1 << iota
	// refundable: a grant carries its mark (ops D, S: a longer reply),
	// which a refund names (the middleware's policies before the last).
	refundable
)

// tooLargeRefusal is the refusal of a request for more permits than the
// capacity, in the middleware's form (oversize): decided without the
// server.
var tooLargeRefusal = verdict{available: -1, mark: -1, tooLarge: true}

// deniedDecision is the refusal of an identity on the deny list.
var deniedDecision = verdict{available: -1, mark: -1, denied: true}

// Instrument attributes, built once.
var (
	capacityAttrs    = instrument.Attrs(attribute.String("reason", "capacity"))
	denyListAttrs    = instrument.Attrs(attribute.String("reason", "deny_list"))
	allowListAttrs   = instrument.Attrs(attribute.String("reason", "allow_list"))
	unavailableAttrs = instrument.Attrs(attribute.String("reason", "unavailable"))
	failOpenAttrs    = instrument.Attrs(attribute.String("failure_mode", "fail_open"))
	failClosedAttrs  = instrument.Attrs(attribute.String("failure_mode", "fail_closed"))
	failErrorAttrs   = instrument.Attrs(attribute.String("failure_mode", "return_error"))
)

func newLimiter(coord *coordination.Coordinator, key string, s Settings, opts []Option) (*Limiter, error) {
	e, err := engine.Of(coord)
	if err != nil {
		return nil, err
	}
	if err := check.Key("key", key); err != nil {
		return nil, err
	}
	l := &Limiter{e: e, key: key, keys: e.Key(key), opts: options{queueLimit: defaultQueue, reserve: DefaultReservationTimeout}}
	if err := check.Apply(&l.opts, opts); err != nil {
		return nil, err
	}
	if c, ok := s.(concurrency); ok {
		c.lease = l.opts.lease // WithLeaseDuration is part of its settings
		s = c
	} else if l.opts.lease != 0 {
		return nil, check.InvalidArgument("leaseDuration", "WithLeaseDuration applies to NewConcurrency only")
	}
	if l.sp, err = specOf("settings", s); err != nil {
		return nil, err
	}
	if err := l.initBatch(); err != nil {
		return nil, err
	}
	if err := l.initFallback(); err != nil {
		return nil, err
	}
	l.available.Store(-1)
	return l, nil
}

func checkPermits(permits int) error {
	if permits < 0 {
		return check.InvalidArgument("permits", "must be >= 0, got %d", permits)
	}
	return nil
}

// spec returns the current settings.
func (l *Limiter) spec() *spec {
	l.settingsMu.RLock()
	defer l.settingsMu.RUnlock()
	return l.sp
}

// Allow asks for permits once, in one round trip, without waiting
// (admitted through hooks as RATE LIMIT ACQUIRE; a refusal is an answer,
// not a failure). The decision says whether they were granted and, when
// not, may carry RetryAfter. It does not take a place in the local queue: other
// callers waiting in [Limiter.Wait] are not ahead of it.
//
// permits = 0 probes whether a permit is free without taking it. permits
// above the limiter's
// capacity (a composite's: its smallest component's) can never be granted
// and are an error, with nothing admitted or sent. With [WithDenyList], a
// denied identity is refused first.
//
// Every call consumes at most once, whatever the client's retry setting
// and however busy the key: its script is never sent again once it may
// have run (an attempt that provably did not run, such as a refused dial
// or a pool timeout, is retried), so a reply lost after the write is an
// error for which coordination.IsAmbiguous reports true (the permits may
// have been consumed, once), which the failure mode answers (see the
// package documentation).
//
// Errors: coordination.ErrInvalidArgument naming "permits" for negative
// permits or more than the capacity (nothing is admitted or sent; the
// message gives the capacity); coordination.ErrClosed after
// Close; the context's error when ctx ends (in every failure mode); errors
// matching coordination.ErrConfigMismatch (another algorithm on the key,
// or other settings with [WithStrictSettings]), coordination.ErrBadState
// when the key holds unexpected data; the
// hook's error when a hook rejects; Redis and network errors (also of the
// deny list's read) when the failure mode is ReturnError. A call whose
// reply never came back (timeout, cancellation, broken connection) may
// still have consumed its permits on the server, once.
func (l *Limiter) Allow(ctx context.Context, permits int) (Decision, error) {
	r, err := l.allow(ctx, permits, 0)
	return r.decision(), err
}

// allow is Allow; with oversize, more permits than the capacity are a
// refusal without RetryAfter marked tooLarge instead of an error (the
// middleware's form: such a request is refused with the policy's status
// and a detail saying that waiting will not help).
func (l *Limiter) allow(ctx context.Context, permits int, h how) (result, error) {
	ctx, op, err := l.begin(ctx, permits, h)
	if err != nil {
		return result{}, err
	}
	defer l.active.Add(-1)
	d, err := l.take(ctx, op, permits, h)
	return l.settle(ctx, op, d, err)
}

// tooLarge is the error of a request for more permits than the capacity.
func tooLarge(permits, capacity int) error {
	return check.InvalidArgument("permits", "%s can never be granted: the limiter's capacity is %d", check.Plural(permits, "permit"), capacity)
}

// begin starts an Allow, Wait or Reserve: it validates permits (nothing
// admitted for bad input; more than the capacity too, unless oversize),
// admits the call through hooks as RATE LIMIT
// ACQUIRE, refuses a closed limiter and counts the call as active (the
// caller must decrement l.active when begin returns a nil error).
func (l *Limiter) begin(ctx context.Context, permits int, h how) (context.Context, engine.Op, error) {
	if l == nil || l.e == nil {
		return ctx, engine.Op{}, engine.OpError(hooks.RateLimitAcquire, engine.Keys{}, check.InvalidArgument("limiter", "must not be nil; use New or NewConcurrency"))
	}
	if err := checkPermits(permits); err != nil {
		return ctx, engine.Op{}, engine.OpError(hooks.RateLimitAcquire, l.keys, err)
	}
	if c := l.spec().capacity; permits > c && h&oversize == 0 {
		return ctx, engine.Op{}, engine.OpError(hooks.RateLimitAcquire, l.keys, tooLarge(permits, c))
	}
	ctx, op, err := l.admitOpen(ctx, hooks.RateLimitAcquire)
	if err != nil {
		return ctx, op, err
	}
	l.active.Add(1)
	return ctx, op, nil
}

// admitOpen admits the operation name through hooks and refuses it on a
// closed limiter (the operation then ends with coordination.ErrClosed).
func (l *Limiter) admitOpen(ctx context.Context, name string) (context.Context, engine.Op, error) {
	ctx, op, err := l.e.Admit(ctx, name, primitive, l.keys)
	if err != nil {
		return ctx, engine.Op{}, err
	}
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return ctx, engine.Op{}, op.End(errLimiterClosed)
	}
	return ctx, op, nil
}

// deniedFirst asks the deny list, when the limiter has one, before any
// decision: done reports that it answered (the identity is denied:
// deniedDecision) or failed (err), and the decision is not to be made.
func (l *Limiter) deniedFirst(ctx context.Context) (d verdict, done bool, err error) {
	if l.opts.deny == nil {
		return verdict{}, false, nil
	}
	denied, err := l.opts.deny.member(ctx, l.opts.identity)
	if err != nil {
		return verdict{}, true, err
	}
	if denied {
		return deniedDecision, true, nil
	}
	return verdict{}, false, nil
}

// allowListed is the grant of an identity on the allow list.
var allowListed = verdict{acquired: true, available: -1, mark: -1, listed: true}

// listsFirst asks the deny list, then the allow list, when the limiter
// has them, before any decision: done reports that one answered (denied:
// deniedDecision; allowed: allowListed) or failed (err), and the
// decision is not to be made.
func (l *Limiter) listsFirst(ctx context.Context) (d verdict, done bool, err error) {
	if d, done, err := l.deniedFirst(ctx); done || l.opts.allow == nil {
		return d, done, err
	}
	allowed, err := l.opts.allow.set.member(ctx, l.opts.allowID)
	if err != nil {
		return verdict{}, true, err
	}
	if allowed {
		return allowListed, true, nil
	}
	return verdict{}, false, nil
}

// attempt makes one decision, as part of op (the caller's admitted
// operation): the deny list first, then locally for
// oversized requests (an error unless oversize: the settings may have
// changed since begin), else one script run, all under one set of
// settings.
func (l *Limiter) attempt(ctx context.Context, op engine.Op, permits int, h how) (verdict, error) {
	// While a local fallback decides, the lists are not read from Redis
	// (each read would wait for the outage): an identity is neither
	// denied nor allowed then.
	if l.alt == nil || l.alt.sw == nil || !l.alt.sw.local.Load() {
		if d, done, err := l.listsFirst(ctx); done && (err == nil || l.alt == nil || l.alt.sw == nil || !l.alt.sw.takesOver(ctx, l, err)) {
			return d, err
		}
	}
	l.settingsMu.RLock()
	defer l.settingsMu.RUnlock()
	sp := l.sp
	if permits > sp.capacity {
		if h&oversize == 0 {
			return verdict{}, tooLarge(permits, sp.capacity)
		}
		return tooLargeRefusal, nil
	}
	var (
		d   verdict
		err error
	)
	if sp.alg == algConc {
		d, err = l.concTry(ctx, op, sp, permits)
	} else {
		d, err = l.decide(ctx, sp, permits, h&refundable != 0)
	}
	if err == nil {
		l.available.Store(d.available)
		// Near the limit: at most a fifth of the capacity left free.
		d.near = d.acquired && permits > 0 && d.available >= 0 && d.available*5 <= int64(sp.capacity)
	}
	return d, err
}

// decide runs the decision script, sent at most once (see scripts.go): a
// reply lost after the script may have run is an ambiguous error, never a
// second decision. A refundable decision's grant carries its mark.
func (l *Limiter) decide(ctx context.Context, sp *spec, permits int, refundable bool) (verdict, error) {
	if l.alt != nil {
		return l.decideAlt(ctx, sp, permits, refundable, func() (verdict, error) { return l.decideRedis(ctx, sp, permits, refundable) })
	}
	return l.decideRedis(ctx, sp, permits, refundable)
}

// decideRedis is decide's script run.
func (l *Limiter) decideRedis(ctx context.Context, sp *spec, permits int, refundable bool) (verdict, error) {
	var op any = "d" // constants: boxed without an allocation
	switch {
	case l.opts.strict && refundable:
		op = "S"
	case l.opts.strict:
		op = "s"
	case refundable:
		op = "D"
	}
	var buf [8]any // the arguments on the stack: the engine copies them
	r, err := sp.scripts.decide.Run(ctx, l.e, l.keys, sp.argsTo(buf[:0], op, permits)...)
	if err != nil {
		return verdict{}, err
	}
	d := verdict{acquired: r.Acquired, available: r.Available, retry: r.RetryIn, hasRetry: r.HasRetry, mark: -1}
	if r.Acquired && permits > 0 {
		d.mark, d.permits = r.Mark, permits
	}
	return d, nil
}

// settle turns a verdict or error into the caller's result, applying the
// failure mode, records statistics and metrics, and ends the operation.
func (l *Limiter) settle(ctx context.Context, op engine.Op, d verdict, err error) (result, error) {
	if err != nil {
		if cerr := ctxEnded(ctx); cerr != nil && !errors.Is(err, cerr) {
			// go-redis reports a context deadline that cut a read short as an
			// i/o timeout; it is the caller's cancellation all the same.
			err = fmt.Errorf("%w: %w", cerr, err)
		}
		if engine.Classify(err) == engine.Canceled {
			l.e.Count(rateLimitCanceled, nil)
			return result{}, op.End(err)
		}
		if !redisUnavailable(err) {
			return result{}, op.End(err)
		}
		err = op.End(err) // hooks see the failure whatever the mode; the error names the operation
		switch l.opts.failure {
		case FailOpen:
			l.e.Count(rateLimitUnavailable, failOpenAttrs)
			l.granted.Add(1)
			return result{acquired: true, failedOpen: true, available: -1, cause: err, lim: l}, nil
		case FailClosed:
			l.e.Count(rateLimitUnavailable, failClosedAttrs)
			l.e.Count(rateLimitBlocked, unavailableAttrs)
			l.rejected.Add(1)
			return result{available: -1, cause: err, lim: l}, nil
		default:
			l.e.Count(rateLimitUnavailable, failErrorAttrs)
			return result{}, err
		}
	}
	_ = op.End(nil)
	return l.grant(d), nil
}

// grant turns a verdict into a result and counts it.
func (l *Limiter) grant(d verdict) result {
	if d.acquired {
		l.granted.Add(1)
		if d.listed {
			l.e.Count(rateLimitAllowed, allowListAttrs)
			return result{acquired: true, available: -1, lim: l, mark: -1}
		}
		l.e.Count(rateLimitAllowed, nil)
		if d.near {
			l.e.Count(rateLimitNearLimit, nil)
		}
		return result{acquired: true, available: d.available, held: d.held, lim: l, mark: d.mark, permits: d.permits, near: d.near, loc: d.loc}
	}
	l.rejected.Add(1)
	if d.denied {
		l.e.Count(rateLimitBlocked, denyListAttrs)
		return result{available: -1, denied: true, lim: l}
	}
	l.e.Count(rateLimitBlocked, capacityAttrs)
	return result{available: d.available, hasRetry: d.hasRetry, retry: d.retry, lim: l, tooLarge: d.tooLarge}
}

// Statistics returns this instance's counters. It does no I/O.
func (l *Limiter) Statistics() Statistics {
	l.mu.Lock()
	q := l.queued
	l.mu.Unlock()
	return Statistics{Granted: l.granted.Load(), Rejected: l.rejected.Load(), QueuedPermits: q, AvailablePermits: l.available.Load()}
}

// errLimiterClosed is what a call on a closed limiter returns.
var errLimiterClosed = fmt.Errorf("%w: the limiter was closed", sentinel.ErrClosed)

// Close fails queued requests with coordination.ErrClosed and makes later
// calls fail the same way. Close does not delete the limiter's Redis
// state; another limiter on the same key continues with it. With
// [WithBatch], Close gives back the unused permits of the current block
// (one command, waiting at most 1 s for it), unless the coordinator was
// shut down before: nothing is sent then, and those permits come back
// with the limiter's own refill or window. It is
// idempotent, safe on a nil *Limiter, and always returns nil.
func (l *Limiter) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	for el := l.queue.Front(); el != nil; el = el.Next() {
		w := el.Value.(*waiter)
		w.state = wClosed
		w.elem = nil
		w.signal()
	}
	if n := l.queue.Len(); n > 0 {
		l.e.Add(rateLimitQueued, -int64(n))
	}
	l.queue.Init()
	l.queued = 0
	hs := make([]*held, 0, len(l.heldM))
	for h := range l.heldM {
		hs = append(hs, h)
	}
	l.heldM = nil
	l.mu.Unlock()
	for _, h := range hs {
		if h.h != nil { // a local lease is not renewed: nothing to stop
			h.h.Lose(errClosedLease)
		}
	}
	l.closeBatch()
	return nil
}

// errClosedLease is the cause of a held concurrency lease's context when
// its limiter was closed.
var errClosedLease = &sentinel.LostError{Reason: "the limiter was closed; the lease is no longer renewed"}

// busy reports whether the limiter has calls in progress, queued waiters or
// held concurrency leases (a partitioned limiter never evicts it then).
func (l *Limiter) busy() bool {
	if l.active.Load() > 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for h := range l.heldM {
		if h.h != nil && !h.h.Held() {
			delete(l.heldM, h) // lost or expired locally
		}
	}
	return l.queue.Len() > 0 || len(l.heldM) > 0
}

// remember records a held concurrency lease; it reports false when the
// limiter is closed (the lease then is not renewed).
func (l *Limiter) remember(h *held) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	if l.heldM == nil {
		l.heldM = map[*held]struct{}{}
	}
	l.heldM[h] = struct{}{}
	return true
}

// forget drops a released lease and wakes the queue's head: permits were
// returned here.
func (l *Limiter) forget(h *held) {
	l.mu.Lock()
	delete(l.heldM, h)
	if w := l.headLocked(); w != nil {
		w.signal()
	}
	l.mu.Unlock()
}

// wakeHead wakes the queue's head: permits were returned on the key by
// something else than a lease of this limiter (ForceRelease).
func (l *Limiter) wakeHead() {
	l.mu.Lock()
	if w := l.headLocked(); w != nil {
		w.signal()
	}
	l.mu.Unlock()
}

// isClosed reports whether Close was called.
func (l *Limiter) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// ctxEnded returns ctx's error, or context.DeadlineExceeded when its
// deadline has passed but its timer has not fired yet (a read cut short by
// the deadline can return first).
func ctxEnded(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// redisUnavailable reports whether err means Redis could not give a
// decision (a network error, a stopped server, an error reply such as
// LOADING, READONLY, NOPERM or NOAUTH), as opposed to a usage error: a
// closed limiter, an invalid argument, or a key holding other settings or
// foreign data, which every failure mode returns as an error.
func redisUnavailable(err error) bool {
	return !errors.Is(err, sentinel.ErrClosed) && !errors.Is(err, sentinel.ErrInvalidArgument) &&
		!errors.Is(err, sentinel.ErrConfigMismatch) && !errors.Is(err, sentinel.ErrBadState)
}
