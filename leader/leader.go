package leader

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/fencelock"
	"github.com/coordkit/coordination/internal/instrument"
	"github.com/coordkit/coordination/internal/sentinel"
	"github.com/coordkit/coordination/internal/timing"
)

const primitive = "leader"

// Defaults of [New].
const (
	// DefaultLeaseDuration is the lease duration when [WithLeaseDuration] is
	// not given.
	DefaultLeaseDuration = 15 * time.Second
	// DefaultRetryDelay is the retry delay when [WithRetryDelay] is not
	// given.
	DefaultRetryDelay = time.Second
	// MinLeaseDuration is the shortest lease duration [New] accepts.
	MinLeaseDuration = 10 * time.Millisecond
)

var (
	// ErrNoLeader is returned by [Get] and [Elector.Leader] when nobody
	// holds the election's lease.
	ErrNoLeader = errors.New("leader: no leader")

	// ErrResigned is the cause (context.Cause) of a term's context when its
	// OnElected callback returned nil: the leader resigned.
	ErrResigned = errors.New("leader: resigned")

	// ErrStopped is the cause of a term's context when Run's context ended;
	// the cause wraps it and that context's cause.
	ErrStopped = errors.New("leader: elector stopped")

	// ErrCallback is wrapped by the error Run returns when OnElected or
	// OnRevoked returned an error or panicked.
	ErrCallback = errors.New("leader: callback failed")

	// ErrAlreadyRunning is returned by [Elector.Run] when Run is already
	// running on the same elector.
	ErrAlreadyRunning = errors.New("leader: Run is already running")
)

func init() {
	// Answers, not failures: hooks see these operations as Succeeded.
	sentinel.RegisterAnswers(ErrNoLeader)
}

// Elector campaigns for the leadership of one election (one lease key and
// fencing counter key) under one identity. Create it with [New] and call
// [Elector.Run]. Its methods are safe for concurrent use by multiple
// goroutines; Run runs at most once at a time. The zero value is not
// usable.
type Elector struct {
	e        *engine.Engine
	keys     engine.Keys // lease key, fence key
	leaseKey string
	identity string
	config

	running  atomic.Bool
	current  atomic.Pointer[Term]
	draining atomic.Int64 // while OnElected outlives its term: when the term ended (Unix ns)
}

type config struct {
	lease, retry time.Duration
	drain        time.Duration // 0: the lease duration
	onElected    func(context.Context, *Term) error
	onRevoked    func(*Term) error
	onNewLeader  func(Info)
}

var (
	electedAttrs = instrument.Attrs(attribute.String("state", "elected"))
	revokedAttrs = instrument.Attrs(attribute.String("state", "revoked"))
)

// Option configures an [Elector].
type Option func(*config) error

// WithLeaseDuration sets how long a won lease lasts without renewal: a
// crashed leader is replaced within about this long plus the retry delay.
// The leader renews every half of it. It must be at least
// [MinLeaseDuration] and is rounded up to whole milliseconds. The default
// is [DefaultLeaseDuration] (15 s).
func WithLeaseDuration(d time.Duration) Option {
	return check.AtLeast("leaseDuration", d, MinLeaseDuration, func(e *config) {
		e.lease = d.Truncate(time.Millisecond) // rounded up, as the script is sent
		if d%time.Millisecond != 0 {
			e.lease += time.Millisecond
		}
	})
}

// WithRetryDelay sets the longest a follower waits between campaign
// attempts: it also tries at once when the leader releases the lease
// (Pub/Sub notification) and when the lease's TTL, as the server reported
// it, runs out. After a transient error it waits between half and one
// retry delay. A leader's failed renewals are retried with a backoff of
// their own, until the local deadline. It must be at least 1 ms. The
// default is [DefaultRetryDelay] (1 s).
func WithRetryDelay(d time.Duration) Option {
	return check.AtLeast("retryDelay", d, time.Millisecond, func(e *config) { e.retry = d })
}

// WithDrainTimeout sets how long the elector waits, after a term ended
// (its context was cancelled: Run's context ended, the lease was lost,
// the coordinator was shut down), for OnElected to return. Meanwhile the
// lease is still renewed, so that no other elector leads while OnElected
// may still act. When OnElected outlives the timeout, the elector stops
// renewing (the lease ends at its TTL, one lease duration at most, and is
// not released: OnElected may still be using it) and Run returns an error
// wrapping [ErrCallback] that names the timeout; OnElected's goroutine is
// left running. It must be at least 1 ms; the default is the lease
// duration. A term that ended because OnElected returned is not affected.
func WithDrainTimeout(d time.Duration) Option {
	return check.AtLeast("drainTimeout", d, time.Millisecond, func(e *config) { e.drain = d })
}

// OnElected sets the function run when the elector wins a term. ctx is the
// term's context ([Term.Context]), cancelled when the term ends. Returning
// nil resigns: the lease is released and the elector campaigns again.
// Returning an error (or panicking) ends Run with an error wrapping
// [ErrCallback], after the lease is released; an error returned after ctx
// was cancelled that is ctx's error (or wraps it) counts as a normal
// return. fn should return promptly once ctx is cancelled and must not
// leave work running after it returns: the elector waits for it, at most
// the drain timeout ([WithDrainTimeout]), before releasing the lease and
// campaigning again. The default waits until ctx is cancelled.
func OnElected(fn func(ctx context.Context, term *Term) error) Option {
	return func(e *config) error {
		if fn == nil {
			return check.InvalidArgument("OnElected", "must not be nil")
		}
		e.onElected = fn
		return nil
	}
}

// OnRevoked sets the function run exactly once when a term ends, as soon
// as its context is cancelled (context.Cause says why: [ErrResigned], an
// error wrapping coordination.ErrLost, [ErrStopped], or an error wrapping
// [ErrCallback]), on Run's goroutine, after OnElected was called. It does
// not wait for OnElected to return: when the term ended for another
// reason than OnElected returning, OnElected may still be running (even
// only starting, for a term that ended at once) while OnRevoked runs, so
// the two must not share unsynchronized state. The lease is released once both have returned. An
// error or panic ends Run with an error wrapping [ErrCallback], after the
// lease is released. The default does nothing.
func OnRevoked(fn func(term *Term) error) Option {
	return func(e *config) error {
		if fn == nil {
			return check.InvalidArgument("OnRevoked", "must not be nil")
		}
		e.onRevoked = fn
		return nil
	}
}

// OnNewLeader sets a function told who leads the election while Run runs:
// called with the leader when Run starts (the zero [Info] when nobody
// leads), then each time the leader's identity or fencing token changes,
// this elector's own terms included (client-go's OnNewLeader). It runs on
// a goroutine of its own, one call at a time, and should return quickly;
// it is not called after Run returned. It learns of changes as [Observe]
// does, with the retry delay as the poll interval: promptly after a
// release, within the retry delay otherwise; terms shorter than that can
// be missed (it reports the latest leader, not every term). Read errors
// are retried (logged at warn); a terminal one stops it for this Run
// (logged at error) without ending Run.
func OnNewLeader(fn func(Info)) Option {
	return func(e *config) error {
		if fn == nil {
			return check.InvalidArgument("OnNewLeader", "must not be nil")
		}
		e.onNewLeader = fn
		return nil
	}
}

// New returns an elector for the election whose lease is at leaseKey and
// whose fencing counter is at fenceKey, campaigning as identity. It sends
// nothing to Redis.
//
// The keys are those of a [fencing.Mutex]: different, in one Cluster slot
// (one {hash tag}, checked with the coordinator's prefix applied), and the
// same for every contender. identity names this contender to the others
// ([Elector.Leader], [Get]); it is stored in the lease, is not checked for
// uniqueness and must not be empty.
//
// It returns an error wrapping coordination.ErrInvalidArgument for a nil
// coordinator, an empty or repeated key, an empty identity or a bad option,
// and coordination.ErrInvalidArgument when the keys are in different slots.
func New(coord *coordination.Coordinator, leaseKey, fenceKey, identity string, opts ...Option) (*Elector, error) {
	e, err := engine.Of(coord)
	if err != nil {
		return nil, err
	}
	keys, err := fencelock.Keys(e, leaseKey, fenceKey)
	if err != nil {
		return nil, err
	}
	if identity == "" {
		return nil, check.InvalidArgument("identity", "must not be empty")
	}
	if err := check.Size("identity", len(identity), check.MaxIdentityBytes); err != nil {
		return nil, err
	}
	el := &Elector{e: e, keys: keys, leaseKey: leaseKey, identity: identity, config: config{
		lease: DefaultLeaseDuration, retry: DefaultRetryDelay,
		onElected: func(ctx context.Context, _ *Term) error {
			<-ctx.Done()
			return nil
		},
		onRevoked: func(*Term) error { return nil },
	}}
	if err := check.Apply(&el.config, opts); err != nil {
		return nil, err
	}
	return el, nil
}

// Identity returns the identity the elector campaigns as.
func (e *Elector) Identity() string { return e.identity }

// LeaseDuration returns the lease duration, as sent to Redis (in whole
// milliseconds).
func (e *Elector) LeaseDuration() time.Duration { return e.lease }

// RetryDelay returns the retry delay.
func (e *Elector) RetryDelay() time.Duration { return e.retry }

// Current returns the elector's current term, or nil when it does not lead
// (or its term's context was just cancelled). It is the local view, read
// without asking Redis: see the package documentation for why a process
// cannot be sure it leads at every instant.
func (e *Elector) Current() *Term {
	t := e.current.Load()
	if t == nil || t.ctx.Err() != nil {
		return nil
	}
	return t
}

// Leader reads who leads the election now, in one round trip (admitted as
// LEADER READ); see [Get].
func (e *Elector) Leader(ctx context.Context) (Info, error) {
	if e == nil || e.e == nil {
		return Info{}, engine.OpError(hooks.LeaderRead, engine.Keys{}, check.InvalidArgument("elector", "must not be nil; use leader.New"))
	}
	return get(ctx, e.e, e.keys.First())
}

// Run campaigns until ctx ends or a terminal error, serving each term won
// as the package documentation describes. It blocks. It returns nil once
// ctx has ended and any term has been ended and its lease released; or an
// error: a terminal Redis error of a campaign or renewal (NOAUTH, WRONGPASS,
// NOPERM, coordination.ErrBadState ...), or one
// wrapping [ErrCallback]. When Run returns, no callback is running and the
// elector's goroutines have ended, with two exceptions, both bounded by
// the lease duration and a minute: when a campaign attempt's outcome was
// ambiguous (a timeout, a dropped connection, Run's context ending
// mid-request), the owner-checked cleanup of a lease the attempt may have
// taken; and when the release at the end of a term failed, its retry.
//
// When the coordinator is shut down (coordination.Coordinator.Shutdown),
// Run returns an error wrapping coordination.ErrClosed: at once while
// campaigning; while leading, once the term's context has been cancelled
// (its cause matches coordination.ErrClosed) and the callbacks have
// returned. The term's lease is then not released: it ends at its TTL.
//
// Run may be called again after it returned; while it runs, another call
// returns [ErrAlreadyRunning].
//
// Every error of Run names the operation and the lease key, as a
// campaign attempt's do: `coordination: leader campaign "KEY": CAUSE`,
// whether the cause is a campaign's, a term's renewal ("renewal failed:
// ..."), a callback's ("callback failed: OnElected: ..."; several are
// joined, one line each), Shutdown's ("closed: the coordinator was shut
// down", at once or while leading) or a bad argument; errors.Is and
// errors.As reach the cause.
func (e *Elector) Run(ctx context.Context) error {
	if e == nil || e.e == nil {
		return engine.OpError(hooks.LeaderCampaign, engine.Keys{}, check.InvalidArgument("elector", "must not be nil; use leader.New"))
	}
	if err := check.Context(ctx); err != nil {
		return engine.OpError(hooks.LeaderCampaign, e.keys, err)
	}
	if !e.running.CompareAndSwap(false, true) {
		return engine.OpError(hooks.LeaderCampaign, e.keys, ErrAlreadyRunning)
	}
	defer e.running.Store(false)
	if e.onNewLeader != nil {
		octx, stop := context.WithCancel(ctx)
		observed := make(chan struct{})
		go func() {
			defer close(observed)
			if err := observe(octx, e.e, e.keys.First(), e.retry, e.onNewLeader); err != nil && octx.Err() == nil {
				e.e.Logger().Error("leader: OnNewLeader stopped", "error", engine.Describe(err))
			}
		}()
		defer func() { stop(); <-observed }() // fn is not called after Run returned
	}
	var after time.Duration
	for {
		won, err := e.campaign(ctx, after)
		if err != nil || won.h == nil {
			return err
		}
		if err := e.serve(ctx, won); err != nil {
			return err
		}
		// Give the followers, woken by the release, the first chance: a
		// leader that resigned should not win its own lease straight back.
		after = timing.Jitter(e.retry)
	}
}

// won is a lease won by a campaign.
type won struct {
	h     *engine.Handle
	owner string
	fence int64
}

// campaign tries to win the lease, first after the delay after, until it
// does, ctx ends (zero won, nil) or a terminal error. Each attempt is
// admitted once, as LEADER CAMPAIGN; between attempts it waits in the
// engine's wait loop (release notification, the holder's TTL, or one retry
// delay).
func (e *Elector) campaign(ctx context.Context, after time.Duration) (won, error) {
	var w won
	err := e.e.Wait(ctx, engine.WaitConfig{Key: e.keys.Full()[0], FirstIn: after, Recheck: timing.Jitter(e.retry), MinBackoff: e.retry, MaxBackoff: e.retry},
		func(ctx context.Context) (engine.Attempt, error) {
			actx, op, err := e.e.Admit(ctx, hooks.LeaderCampaign, primitive, e.keys)
			if err != nil {
				return engine.Attempt{}, err
			}
			h, owner, fence, err := fencelock.Attempt(actx, e.e, op, fencelock.Request{Keys: e.keys, TTL: e.lease, Holder: e.identity})
			err = op.End(err)
			switch {
			case err == nil && h.Remaining() == 0:
				// The reply came after the lease's local deadline (a server
				// frozen or a link stalled longer than the lease): no term
				// can be served on it. Give it back and campaign again,
				// rather than start OnElected on a term already over.
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(e.lease, 5*time.Second))
				_, _ = fencelock.Release(rctx, h)
				cancel()
				return engine.Attempt{}, nil
			case err == nil:
				w = won{h: h, owner: owner, fence: fence}
				return engine.Attempt{Done: true}, nil
			case errors.Is(err, coordination.ErrNotAcquired):
				return engine.Attempt{}, nil
			}
			if engine.Classify(err) != engine.Canceled {
				e.e.Count(leaderAcquireFailures, nil)
				e.e.Logger().Warn("leader: campaign attempt failed", "error", engine.Describe(err))
			}
			return engine.Attempt{}, err
		})
	switch {
	case err == nil:
		return w, nil
	case engine.Classify(err) == engine.Canceled && ctx.Err() != nil:
		return won{}, nil
	}
	return won{}, engine.OpError(hooks.LeaderCampaign, e.keys, err)
}

// serve runs one term from election to the release of its lease. The lease
// is renewed by the engine's keep-alive every half lease duration.
func (e *Elector) serve(ctx context.Context, w won) error {
	h := w.h
	termCtx, end := context.WithCancelCause(h.Context())
	defer end(nil)
	term := &Term{identity: e.identity, token: w.fence, start: time.Now(), ctx: termCtx, h: h, e: e.e, keys: e.keys, owner: w.owner}
	e.current.Store(term)
	e.e.Count(leaderChanges, electedAttrs)
	e.e.Logger().Info("leader: elected")
	h.KeepAliveEvery(2)
	e.announce(termCtx, term)

	electedDone := make(chan error, 1)
	electedCalled := make(chan struct{})
	go func() {
		close(electedCalled)
		electedDone <- call("OnElected", e.e, func() error { return e.onElected(termCtx, term) })
	}()

	var errs []error
	electedReturned := false
	select {
	case <-ctx.Done():
		end(fmt.Errorf("%w: %w", ErrStopped, context.Cause(ctx)))
	case err := <-electedDone:
		electedReturned = true
		switch {
		case err == nil:
			end(ErrResigned)
		case termCtx.Err() != nil && benign(err, termCtx):
			// The term had ended anyway and the callback reported that.
		default:
			end(err)
			errs = append(errs, err)
		}
	case <-termCtx.Done():
	}

	// The term is over: no renewal will extend it. OnRevoked runs now,
	// while OnElected (unless it ended the term) may still be returning;
	// the lease is renewed until it returns or the drain timeout passes.
	e.current.CompareAndSwap(term, nil)
	e.e.Count(leaderChanges, revokedAttrs)
	e.e.Logger().Info("leader: revoked", "cause_class", causeClass(context.Cause(termCtx)))
	endedAt := time.Now()
	drainBy := endedAt.Add(e.drainTimeout())
	if !electedReturned {
		e.draining.Store(endedAt.UnixNano()) // for HealthHandler
		defer e.draining.Store(0)
	}
	<-electedCalled // OnRevoked never comes before OnElected was called
	if err := call("OnRevoked", e.e, func() error { return e.onRevoked(term) }); err != nil {
		errs = append(errs, err)
	}
	if !electedReturned {
		timer := time.NewTimer(time.Until(drainBy))
		select {
		case err := <-electedDone:
			e.draining.Store(0) // returned: no longer outliving its term
			if err != nil && !benign(err, termCtx) {
				errs = append(errs, err)
			}
		case <-timer.C:
			// Stop renewing; do not release: OnElected may still act on
			// the lease, which ends at its TTL.
			err := fmt.Errorf("%w: OnElected did not return within the drain timeout (%v) after the term ended; the lease is no longer renewed and ends at its TTL", ErrCallback, e.drainTimeout())
			h.Lose(&sentinel.LostError{Reason: "the drain timeout passed: OnElected did not return"})
			e.e.Logger().Warn("leader: OnElected outlived the drain timeout; renewal stopped", "drain_timeout", e.drainTimeout())
			errs = append(errs, err)
			for i, err := range errs {
				errs[i] = engine.OpError(hooks.LeaderCampaign, e.keys, err)
			}
			return errors.Join(errs...)
		}
		timer.Stop()
	}
	// A renewal that failed terminally (NOPERM, a corrupt key) ends Run; so
	// does the coordinator's Shutdown, which ends the term's lease
	// locally (it ends on the server at its TTL).
	var lost *sentinel.LostError
	if errors.As(context.Cause(h.Context()), &lost) && lost.Err != nil && engine.Classify(lost.Err) == engine.Terminal {
		if err := engine.ClosedAny([]*engine.Engine{e.e}); err != nil && errors.Is(lost.Err, coordination.ErrClosed) {
			errs = append(errs, err) // as a campaign after Shutdown reports it
		} else {
			errs = append(errs, renewalError{lost.Err})
		}
	}
	// Release the lease (unadmitted: part of Run). A failed release is
	// retried in the background by the engine, until the lease's TTL.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(e.lease, 5*time.Second))
	_, _ = fencelock.Release(rctx, h)
	cancel()
	// Every error of Run names the operation and the lease key, as the
	// campaign's do.
	for i, err := range errs {
		errs[i] = engine.OpError(hooks.LeaderCampaign, e.keys, err)
	}
	return errors.Join(errs...)
}

// drainTimeout is the drain timeout in effect.
func (e *Elector) drainTimeout() time.Duration {
	if e.drain > 0 {
		return e.drain
	}
	return e.lease
}

// renewalError is the error of a term's renewal that failed terminally:
// "renewal failed: CAUSE", matching the cause.
type renewalError struct{ err error }

// Error returns "renewal failed: " and the cause without its name or
// "coordination: " prefix (Run's error names the operation and key once).
func (r renewalError) Error() string {
	return "renewal failed: " + strings.TrimPrefix(engine.Unnamed(r.err).Error(), "coordination: ")
}

// Unwrap returns the renewal's error, for errors.Is and errors.As.
func (r renewalError) Unwrap() error { return r.err }

// call runs a callback, turning an error or a panic into an error wrapping
// ErrCallback.
func call(name string, e *engine.Engine, fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			e.Logger().Error("leader: callback panicked", "callback", name, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			err = fmt.Errorf("%w: %s panicked: %v", ErrCallback, name, r)
		}
	}()
	if err := fn(); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCallback, name, err)
	}
	return nil
}

// benign reports whether a callback error only reports the end of the
// term: its context's error or cause.
func benign(err error, termCtx context.Context) bool {
	if termCtx.Err() == nil {
		return false
	}
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, context.Cause(termCtx))
}

// causeClass names why a term ended, for logs.
func causeClass(cause error) string {
	switch {
	case errors.Is(cause, ErrResigned):
		return "resigned"
	case errors.Is(cause, ErrStopped):
		return "stopped"
	case errors.Is(cause, coordination.ErrLost):
		return "lost"
	case errors.Is(cause, ErrCallback):
		return "callback_failed"
	default:
		return "other"
	}
}

// announce tells the election's observers ([Observe], [Get] callers
// waiting on it, OnNewLeader) that term began, by publishing on the lease
// key's channel with the owner-checked proclaim script (the elector's own
// identity, already in the lease), which also records the term's start
// ([Info.Start]): observers re-read at once instead of at their next poll. Best effort and bounded by a quarter of the lease: an
// error is logged at debug, and observers then learn of the term by
// polling.
func (e *Elector) announce(ctx context.Context, t *Term) {
	actx, cancel := context.WithTimeout(ctx, e.lease/4)
	defer cancel()
	if _, err := proclaimScript.Run(actx, e.e, t.keys, t.owner, e.identity, "1"); err != nil {
		e.e.Logger().Debug("leader: the new term was not announced; observers learn of it by polling", "error", engine.Describe(err))
	}
}

// Term is one tenure of leadership of one elector. It is safe for
// concurrent use; its context is cancelled when the term ends.
type Term struct {
	identity string
	token    int64
	start    time.Time
	ctx      context.Context
	h        *engine.Handle
	e        *engine.Engine
	keys     engine.Keys
	owner    string
}

// FencingToken returns the term's fencing token: a positive int64 strictly
// greater than every token of earlier terms of this election (within one
// retained Redis history; see the package documentation). Send it with
// every write the leader makes and let the resource reject older tokens.
func (t *Term) FencingToken() int64 { return t.token }

// Identity returns the identity of the elector that won the term, as
// given to [New] (a [Term.Proclaim] changes what readers see, not this).
func (t *Term) Identity() string { return t.identity }

// Proclaim sets the identity the term's lease advertises to identity,
// without a new election: the fencing token, the lease's TTL and the term
// are unchanged, and [Get], [Elector.Leader], [Observe] and OnNewLeader
// report identity from now on (observers are notified at once). Use it to
// publish a value that changes during a term, such as the address the
// leader serves on after a restart of its listener (etcd's
// Election.Proclaim). The next term of this elector advertises the
// elector's own identity again. One round trip, owner-checked, admitted
// as LEADER PROCLAIM; safe for concurrent use.
//
// Errors: coordination.ErrInvalidArgument naming "identity" (empty or over
// 256 bytes), "ctx" (nil) or "term" (nil), with nothing sent; an error wrapping
// coordination.ErrLost when the term has ended (locally, or the lease was
// found expired or taken over: nothing is written, and the term's context
// ends at its next renewal at the latest); the hook's error; Redis and
// network errors (a re-send writes the same value again).
func (t *Term) Proclaim(ctx context.Context, identity string) error {
	if t == nil || t.e == nil {
		return engine.OpError(hooks.LeaderProclaim, engine.Keys{}, check.InvalidArgument("term", "must be a term given to OnElected"))
	}
	if err := check.Context(ctx); err != nil {
		return engine.OpError(hooks.LeaderProclaim, t.keys, err)
	}
	if identity == "" {
		return engine.OpError(hooks.LeaderProclaim, t.keys, check.InvalidArgument("identity", "must not be empty"))
	}
	if err := check.Size("identity", len(identity), check.MaxIdentityBytes); err != nil {
		return engine.OpError(hooks.LeaderProclaim, t.keys, err)
	}
	if t.ctx.Err() != nil {
		return engine.OpError(hooks.LeaderProclaim, t.keys, fmt.Errorf("%w: the term has ended (%w)", coordination.ErrLost, context.Cause(t.ctx)))
	}
	ctx, op, err := t.e.Admit(ctx, hooks.LeaderProclaim, primitive, t.keys)
	if err != nil {
		return err
	}
	ok, err := proclaimScript.Run(ctx, t.e, t.keys, t.owner, identity)
	if err == nil && !ok {
		err = fmt.Errorf("%w: the term's lease has expired or was taken over", coordination.ErrLost)
	}
	return op.End(err)
}

// Start returns the local time at which the term began (after the winning
// acquire's reply arrived).
func (t *Term) Start() time.Time { return t.start }

// Context returns the term's context. It is cancelled when the term ends;
// context.Cause says why: [ErrResigned], an error wrapping
// coordination.ErrLost (a renewal found the lease gone or failed
// terminally, or the local deadline passed), an error wrapping
// [ErrStopped] (Run's context ended) or one wrapping [ErrCallback]. Its
// Deadline is the lease's local deadline, moving later with each renewal,
// so a client given the context bounds its own request by the term.
func (t *Term) Context() context.Context { return t.ctx }

// Remaining returns the local estimate of how long the term is still
// certain to hold the lease without another successful renewal: 0 once the
// term has ended. It never asks Redis.
func (t *Term) Remaining() time.Duration {
	if t.ctx.Err() != nil {
		return 0
	}
	return t.h.Remaining()
}
