package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/instrument"
	"github.com/coordkit/coordination/internal/localrate"
)

// NewLocal returns an in-process limiter: the algorithm of settings (a
// [FixedWindow], [SlidingWindow], [TokenBucket], [GCRA] or [Composite])
// decided in this process's memory, with the same settings validation,
// the same meaning of Available and RetryAfter, and the same
// whole-or-nothing batches as [New]'s limiters, with a monotonic local
// clock in place of the server's. It never talks to Redis, so it keeps
// limiting while Redis is down: an instance guard (a bound on what this
// one process accepts) for a [Policy] or any caller of a [*Limiter]
// (Allow, Wait, Reserve and Settle, Update, Statistics, Close). Nothing
// is shared between processes, nor between two local limiters.
//
// Of the options, [WithQueue] and [WithReservationTimeout] apply; the
// options that need Redis ([WithDenyList], [WithAllowList], [WithStrictSettings],
// [WithBatch], [WithFailureMode] other than ReturnError, [WithLocalFallback],
// [WithLeaseDuration]) are refused with an error naming the option. A
// local limiter has no hooks; it records the rate-limit metrics
// (coordination.rate_limit.allowed, .blocked) and spans through the
// global OpenTelemetry providers (otel.GetMeterProvider(),
// otel.GetTracerProvider()). Its errors name no key. Its state lives
// until the limiter is garbage collected: Close only refuses later calls.
//
// Errors: coordination.ErrInvalidArgument naming "settings" (nil), the
// invalid field of the settings ("limit", "window", "burst" ...), or the
// refused or invalid option.
func NewLocal(settings Settings, opts ...Option) (*Limiter, error) {
	return newLocal(settings, opts)
}

// NewLocalConcurrency returns an in-process concurrency limiter allowing
// limit permits held at once by leases of this process (see
// [NewLocal]). Its leases need no renewal and are never lost:
// [ConcurrencyLease.Release] returns their permits (and wakes the local
// queue); their Context is cancelled by Release (cause
// coordination.ErrReleased) and has no deadline. The methods of the
// embedded coordination.Lease that talk to Redis (Refresh, Verify,
// KeepAlive) and Remaining answer as for a lease no longer held; Key and
// Token are empty. Close does not revoke leases held.
//
// Errors: coordination.ErrInvalidArgument naming "limit" (below 1 or above
// 2^31-1) or the refused or invalid option (as [NewLocal]'s).
func NewLocalConcurrency(limit int, opts ...Option) (*ConcurrencyLimiter, error) {
	l, err := newLocal(concurrency{limit: limit}, opts)
	if err != nil {
		return nil, err
	}
	return &ConcurrencyLimiter{l: l}, nil
}

// WithLocalFallback makes a Redis limiter ([New], [NewConcurrency])
// decide in this process while Redis cannot give decisions, instead of
// applying its [FailureMode]: each replica then enforces its share of the
// limit, computed for replicas replicas (the number of processes sharing
// the key): every capacity (FixedWindow, SlidingWindow, Throttle and
// SlidingLog Limit, TokenBucket Limit, GCRA Burst, the concurrency limit;
// each component of a Composite) becomes ceil(capacity / replicas), and
// every sustained rate is divided by replicas (a TokenBucket's Period and
// a GCRA's Interval, or its Period, multiplied by replicas); windows and a
// Throttle's Quiet keep their length. replicas = 1 keeps the settings as
// they are. The local state starts empty at each switch to local
// decisions: a caller a Throttle blocked in Redis starts a new run of
// attempts on each replica.
//
// A decision is local from the first call that finds Redis unavailable
// (a network error, a stopped server, an error reply such as LOADING,
// READONLY or NOAUTH: what the failure mode would answer; that call is
// then decided locally too) until a call finds Redis answering again.
// While local, calls do not ask Redis, except one call at least 1 s
// after the switch, and 1 s after each failed try, which tries Redis once
// more (the others meanwhile decide locally). A try that is answered switches back. A
// call whose deadline passes while it waits for Redis (a frozen or
// unreachable server seen by a caller with a deadline) returns its error,
// and the calls after it decide locally. The call that tries Redis waits
// as long as the client takes to fail (its dial retries and timeouts:
// keep them short, or give calls deadlines). The caller's cancellation
// and usage errors are returned as without the option. Each switch is logged once (at warning level to local, info
// back; the line names no key, identity or endpoint), counted in
// coordination.rate_limit.fallback (attribute to: local or redis), and
// told to notify (when not nil) with local true, then false: called
// synchronously by the call that switched, it must not block.
//
// Decisions, reservations and leases made locally stay local: a local
// grant's refund and a local reservation's settlement go to the local
// state, a local concurrency lease releases its permits locally (it holds
// nothing in Redis and needs no renewal). While the fallback decides, a
// deny or allow list ([WithDenyList], [WithAllowList]) is not read (each
// read would wait for the outage): no identity is denied or allowed then;
// a read that fails as the switch happens answers "not denied".
//
// Limiters built with the same Option value share one switch: build it
// once for every partition of a [Partitioned] limiter (in the factory's
// closure), and the switch is logged, counted and told once for all of
// them. [WithBatch] cannot be combined with it.
//
// Errors: coordination.ErrInvalidArgument naming "replicas" (below 1 or
// above 2^31-1), or "localFallback" when given to [NewLocal] or
// [NewLocalConcurrency], or with [WithBatch], or when the share of the
// settings is out of range (see the settings types).
func WithLocalFallback(replicas int, notify func(local bool)) Option {
	sw := &fallbackSwitch{replicas: replicas, notify: notify, now: monoMicros}
	return withFallback(sw)
}

// withFallback is WithLocalFallback's option for a switch (a test's
// switch has its own clock).
func withFallback(sw *fallbackSwitch) Option {
	return func(o *options) error {
		if sw.replicas < 1 || sw.replicas > maxLimit {
			return check.InvalidArgument("replicas", "must be between 1 and %d, got %d", maxLimit, sw.replicas)
		}
		o.fallback = sw
		return nil
	}
}

// withLocalClock gives a local limiter (or a fallback's local state) a
// clock in µs (tests).
func withLocalClock(now func() int64) Option {
	return func(o *options) error {
		o.clock = now
		return nil
	}
}

// fallbackRetry is how long a limiter deciding locally waits before
// trying Redis again.
const fallbackRetry = time.Second

// rateLimitFallback counts the switches of WithLocalFallback.
var rateLimitFallback = instrument.New(instrument.Counter, "coordination.rate_limit.fallback", "{switch}", "to",
	"Switches of rate limiters with a local fallback between Redis and local decisions, by the side switched to (local, redis).")

var (
	toLocalAttrs = instrument.Attrs(attribute.String("to", "local"))
	toRedisAttrs = instrument.Attrs(attribute.String("to", "redis"))
)

// monoBase anchors monoMicros: the wall clock once, then the monotonic
// clock, in µs (as large as the server's, so the arithmetic is the same).
var monoBase = time.Now()

func monoMicros() int64 { return monoBase.UnixMicro() + int64(time.Since(monoBase)/time.Microsecond) }

// localEngine is the engine of every local limiter: no client, no hooks,
// the global OpenTelemetry providers.
var localEngine = sync.OnceValue(func() *engine.Engine {
	return engine.New(nil, engine.Config{MeterProvider: otel.GetMeterProvider(), Logger: slog.Default()})
})

func newLocal(s Settings, opts []Option) (*Limiter, error) {
	l := &Limiter{e: localEngine(), opts: options{queueLimit: defaultQueue, reserve: DefaultReservationTimeout}}
	if err := check.Apply(&l.opts, opts); err != nil {
		return nil, err
	}
	refuse := func(name, opt string) error {
		return check.InvalidArgument(name, "%s needs Redis: a local limiter (NewLocal, NewLocalConcurrency) refuses it", opt)
	}
	o := &l.opts
	switch {
	case o.deny != nil:
		return nil, refuse("denyList", "WithDenyList")
	case o.allow != nil:
		return nil, refuse("allowList", "WithAllowList")
	case o.strict:
		return nil, refuse("strictSettings", "WithStrictSettings")
	case o.batchBlock != 0:
		return nil, refuse("batch", "WithBatch")
	case o.failure != ReturnError:
		return nil, refuse("failureMode", "WithFailureMode")
	case o.fallback != nil:
		return nil, refuse("localFallback", "WithLocalFallback")
	case o.lease != 0:
		return nil, check.InvalidArgument("leaseDuration", "WithLeaseDuration: a local concurrency lease needs no renewal; a local limiter refuses it")
	}
	var err error
	if l.sp, err = specOf("settings", s); err != nil {
		return nil, err
	}
	l.alt = newLocalState(o.clock, nil)
	l.available.Store(-1)
	return l, nil
}

// initFallback sets a Redis limiter's local fallback up (newLimiter).
func (l *Limiter) initFallback() error {
	sw := l.opts.fallback
	if sw == nil {
		return nil
	}
	if l.opts.batchBlock != 0 {
		return check.InvalidArgument("localFallback", "WithLocalFallback cannot be combined with WithBatch")
	}
	a := newLocalState(l.opts.clock, sw)
	if _, err := a.share(l.sp); err != nil {
		return err
	}
	l.alt = a
	return nil
}

// fallbackSwitch is the state WithLocalFallback's limiters share: whether
// they decide locally, and when Redis is tried again.
type fallbackSwitch struct {
	replicas int
	notify   func(local bool)
	now      func() int64 // µs

	local   atomic.Bool
	mu      sync.Mutex
	retryAt int64  // µs: a call from then tries Redis
	gen     uint64 // switches to local so far: a limiter's state of an older one is reset
}

// localState is a limiter's decisions in this process: the whole limiter
// (sw nil: NewLocal) or its fallback.
type localState struct {
	sw  *fallbackSwitch
	now func() int64 // µs

	mu     sync.Mutex
	gen    uint64
	st     localrate.State
	held   int64                 // concurrency: permits held by local leases
	leases map[*held]*localLease // the local leases not released
	// the settings last decided with: the limiter's spec, its share, and
	// the share's parsed components
	from, sp *spec
	set      []localrate.Setting
}

func newLocalState(clock func() int64, sw *fallbackSwitch) *localState {
	a := &localState{sw: sw, now: clock}
	if a.now == nil {
		a.now = monoMicros
		if sw != nil {
			a.now = sw.now
		}
	}
	return a
}

// share returns the settings local decisions use for sp: sp itself for a
// local limiter, its per-replica share for a fallback (see
// WithLocalFallback).
func (a *localState) share(sp *spec) (*spec, error) {
	if a.sw == nil || a.sw.replicas == 1 {
		return sp, nil
	}
	n := a.sw.replicas
	part := func(c int) int { return (c + n - 1) / n }
	var one func(s Settings) Settings
	one = func(s Settings) Settings {
		switch c := s.(type) {
		case *FixedWindow:
			return one(*c)
		case *SlidingWindow:
			return one(*c)
		case *TokenBucket:
			return one(*c)
		case *GCRA:
			return one(*c)
		case *Composite:
			return one(*c)
		case *Throttle:
			return one(*c)
		case Throttle:
			c.Limit = part(c.Limit)
			return c
		case *SlidingLog:
			return one(*c)
		case SlidingLog:
			c.Limit = part(c.Limit)
			return c
		case FixedWindow:
			c.Limit = part(c.Limit)
			return c
		case SlidingWindow:
			c.Limit = part(c.Limit)
			return c
		case TokenBucket:
			c.Limit, c.Period = part(c.Limit), c.Period*time.Duration(n)
			return c
		case GCRA:
			c.Burst = part(c.Burst)
			if c.Interval != 0 {
				c.Interval *= time.Duration(n)
			} else {
				c.Period *= time.Duration(n)
			}
			return c
		case Composite:
			cs := make([]Settings, len(c.Components))
			for i, x := range c.Components {
				cs[i] = one(x)
			}
			return Composite{Components: cs}
		case concurrency:
			c.limit = part(c.limit)
			return c
		}
		return s
	}
	out, err := one(sp.settings).spec()
	if err != nil {
		return nil, fmt.Errorf("%w (the per-replica share of WithLocalFallback)", err)
	}
	return out, nil
}

// settings returns the share of sp and its parsed components (a.mu held).
func (a *localState) settingsLocked(sp *spec) (*spec, []localrate.Setting, error) {
	if a.from == sp {
		return a.sp, a.set, nil
	}
	sh, err := a.share(sp)
	if err != nil {
		return nil, nil, err
	}
	var set []localrate.Setting
	if sh.alg != algConc {
		cfgs := []string{sh.cfg}
		if sh.alg == algComp {
			cfgs = cfgs[:0]
			for _, t := range sh.tail[1:] {
				cfgs = append(cfgs, t.(string))
			}
		}
		if set, err = localrate.ParseAll(cfgs); err != nil {
			return nil, nil, err
		}
	}
	a.from, a.sp, a.set = sp, sh, set
	return sh, set, nil
}

// freshLocked resets a fallback's state left from an earlier switch.
func (a *localState) freshLocked() {
	if a.sw == nil {
		return
	}
	a.sw.mu.Lock()
	g := a.sw.gen
	a.sw.mu.Unlock()
	if g != a.gen {
		a.gen = g
		a.st.Reset()
		a.held = 0 // the leases of an earlier switch no longer count (releaseLocal)
	}
}

// do runs one consumptive call locally.
func (a *localState) do(sp *spec, op localrate.Op, permits, mark int64) (localrate.Reply, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.freshLocked()
	_, set, err := a.settingsLocked(sp)
	if err != nil {
		return localrate.Reply{}, err
	}
	r, err := a.st.Do(set, op, permits, mark, a.now())
	if errors.Is(err, localrate.ErrRange) {
		err = check.InvalidArgument("actual", "%v", err)
	}
	return r, err
}

// decide is a local decision (decide's).
func (a *localState) decide(sp *spec, permits int, refundable bool) (verdict, error) {
	r, err := a.do(sp, localrate.Decide, int64(permits), 0)
	if err != nil {
		return verdict{}, err
	}
	d := verdict{acquired: r.Acquired, available: r.Available, mark: -1, loc: true}
	if r.Wait > 0 {
		d.retry, d.hasRetry = time.Duration(r.Wait)*time.Microsecond, true
	}
	if r.Acquired && permits > 0 {
		d.permits = permits
		if refundable {
			d.mark = r.Mark
		}
	}
	return d, nil
}

// adjust is a local settlement (delta permits) or refund (of the grant
// of mark: mark >= 0).
func (a *localState) adjust(sp *spec, delta int, mark int64) (adjustReply, error) {
	op, n := localrate.Adjust, int64(delta)
	if mark >= 0 {
		op = localrate.Refund
	}
	r, err := a.do(sp, op, n, mark)
	return adjustReply{Applied: r.Applied, Available: r.Available}, err
}

// concTry is a local concurrency attempt: a probe, or permits taken as a
// local lease.
func (a *localState) concTry(l *Limiter, sp *spec, permits int) (verdict, error) {
	a.mu.Lock()
	a.freshLocked()
	sh, _, err := a.settingsLocked(sp)
	if err != nil {
		a.mu.Unlock()
		return verdict{}, err
	}
	limit := int64(sh.capacity)
	free := max(limit-a.held, 0)
	if permits == 0 || free < int64(permits) {
		a.mu.Unlock()
		return verdict{acquired: permits == 0 && free >= 1, available: free, loc: true}, nil
	}
	a.held += int64(permits)
	free -= int64(permits)
	gen := a.gen
	a.mu.Unlock()
	ctx, cancel := context.WithCancelCause(context.Background())
	hd := &held{l: l}
	a.mu.Lock()
	if a.leases == nil {
		a.leases = map[*held]*localLease{}
	}
	a.leases[hd] = &localLease{n: int64(permits), gen: gen, ctx: ctx, cancel: cancel}
	a.mu.Unlock()
	l.remember(hd)
	return verdict{acquired: true, available: free, held: hd, loc: true}, nil
}

// localLease is a local concurrency lease: its permits, the state's
// generation it was taken in, its context.
type localLease struct {
	n      int64
	gen    uint64
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// releasedContext is the context of a local lease after its release.
var releasedContext = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(coordination.ErrReleased)
	return ctx
}()

// releaseLocal returns a local lease's permits; it reports false when it
// was released before.
func (a *localState) releaseLocal(h *held) bool {
	a.mu.Lock()
	ll := a.leases[h]
	delete(a.leases, h)
	if ll != nil && ll.gen == a.gen { // not from a switch before the state's reset
		a.held = max(a.held-ll.n, 0)
	}
	a.mu.Unlock()
	if ll == nil {
		return false
	}
	ll.cancel(coordination.ErrReleased)
	return true
}

// leaseContext is a local lease's context.
func (a *localState) leaseContext(h *held) context.Context {
	a.mu.Lock()
	ll := a.leases[h]
	a.mu.Unlock()
	if ll == nil {
		return releasedContext
	}
	return ll.ctx
}

// redisTurn reports whether a Redis limiter with a fallback asks Redis
// now: not while it decides locally, except for one call at least
// fallbackRetry after the switch or the last failed try.
func (sw *fallbackSwitch) redisTurn() bool {
	if !sw.local.Load() {
		return true
	}
	now := sw.now()
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if now < sw.retryAt {
		return false
	}
	sw.retryAt = now + int64(fallbackRetry/time.Microsecond) // the others stay local meanwhile
	return true
}

// takesOver reports whether a failed Redis call is decided locally: err
// is an outage and the caller's context is alive. It switches to local
// decisions (or, when local already, postpones the next try).
func (sw *fallbackSwitch) takesOver(ctx context.Context, l *Limiter, err error) bool {
	// A deadline that passed while waiting for Redis is what a hung
	// server looks like to a caller with a deadline: this call has ended
	// (its error is returned), but the calls after it decide locally.
	timedOut := errors.Is(ctxEnded(ctx), context.DeadlineExceeded) && !errors.Is(ctx.Err(), context.Canceled)
	if !timedOut && (ctxEnded(ctx) != nil || engine.Classify(err) == engine.Canceled || !redisUnavailable(err)) {
		return false
	}
	sw.switchLocal(l)
	return !timedOut
}

// switchLocal moves the switch to local decisions (or, when local
// already, postpones the next try of Redis).
func (sw *fallbackSwitch) switchLocal(l *Limiter) {
	now := sw.now()
	sw.mu.Lock()
	sw.retryAt = now + int64(fallbackRetry/time.Microsecond)
	switched := !sw.local.Load()
	if switched {
		sw.gen++
		sw.local.Store(true)
	}
	sw.mu.Unlock()
	if switched {
		l.e.Count(rateLimitFallback, toLocalAttrs)
		logger(l).Warn("ratelimit: Redis cannot give decisions; deciding locally with the per-replica share of the limits",
			slog.Int("replicas", sw.replicas), slog.Duration("retry_every", fallbackRetry))
		if sw.notify != nil {
			sw.notify(true)
		}
	}
}

// answered notes a Redis answer: a limiter deciding locally switches
// back.
func (sw *fallbackSwitch) answered(l *Limiter) {
	if !sw.local.Load() {
		return
	}
	sw.mu.Lock()
	switched := sw.local.Load()
	sw.local.Store(false)
	sw.mu.Unlock()
	if switched {
		l.e.Count(rateLimitFallback, toRedisAttrs)
		logger(l).Info("ratelimit: Redis gives decisions again; local decisions ended")
		if sw.notify != nil {
			sw.notify(false)
		}
	}
}

func logger(l *Limiter) *slog.Logger {
	if lg := l.e.Logger(); lg != nil {
		return lg
	}
	return slog.Default()
}

// decideAlt is decide for a limiter with a local state: a local limiter
// decides here; a Redis limiter with a fallback asks Redis (run) when it
// is Redis's turn, and decides here when Redis is unavailable.
func (l *Limiter) decideAlt(ctx context.Context, sp *spec, permits int, refundable bool, run func() (verdict, error)) (verdict, error) {
	a := l.alt
	if a.sw == nil || !a.sw.redisTurn() {
		if sp.alg == algConc {
			return a.concTry(l, sp, permits)
		}
		return a.decide(sp, permits, refundable)
	}
	d, err := run()
	if err == nil {
		a.sw.answered(l)
		return d, nil
	}
	if !a.sw.takesOver(ctx, l, err) {
		return d, err
	}
	if sp.alg == algConc {
		return a.concTry(l, sp, permits)
	}
	return a.decide(sp, permits, refundable)
}
