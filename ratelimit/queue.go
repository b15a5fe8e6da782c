package ratelimit

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/sentinel"
)

type waiterState int

const (
	wQueued waiterState = iota
	wEvicted
	wClosed
	wTooLarge // more permits than the capacity after an Update
)

// waiter is one queued Wait call. Its fields are guarded by Limiter.mu,
// except sig, which is written to without the lock.
type waiter struct {
	permits int
	state   waiterState
	elem    *list.Element
	// sig wakes the waiter's wait loop: its state changed, it became or
	// stopped being the head, or (concurrency) permits were released here.
	sig chan struct{}
}

func (w *waiter) signal() {
	select {
	case w.sig <- struct{}{}:
	default:
	}
}

// Wait acquires permits, waiting in the limiter's local queue when they
// are not free. It returns an allowed decision, or the zero Decision and
// an error: never a nil error without the permits. It is admitted through hooks once
// (RATE LIMIT ACQUIRE), however many attempts it makes.
//
// Wait(ctx, 0) asks for nothing and grants at once, as x/time/rate's
// WaitN(ctx, 0) does: it is admitted, sends nothing to Redis (neither a
// decision nor the deny list's read, so a denied identity is granted its
// zero permits too) and returns an allowed Decision whose Available is -1
// (the server was not asked), or ctx's error when ctx has already ended.
// To learn whether a permit is free, probe with [Limiter.Allow](ctx, 0).
//
// Wait fails fast: when the server's retry time is past ctx's deadline, it
// returns at once a [*WaitError] whose PastDeadline is true and whose
// RetryAfter is the server's, instead of sleeping until the deadline. More
// permits than the limiter's capacity can never be granted: Wait returns
// an error wrapping coordination.ErrInvalidArgument naming "permits" at
// once, admitting nothing; so does a queued request whose permits exceed
// the capacity after an [Limiter.Update]. A denied identity
// ([WithDenyList]) gets a [*WaitError] whose Denied is true at once.
//
// Without [WithQueue] the queue holds up to [DefaultQueueWaiters]
// requests, served oldest first. A request that does not fit fails at
// once with a [*WaitError] ("the local queue is full") or, with WithQueue
// and under [NewestFirst], evicts the oldest waiters (each
// fails with a [*WaitError]); WithQueue(0, ...) makes Wait one attempt,
// like [Limiter.Allow], whose refusal is a [*WaitError] with the server's
// RetryAfter. A request that finds the queue empty tries Redis at once;
// one that finds waiters ahead of it queues behind them without trying
// first (failing because the queue is full, it then carries no
// RetryAfter).
//
// A queued request does not poll: the head of the queue sleeps until the
// server-computed retry time; the others sleep until they become the
// head. [Limiter.Update] wakes the head to try again under
// the new settings.
//
// Errors: those of Allow; a [*WaitError] (matching
// coordination.ErrNotAcquired) for every refusal: past the deadline,
// queue full, evicted, denied, refused by [FailClosed], and when ctx ends
// while queued (it then also matches ctx's error, context.Cause, and
// carries the latest RetryAfter known). ctx ending during the first
// attempt, before queuing, returns ctx's error as for Allow. After Close queued requests fail
// with coordination.ErrClosed. A Redis failure while queued ends the wait:
// the limiter's [FailureMode] applies ([FailOpen] grants, as for Allow).
func (l *Limiter) Wait(ctx context.Context, permits int) (Decision, error) {
	if permits == 0 {
		return l.waitNone(ctx)
	}
	le, err := l.waitErr(ctx, permits)
	return le.decision(), err
}

// waitNone is Wait(ctx, 0): admitted like every Wait, it grants at once,
// sending nothing, unless ctx has ended.
func (l *Limiter) waitNone(ctx context.Context) (Decision, error) {
	ctx, op, err := l.begin(ctx, 0, 0)
	if err != nil {
		return Decision{}, err
	}
	defer l.active.Add(-1)
	if err := ctxEnded(ctx); err != nil {
		l.e.Count(rateLimitCanceled, nil)
		return Decision{}, op.End(err)
	}
	_ = op.End(nil)
	return l.grant(verdict{acquired: true, available: -1}).decision(), nil
}

// waitErr is Wait returning the result (Wait and
// [ConcurrencyLimiter.Acquire]).
func (l *Limiter) waitErr(ctx context.Context, permits int) (result, error) {
	le, why, err := l.wait(ctx, permits, 0)
	if err != nil || le.acquired {
		return le, err
	}
	return result{}, newWaitError(l.keys, permits, le, why, nil)
}

// wait is Wait returning refusals as unacquired leases with the reason
// (the middleware's form); oversize refuses such requests as Allow's
// middleware form does instead of failing.
func (l *Limiter) wait(ctx context.Context, permits int, h how) (result, waitWhy, error) {
	ctx, op, err := l.begin(ctx, permits, h)
	if err != nil {
		return result{}, 0, err
	}
	defer l.active.Add(-1)
	l.mu.Lock()
	empty := l.queue.Len() == 0
	l.mu.Unlock()
	first, tried := refused, false
	if !empty && l.opts.allow != nil {
		// An allowed identity does not queue behind others.
		if d, done, err := l.listsFirst(ctx); done {
			return l.settleWhy(ctx, op, d, err, whyOf(d, whyNone))
		}
	}
	if empty {
		// Nobody local is ahead: try at once.
		d, err := l.take(ctx, op, permits, h)
		switch {
		case err != nil || d.acquired || d.available < 0:
			return l.settleWhy(ctx, op, d, err, whyOf(d, whyNone))
		case pastDeadline(ctx, d):
			return l.settleWhy(ctx, op, d, err, whyDeadline)
		case l.opts.queueLimit == 0:
			return l.settleWhy(ctx, op, d, err, whyNoQueue)
		}
		first, tried = d, true
	}
	w, ok, err := l.enqueue(permits)
	if err != nil || !ok {
		return l.settleWhy(ctx, op, first, err, whyQueueFull)
	}
	start := time.Now()
	d, why, err := l.serve(ctx, op, w, first, tried, h)
	l.recordWait(start, err == nil && d.acquired)
	return l.settleWhy(ctx, op, d, err, why)
}

// settleWhy is settle, passing a refusal's reason on (a failure mode's
// refusal is whyUnavailable).
func (l *Limiter) settleWhy(ctx context.Context, op engine.Op, d verdict, err error, why waitWhy) (result, waitWhy, error) {
	le, err := l.settle(ctx, op, d, err)
	if le.cause != nil {
		why = whyUnavailable
	}
	return le, why, err
}

// whyOf returns the reason of a refusal decided without the server (a
// denied identity, an oversized request), or why.
func whyOf(d verdict, why waitWhy) waitWhy {
	switch {
	case d.denied:
		return whyDenied
	case d.available < 0 && !d.acquired:
		return whyTooLarge
	}
	return why
}

// waitWhy is the reason of a Wait that returns without its permits.
type waitWhy uint8

const (
	whyNone waitWhy = iota
	whyDeadline
	whyNoQueue
	whyQueueFull
	whyEvicted
	whyTooLarge
	whyDenied
	whyUnavailable
	whyCanceled
)

// WaitError is the error of a [Limiter.Wait], [Partitioned.Wait],
// [ConcurrencyLimiter.Acquire] or [ConcurrencyLimiter.TryAcquire] that
// returns without its permits for a valid request: the permits are not
// free (TryAcquire, or Wait and Acquire under WithQueue(0, ...)), the
// server's retry time is past the context's deadline (PastDeadline), the
// context ended while the request was queued (Err is its cause), the local
// queue was full ([DefaultQueueWaiters], or the [WithQueue] bound) or the
// request was evicted from it ([NewestFirst]), the
// identity is denied (Denied), or Redis could not decide and the failure
// mode is [FailClosed] (Err is the failure). Its message says which.
//
// It matches coordination.ErrNotAcquired with errors.Is, and Err too when
// set (so a context that ended matches context.Canceled or
// context.DeadlineExceeded). Use errors.As to read its fields:
//
//	var we *ratelimit.WaitError
//	if errors.As(err, &we) && we.RetryAfter > 0 {
//		w.Header().Set("Retry-After", strconv.FormatInt(ratelimit.RetryAfterSeconds(we.RetryAfter), 10))
//	}
type WaitError struct {
	// Permits is the number of permits the call asked for.
	Permits int
	// RetryAfter is the server-computed wait after which the same request
	// would be admitted ([Decision.RetryAfter] of the latest refusal), or 0
	// when none is known: concurrency limiters, a request refused by a
	// full queue before asking Redis or evicted from it, a denied
	// identity, a failure mode's refusal.
	RetryAfter time.Duration
	// PastDeadline reports that Wait returned before ctx ended because
	// RetryAfter reaches past ctx's deadline: waiting could not succeed.
	PastDeadline bool
	// Denied reports that the identity is on the limiter's deny list
	// ([WithDenyList]).
	Denied bool
	// Err is the cause, or nil: context.Cause(ctx) when ctx ended while
	// queued, the Redis error a [FailClosed] refusal answered.
	Err error

	why  waitWhy
	try  bool        // from TryAcquire: no wait was asked for
	keys engine.Keys // the limiter's key, named in Error
}

func newWaitError(keys engine.Keys, permits int, le result, why waitWhy, cause error) *WaitError {
	e := &WaitError{Permits: permits, Denied: le.denied, PastDeadline: why == whyDeadline, Err: cause, why: why, keys: keys}
	if le.hasRetry {
		e.RetryAfter = le.retry
	}
	if why == whyUnavailable {
		e.Err = le.cause
	}
	if le.denied {
		e.why = whyDenied
	}
	return e
}

// Error returns `coordination: rate limit acquire "KEY": wait for N
// permits: not acquired: REASON` ("... try acquire N permits: ..." for
// [ConcurrencyLimiter.TryAcquire]), naming the operation and the key once,
// as every error of the library does.
func (e *WaitError) Error() string { return e.named().Error() }

// Unwrap returns the error naming the operation and the key, which matches
// coordination.ErrNotAcquired and Err (when set), for errors.Is and
// errors.As.
func (e *WaitError) Unwrap() error { return e.named() }

// named is the refusal's reason naming the operation and the key: the
// error the operation's end finds named already, so it is not named again.
func (e *WaitError) named() error {
	return engine.NameOp(hooks.RateLimitAcquire, e.keys, waitReason{e})
}

// waitReason is a WaitError's reason without the operation and key.
type waitReason struct{ e *WaitError }

// Error returns `wait for N permits: not acquired: REASON[: ERR]`.
func (r waitReason) Error() string {
	e := r.e
	var b strings.Builder
	verb := "wait for"
	if e.try {
		verb = "try acquire"
	}
	fmt.Fprintf(&b, "%s %s: not acquired: ", verb, check.Plural(e.Permits, "permit"))
	switch e.why {
	case whyDeadline:
		fmt.Fprintf(&b, "the server's retry time (after %v) is past the context's deadline", e.RetryAfter)
	case whyNoQueue:
		b.WriteString("refused, and the limiter does not queue (WithQueue(0, ...))")
	case whyQueueFull:
		b.WriteString("the local queue is full")
	case whyEvicted:
		b.WriteString("evicted from the local queue by a newer request (NewestFirst)")
	case whyDenied:
		b.WriteString("the identity is on the deny list")
	case whyUnavailable:
		b.WriteString("refused because Redis could not decide (FailClosed)")
	case whyCanceled:
		b.WriteString("the context ended while queued")
	default:
		b.WriteString("refused")
	}
	if e.RetryAfter > 0 && e.why != whyDeadline {
		fmt.Fprintf(&b, " (retry after %v)", e.RetryAfter)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(strings.TrimPrefix(engine.Unnamed(e.Err).Error(), "coordination: "))
	}
	return b.String()
}

// Unwrap returns coordination.ErrNotAcquired and Err (when set).
func (r waitReason) Unwrap() []error {
	if r.e.Err == nil {
		return []error{sentinel.ErrNotAcquired}
	}
	return []error{sentinel.ErrNotAcquired, r.e.Err}
}

// pastDeadline reports whether a refusal's retry time is past ctx's
// deadline: waiting for it cannot succeed.
func pastDeadline(ctx context.Context, d verdict) bool {
	if !d.hasRetry {
		return false
	}
	dl, ok := ctx.Deadline()
	return ok && time.Now().Add(d.retry).After(dl)
}

// enqueue adds a waiter for permits, evicting the oldest waiters under
// NewestFirst (a WithQueue bound; the default bound counts waiters and
// refuses). It reports false when the request does not fit, and
// coordination.ErrClosed when the limiter was closed meanwhile.
func (l *Limiter) enqueue(permits int) (*waiter, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, false, sentinel.ErrClosed
	}
	switch limit := int64(l.opts.queueLimit); {
	case limit == defaultQueue:
		if l.queue.Len() >= DefaultQueueWaiters {
			return nil, false, nil
		}
	case int64(permits) > limit:
		return nil, false, nil
	case l.queued+int64(permits) > limit:
		if l.opts.order == OldestFirst {
			return nil, false, nil
		}
		for l.queued+int64(permits) > limit {
			old := l.queue.Front().Value.(*waiter)
			l.removeLocked(old)
			old.state = wEvicted
			old.signal()
		}
	}
	oldHead := l.headLocked()
	w := &waiter{permits: permits, sig: make(chan struct{}, 1)}
	w.elem = l.queue.PushBack(w)
	l.e.Add(rateLimitQueued, 1)
	l.queued += int64(permits)
	if oldHead != nil && l.headLocked() != oldHead {
		oldHead.signal() // it is no longer the head
	}
	return w, true, nil
}

func (l *Limiter) headLocked() *waiter {
	var el *list.Element
	if l.opts.order == NewestFirst {
		el = l.queue.Back()
	} else {
		el = l.queue.Front()
	}
	if el == nil {
		return nil
	}
	return el.Value.(*waiter)
}

// removeLocked takes w out of the queue (if still there) and signals the
// new head when w was the head.
func (l *Limiter) removeLocked(w *waiter) {
	if w.elem == nil {
		return
	}
	wasHead := l.headLocked() == w
	l.queue.Remove(w.elem)
	l.e.Add(rateLimitQueued, -1)
	w.elem = nil
	l.queued -= int64(w.permits)
	if wasHead {
		if h := l.headLocked(); h != nil {
			h.signal()
		}
	}
}

func (l *Limiter) leave(w *waiter) {
	l.mu.Lock()
	l.removeLocked(w)
	l.mu.Unlock()
}

// serve runs w's turn in the queue on the engine's wait loop: while w is
// not the head, each attempt reports "not yet" and the loop sleeps until
// w's signal; the head asks Redis and sleeps until the server-computed
// retry time, w's signal, or (concurrency limiters) a release notification
// on the key's channel. first is the refused decision that sent w to the
// queue (tried reports whether it came from Redis).
func (l *Limiter) serve(ctx context.Context, op engine.Op, w *waiter, first verdict, tried bool, h how) (verdict, waitWhy, error) {
	defer l.leave(w)
	cfg := engine.WaitConfig{Wake: w.sig}
	// A concurrency limiter subscribes to its key's release channel after
	// the loop's first unsuccessful attempt and tries again at once: the
	// refusal already in hand stands for that first attempt.
	reuse := false
	if l.spec().alg == algConc && (l.alt == nil || l.alt.sw != nil) {
		cfg.Key = l.keys.Full()[0]
		reuse = tried
	} else if first.hasRetry {
		cfg.FirstIn = first.retry
	}
	var (
		d      verdict
		why    waitWhy
		failed error
		last   = first // the latest refusal from Redis, for a WaitError's RetryAfter
	)
	err := l.e.Wait(ctx, cfg, func(ctx context.Context) (engine.Attempt, error) {
		l.mu.Lock()
		state, head := w.state, l.headLocked() == w
		l.mu.Unlock()
		switch state {
		case wEvicted:
			d, why = refused, whyEvicted
			return engine.Attempt{Done: true}, nil
		case wTooLarge:
			// The settings changed: it can never be granted.
			if h&oversize == 0 {
				return engine.Attempt{}, tooLarge(w.permits, l.spec().capacity)
			}
			d, why = tooLargeRefusal, whyTooLarge
			return engine.Attempt{Done: true}, nil
		case wClosed:
			return engine.Attempt{}, sentinel.ErrClosed
		}
		reuseNow := reuse
		reuse = false // only the loop's first attempt, and only as the head
		if !head {
			return engine.Attempt{}, nil
		}
		if reuseNow {
			return engine.Attempt{RetryIn: first.hint}, nil
		}
		r, err := l.take(ctx, op, w.permits, h)
		switch {
		case err != nil && (engine.Classify(err) == engine.Canceled || !redisUnavailable(err)):
			return engine.Attempt{}, err // the loop gives up
		case err != nil:
			failed = err // the failure mode applies: stop waiting
			return engine.Attempt{Done: true}, nil
		case r.acquired, r.available < 0:
			d, why = r, whyOf(r, whyNone)
			return engine.Attempt{Done: true}, nil
		case pastDeadline(ctx, r):
			d, why = r, whyDeadline
			return engine.Attempt{Done: true}, nil
		case r.hasRetry:
			last = r
			return engine.Attempt{RetryIn: r.retry}, nil
		default:
			last = r
			return engine.Attempt{RetryIn: r.hint}, nil
		}
	})
	if err == nil {
		err = failed
	}
	if err != nil && ctxEnded(ctx) != nil {
		// ctx ended while queued: asleep (the loop's GaveUp error), or in
		// the middle of an attempt's command (settle would call that
		// cancellation too).
		cause := context.Cause(ctx)
		if cause == nil {
			cause = ctxEnded(ctx) // the deadline passed before its timer fired
		}
		if !errors.Is(err, sentinel.ErrNotAcquired) && !errors.Is(err, cause) {
			cause = fmt.Errorf("%w: %w", cause, err)
		}
		we := &WaitError{Permits: w.permits, Err: cause, why: whyCanceled, keys: l.keys}
		if last.hasRetry {
			we.RetryAfter = last.retry
		}
		err = we
	}
	return d, why, err
}
