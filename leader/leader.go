package leader

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/fencing"
	"github.com/coordkit/coordination/hooks"
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
	// it is joined with that context's cause.
	ErrStopped = errors.New("leader: elector stopped")

	// ErrCallback is wrapped by the error Run returns when OnElected or
	// OnRevoked returned an error or panicked.
	ErrCallback = errors.New("leader: callback failed")

	// ErrAlreadyRunning is returned by [Elector.Run] when Run is already
	// running on the same elector.
	ErrAlreadyRunning = errors.New("leader: Run is already running")
)

// Elector campaigns for the leadership of one election (one lease key and
// fencing counter key) under one identity. Create it with [New] and call
// [Elector.Run]. Its methods are safe for concurrent use by multiple
// goroutines; Run runs at most once at a time. The zero value is not
// usable.
type Elector struct {
	coord              *coordination.Coordinator
	leaseKey, fenceKey string
	identity           string
	lease, retry       time.Duration
	onElected          func(context.Context, *Term) error
	onRevoked          func(*Term) error

	changes  metric.Int64Counter
	failures metric.Int64Counter
	elected  metric.MeasurementOption
	revoked  metric.MeasurementOption

	running atomic.Bool
	current atomic.Pointer[Term]
}

// Option configures an [Elector].
type Option func(*Elector) error

// WithLeaseDuration sets how long a won lease lasts without renewal: a
// crashed leader is replaced within about this long plus the retry delay.
// The leader renews every half of it. It must be at least
// [MinLeaseDuration] and is rounded up to whole milliseconds. The default
// is [DefaultLeaseDuration] (15 s).
func WithLeaseDuration(d time.Duration) Option {
	return func(e *Elector) error {
		if d < MinLeaseDuration {
			return coordination.InvalidArgument("lease duration", "must be at least %v, got %v", MinLeaseDuration, d)
		}
		e.lease = d
		return nil
	}
}

// WithRetryDelay sets how long a follower waits between campaign attempts,
// and after a transient error, before trying again; each wait adds a
// random jitter of up to 10%. A follower also tries at once when the
// leader releases the lease (Pub/Sub notification). A leader's failed
// renewals are retried every min(retry delay, lease duration/8). It must
// be at least 1 ms. The default is [DefaultRetryDelay] (1 s).
func WithRetryDelay(d time.Duration) Option {
	return func(e *Elector) error {
		if _, err := coordination.Millis("retry delay", d); err != nil {
			return err
		}
		e.retry = d
		return nil
	}
}

// OnElected sets the function run when the elector wins a term. ctx is the
// term's context ([Term.Context]), cancelled when the term ends. Returning
// nil resigns: the lease is released and the elector campaigns again.
// Returning an error (or panicking) ends Run with an error wrapping
// [ErrCallback], after the lease is released; an error returned after ctx
// was cancelled that is ctx's error (or wraps it) counts as a normal
// return. fn should return promptly once ctx is cancelled and must not
// leave work running after it returns: the elector waits for it before
// releasing the lease and campaigning again. The default waits until ctx
// is cancelled.
func OnElected(fn func(ctx context.Context, term *Term) error) Option {
	return func(e *Elector) error {
		if fn == nil {
			return coordination.InvalidArgument("OnElected", "must not be nil")
		}
		e.onElected = fn
		return nil
	}
}

// OnRevoked sets the function run exactly once when a term ends, after its
// context was cancelled (context.Cause says why: [ErrResigned], an error
// wrapping coordination.ErrLost, [ErrStopped], or an error wrapping
// [ErrCallback]) and after OnElected returned; never concurrently with it.
// The lease is released once it returns. An error or panic ends Run with
// an error wrapping [ErrCallback], after the lease is released. The
// default does nothing.
func OnRevoked(fn func(term *Term) error) Option {
	return func(e *Elector) error {
		if fn == nil {
			return coordination.InvalidArgument("OnRevoked", "must not be nil")
		}
		e.onRevoked = fn
		return nil
	}
}

// New returns an elector for the election whose lease is at leaseKey and
// whose fencing counter is at fenceKey, campaigning as identity. It sends
// nothing to Redis.
//
// The keys are those of a [fencing.Lock]: different, in one Cluster slot
// (one {hash tag}, checked with the coordinator's prefix applied), and the
// same for every contender. identity names this contender to the others
// ([Elector.Leader], [Get]); it is stored in the lease, is not checked for
// uniqueness and must not be empty.
//
// It returns an error wrapping coordination.ErrInvalidArgument for a nil
// coordinator, an empty or repeated key, an empty identity or a bad option,
// and coordination.ErrCrossSlot when the keys are in different slots.
func New(coord *coordination.Coordinator, leaseKey, fenceKey, identity string, opts ...Option) (*Elector, error) {
	if err := fencing.CheckKeys(coord, leaseKey, fenceKey); err != nil {
		return nil, err
	}
	if identity == "" {
		return nil, coordination.InvalidArgument("identity", "must not be empty")
	}
	e := &Elector{
		coord: coord, leaseKey: leaseKey, fenceKey: fenceKey, identity: identity,
		lease: DefaultLeaseDuration, retry: DefaultRetryDelay,
		onElected: func(ctx context.Context, _ *Term) error {
			<-ctx.Done()
			return nil
		},
		onRevoked: func(*Term) error { return nil },
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(e); err != nil {
			return nil, err
		}
	}
	e.changes = coord.Int64Counter("coordination.leader.changes",
		"Leadership changes seen by local electors: terms won (state=elected) and ended (state=revoked).", "{change}")
	e.failures = coord.Int64Counter("coordination.leader.acquire_failures",
		"Campaign attempts that failed with an error (transient ones are retried).", "{attempt}")
	e.elected = metric.WithAttributeSet(attribute.NewSet(attribute.String("state", "elected")))
	e.revoked = metric.WithAttributeSet(attribute.NewSet(attribute.String("state", "revoked")))
	return e, nil
}

// Identity returns the identity the elector campaigns as.
func (e *Elector) Identity() string { return e.identity }

// LeaseDuration returns the lease duration.
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
	return Get(ctx, e.coord, e.leaseKey)
}

// Run campaigns until ctx ends or a terminal error, serving each term won
// as the package documentation describes. It blocks. It returns nil once
// ctx has ended and any term has been ended and its lease released; or an
// error: a terminal Redis error of a campaign or renewal (NOAUTH, WRONGPASS,
// NOPERM, coordination.ErrWrongType, coordination.ErrBadState ...), or one
// wrapping [ErrCallback]. When Run returns, no callback is running and the
// elector's goroutines have ended, with one exception: when a campaign
// attempt's reply was lost (a timeout, a dropped connection, Run's context
// ending mid-request), the fencing lock's owner-checked cleanup of a lease
// the attempt may have taken runs in the background for up to a minute
// while the server is unreachable.
//
// Run may be called again after it returned; while it runs, another call
// returns [ErrAlreadyRunning].
func (e *Elector) Run(ctx context.Context) error {
	if e == nil || e.coord == nil {
		return coordination.InvalidArgument("elector", "must not be nil; use leader.New")
	}
	if !e.running.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	defer e.running.Store(false)
	for {
		lk, err := e.campaign(ctx)
		if err != nil || lk == nil {
			return err
		}
		if err := e.serve(ctx, lk); err != nil {
			return err
		}
		// Give the followers, woken by the release, the first chance: a
		// leader that resigned should not win its own lease straight back.
		t := time.NewTimer(jitter(e.retry))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// campaign tries to win the lease until it does (the lock), ctx ends (nil,
// nil) or a terminal error.
func (e *Elector) campaign(ctx context.Context) (*fencing.Lock, error) {
	var (
		w       *coordination.Watch
		watched bool
	)
	defer func() { w.Close() }()
	for {
		if ctx.Err() != nil {
			return nil, nil
		}
		lk, err := e.attempt(ctx)
		switch {
		case err == nil:
			return lk, nil
		case errors.Is(err, coordination.ErrNotAcquired):
			if !watched {
				// Subscribe to release notifications, then try again at once:
				// a release in between is never missed.
				watched = true
				var werr error
				if w, werr = e.coord.Watch(ctx, e.leaseKey); werr != nil && ctx.Err() == nil {
					e.coord.Logger().Warn("leader: release notifications unavailable; campaigning every retry delay",
						"error_class", coordination.Classify(werr).String())
				}
				continue
			}
		default:
			class := coordination.Classify(err)
			if class == coordination.Canceled && ctx.Err() != nil {
				return nil, nil
			}
			e.failures.Add(context.Background(), 1)
			if class == coordination.Terminal {
				return nil, fmt.Errorf("leader: campaign: %w", err)
			}
			e.coord.Logger().Warn("leader: campaign attempt failed; retrying", "error_class", class.String(), "retry_in", e.retry)
		}
		// Sleep one retry delay, or until the lease is released.
		var released <-chan struct{}
		if w != nil {
			released = w.C()
		}
		t := time.NewTimer(jitter(e.retry))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil
		case <-t.C:
		case <-released:
			t.Stop()
		}
	}
}

// attempt is one campaign attempt: one admission, one acquire script.
func (e *Elector) attempt(ctx context.Context) (*fencing.Lock, error) {
	ctx, finish, err := e.coord.Admit(ctx, hooks.LeaderCampaign, primitive)
	if err != nil {
		return nil, err
	}
	lk, err := fencing.TryAcquire(ctx, e.coord, e.leaseKey, e.fenceKey, e.lease, fencing.WithHolder(e.identity))
	if errors.Is(err, coordination.ErrNotAcquired) {
		finish(nil) // contention is an answer
		return nil, err
	}
	return lk, finish(err)
}

// serve runs one term from election to the release of its lease.
func (e *Elector) serve(ctx context.Context, lk *fencing.Lock) error {
	termCtx, end := context.WithCancelCause(lk.Context())
	defer end(nil)
	term := &Term{identity: e.identity, token: lk.FencingToken(), start: time.Now(), ctx: termCtx, lk: lk}
	e.current.Store(term)
	e.changes.Add(context.Background(), 1, e.elected)
	e.coord.Logger().Info("leader: elected")

	electedDone := make(chan error, 1)
	go func() { electedDone <- call("OnElected", e.coord, func() error { return e.onElected(termCtx, term) }) }()
	renewDone := make(chan error, 1)
	go func() { renewDone <- e.renew(termCtx, end, lk) }()

	var errs []error
	electedReturned := false
	select {
	case <-ctx.Done():
		end(errors.Join(ErrStopped, context.Cause(ctx)))
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

	// The term is over: no renewal will extend it.
	e.current.CompareAndSwap(term, nil)
	e.changes.Add(context.Background(), 1, e.revoked)
	e.coord.Logger().Info("leader: revoked", "cause_class", causeClass(context.Cause(termCtx)))
	if !electedReturned {
		if err := <-electedDone; err != nil && !benign(err, termCtx) {
			errs = append(errs, err)
		}
	}
	if err := call("OnRevoked", e.coord, func() error { return e.onRevoked(term) }); err != nil {
		errs = append(errs, err)
	}
	e.release(ctx, lk)
	if err := <-renewDone; err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// renew refreshes the lease every half lease duration until the term ends.
// A definite loss ends the term through the lock's context; a terminal
// error ends it here and is returned; transient errors are retried until
// the local deadline, which the lock enforces on its own.
func (e *Elector) renew(termCtx context.Context, end context.CancelCauseFunc, lk *fencing.Lock) error {
	interval := e.lease / 2
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-termCtx.Done():
			return nil
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(termCtx, max(lk.Remaining(), time.Millisecond))
		sent := time.Now()
		ok, err := lk.Refresh(rctx, e.lease)
		cancel()
		switch {
		case err == nil && ok:
			t.Reset(max(interval-time.Since(sent), 0))
		case err == nil:
			return nil // lost: the lock's context is cancelled
		case termCtx.Err() != nil:
			return nil
		case coordination.Classify(err) == coordination.Terminal:
			end(fmt.Errorf("%w: renewal failed: %w", coordination.ErrLost, err))
			return fmt.Errorf("leader: renewal: %w", err)
		default:
			d := jitter(min(e.retry, e.lease/8))
			e.coord.Logger().Warn("leader: renewal failed; retrying until the local deadline",
				"error_class", coordination.Classify(err).String(), "retry_in", d)
			t.Reset(d)
		}
	}
}

// release deletes the lease (owner-checked) after a term, retrying
// transient errors for up to one lease duration (capped at 5 s): past that
// the lease has expired on its own.
func (e *Elector) release(ctx context.Context, lk *fencing.Lock) {
	limit := min(e.lease, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), limit)
	defer cancel()
	for {
		_, err := lk.Release(ctx)
		if err == nil {
			return
		}
		class := coordination.Classify(err)
		if class != coordination.Transient {
			e.coord.Logger().Warn("leader: releasing the lease failed; it ends at its TTL", "error_class", class.String())
			return
		}
		select {
		case <-ctx.Done():
			e.coord.Logger().Warn("leader: releasing the lease failed; it ends at its TTL", "error_class", class.String())
			return
		case <-time.After(jitter(min(e.retry, limit/10))):
		}
	}
}

// call runs a callback, turning an error or a panic into an error wrapping
// ErrCallback.
func call(name string, coord *coordination.Coordinator, fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			coord.Logger().Error("leader: callback panicked", "callback", name, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
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

// jitter returns d plus a random extra of up to 10% of d.
func jitter(d time.Duration) time.Duration {
	return d + rand.N(d/10+1)
}

// Term is one tenure of leadership of one elector. It is immutable and
// safe for concurrent use; its context is cancelled when the term ends.
type Term struct {
	identity string
	token    int64
	start    time.Time
	ctx      context.Context
	lk       *fencing.Lock
}

// FencingToken returns the term's fencing token: a positive int64 strictly
// greater than every token of earlier terms of this election (within one
// retained Redis history; see the package documentation). Send it with
// every write the leader makes and let the resource reject older tokens.
func (t *Term) FencingToken() int64 { return t.token }

// Identity returns the identity of the elector that won the term.
func (t *Term) Identity() string { return t.identity }

// Start returns the local time at which the term began (after the winning
// acquire's reply arrived).
func (t *Term) Start() time.Time { return t.start }

// Context returns the term's context. It is cancelled when the term ends;
// context.Cause says why: [ErrResigned], an error wrapping
// coordination.ErrLost (a renewal found the lease gone or failed
// terminally, or the local deadline passed), an error wrapping
// [ErrStopped] (Run's context ended) or one wrapping [ErrCallback].
func (t *Term) Context() context.Context { return t.ctx }

// Done returns Context().Done().
func (t *Term) Done() <-chan struct{} { return t.ctx.Done() }

// Remaining returns the local estimate of how long the term is still
// certain to hold the lease without another successful renewal: 0 once the
// term has ended. It never asks Redis.
func (t *Term) Remaining() time.Duration {
	if t.ctx.Err() != nil {
		return 0
	}
	return t.lk.Remaining()
}
