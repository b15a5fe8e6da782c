// Package lease holds the client-side life of a held lease, shared by every
// handle type (lock, fencing lock, semaphore permit): the local deadline
// estimate, the context cancelled on loss, owner-checked refresh, verify and
// release through primitive-supplied functions, the background keep-alive,
// and the hold-time, renewal-failure and loss telemetry.
package lease

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	coordination "github.com/coordkit/coordination"
)

// Ops are a primitive's owner-checked operations on its lease. Each runs one
// script (one round trip) and is never admitted through hooks here: the
// public methods admit, the keep-alive does not.
type Ops struct {
	// Refresh resets the lease's expiry to ttlMs from now on the server.
	// It returns false when the lease is not held by this owner any more.
	Refresh func(ctx context.Context, ttlMs int64) (bool, error)
	// Verify reports whether the lease is still held by this owner. It
	// changes nothing.
	Verify func(ctx context.Context) (bool, error)
	// Release deletes the lease if this owner holds it and notifies
	// waiters.
	Release func(ctx context.Context) (coordination.ReleaseOutcome, error)
	// NoExpiry lets [Handle.Refresh] accept a ttl of 0, meaning "until
	// released" (Refresh then receives ttlMs 0). Without it a ttl below
	// 1 ms is an invalid argument.
	NoExpiry bool
}

// Metrics are the instruments a handle reports to; nil fields are skipped.
type Metrics struct {
	Hold            metric.Float64Histogram // seconds from acquisition to release or loss
	RenewalFailures metric.Int64Counter     // keep-alive renewals that failed (any reason)
	Lost            metric.Int64Counter     // leases lost while held
	Attrs           metric.MeasurementOption
}

// Names are the hook operation names of a handle's public methods.
type Names struct {
	Primitive              string
	Renew, Verify, Release string
}

// Handle is the shared state of one held lease. Its methods are safe for
// concurrent use.
type Handle struct {
	coord   *coordination.Coordinator
	names   Names
	ops     Ops
	metrics Metrics
	start   time.Time

	ctx    context.Context
	cancel context.CancelCauseFunc

	// refreshMu serializes refreshes (Refresh and keep-alive renewals), so
	// that the expiry the server applied last is the one recorded here.
	refreshMu sync.Mutex

	mu       sync.Mutex
	ttl      time.Duration
	deadline time.Time
	timer    *time.Timer
	state    state
	keep     chan struct{} // closed to stop the keep-alive; nil when not running
	keepDone chan struct{}
}

type state int

const (
	held state = iota
	released
	lost
)

// Forever is what [Handle.Remaining] returns for a held lease that has no
// expiry (acquired or refreshed with a TTL of 0, where the primitive allows
// it): the largest time.Duration.
const Forever = time.Duration(math.MaxInt64)

// Drift returns the clock-drift allowance subtracted from a lease's TTL for
// the local deadline: 1% of the TTL plus 2 ms (the Redlock analysis'
// allowance for clock rate differences and scheduling), and never more than
// half of the TTL.
func Drift(ttl time.Duration) time.Duration {
	d := ttl/100 + 2*time.Millisecond
	return min(d, ttl/2)
}

// New returns the handle of a lease acquired with ttl by a request sent at
// sent (the instant before the acquire request went out). A ttl of 0 means
// the lease has no expiry (only for primitives whose ops set NoExpiry): it
// has no local deadline and [Handle.Remaining] reports [Forever].
func New(coord *coordination.Coordinator, names Names, ops Ops, m Metrics, sent time.Time, ttl time.Duration) *Handle {
	ctx, cancel := context.WithCancelCause(context.Background())
	h := &Handle{coord: coord, names: names, ops: ops, metrics: m, start: sent, ctx: ctx, cancel: cancel, ttl: ttl}
	h.mu.Lock()
	h.timer = time.AfterFunc(time.Hour, h.expireLocally)
	h.setDeadlineLocked(sent, ttl)
	h.mu.Unlock()
	return h
}

// setDeadlineLocked sets the local deadline for a lease of ttl acquired or
// refreshed by a request sent at sent, and arms the expiry timer (or stops
// it when ttl is 0: no expiry). h.mu must be held, or h not yet shared.
func (h *Handle) setDeadlineLocked(sent time.Time, ttl time.Duration) {
	if ttl == 0 {
		h.deadline = time.Time{}
		h.timer.Stop()
		return
	}
	h.deadline = sent.Add(ttl - Drift(ttl))
	h.timer.Reset(time.Until(h.deadline))
}

// Context returns a context that is cancelled when the lease is released
// (cause coordination.ErrReleased), lost or expired locally (cause wrapping
// coordination.ErrLost). Use context.Cause to tell which.
func (h *Handle) Context() context.Context { return h.ctx }

// Done is Context().Done().
func (h *Handle) Done() <-chan struct{} { return h.ctx.Done() }

// TTL returns the TTL of the last successful acquire or refresh.
func (h *Handle) TTL() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ttl
}

// Remaining returns the local estimate of the time left, or 0 once the
// lease is released, lost or locally expired, or [Forever] while a lease
// without expiry is held.
func (h *Handle) Remaining() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state != held {
		return 0
	}
	if h.deadline.IsZero() {
		return Forever
	}
	return max(time.Until(h.deadline), 0)
}

// Held reports whether the handle still considers itself the holder.
func (h *Handle) Held() bool { return h.Remaining() > 0 }

func (h *Handle) expireLocally() {
	h.mu.Lock()
	if h.state != held || h.deadline.IsZero() || time.Now().Before(h.deadline) {
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	h.Lose(fmt.Errorf("%w: local lease deadline passed without a successful renewal", coordination.ErrLost))
}

// Lose marks the lease lost with cause (which should wrap ErrLost): the
// context is cancelled, the keep-alive stops, and the loss is counted. It
// is a no-op when the lease was already released or lost.
func (h *Handle) Lose(cause error) {
	h.mu.Lock()
	if h.state != held {
		h.mu.Unlock()
		return
	}
	h.state = lost
	h.stopLocked()
	h.mu.Unlock()
	h.cancel(cause)
	if h.metrics.Lost != nil {
		h.metrics.Lost.Add(context.Background(), 1, h.attrs())
	}
	h.recordHold()
}

func (h *Handle) attrs() metric.MeasurementOption {
	if h.metrics.Attrs != nil {
		return h.metrics.Attrs
	}
	return metric.WithAttributeSet(attribute.NewSet())
}

func (h *Handle) recordHold() {
	if h.metrics.Hold != nil {
		h.metrics.Hold.Record(context.Background(), time.Since(h.start).Seconds(), h.attrs())
	}
}

// stopLocked stops the timer and the keep-alive; h.mu must be held.
func (h *Handle) stopLocked() {
	h.timer.Stop()
	if h.keep != nil {
		close(h.keep)
		h.keep = nil
	}
}

// Refresh resets the lease's TTL (owner-checked), admitted as names.Renew.
// It returns false, with no Redis call, once the handle is released or
// lost; a false from Redis marks the lease lost. An error leaves the handle
// held (the local deadline still bounds it); when the refresh may have run
// (a timeout, a lost connection), the local deadline becomes the earlier of
// the old one and the one the new TTL gives. Refreshes (and keep-alive
// renewals) are serialized. A ttl of 0 (no expiry) is accepted only when
// the ops set NoExpiry.
func (h *Handle) Refresh(ctx context.Context, ttl time.Duration) (bool, error) {
	ms, err := TTLMillis(ttl, h.ops.NoExpiry)
	if err != nil {
		return false, err
	}
	ctx, finish, err := h.coord.Admit(ctx, h.names.Renew, h.names.Primitive)
	if err != nil {
		return false, err
	}
	h.refreshMu.Lock()
	defer h.refreshMu.Unlock()
	if !h.Held() {
		return false, finish(nil)
	}
	ok, err := h.refresh(ctx, ttl, ms)
	return ok, finish(err)
}

// refresh runs one owner-checked refresh; h.refreshMu must be held, so that
// the last expiry the server applied is the one the handle records.
func (h *Handle) refresh(ctx context.Context, ttl time.Duration, ms int64) (bool, error) {
	sent := time.Now()
	ok, err := h.ops.Refresh(ctx, ms)
	if err != nil {
		if coordination.IsAmbiguous(err) && ttl > 0 {
			// The refresh may have run: the lease may now end at the new,
			// possibly shorter, TTL. Keep the earlier of the two deadlines.
			h.mu.Lock()
			if d := sent.Add(ttl - Drift(ttl)); h.state == held && (h.deadline.IsZero() || d.Before(h.deadline)) {
				h.deadline = d
				h.timer.Reset(time.Until(d))
			}
			h.mu.Unlock()
		}
		return false, err
	}
	if !ok {
		h.Lose(fmt.Errorf("%w: the lease is no longer held by this owner", coordination.ErrLost))
		return false, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state != held {
		return false, nil
	}
	h.ttl = ttl
	h.setDeadlineLocked(sent, ttl)
	return true, nil
}

// TTLMillis converts a lease TTL to the integer milliseconds the scripts
// take, like coordination.Millis("ttl", ttl), except that 0 (no expiry) is
// accepted and gives 0 when noExpiry is set.
func TTLMillis(ttl time.Duration, noExpiry bool) (int64, error) {
	if ttl == 0 && noExpiry {
		return 0, nil
	}
	return coordination.Millis("ttl", ttl)
}

// Verify asks Redis whether the lease is still held by this owner, at one
// instant, admitted as names.Verify. A false answer marks the handle lost.
// It returns false without a Redis call once the handle is released or
// lost.
func (h *Handle) Verify(ctx context.Context) (bool, error) {
	ctx, finish, err := h.coord.Admit(ctx, h.names.Verify, h.names.Primitive)
	if err != nil {
		return false, err
	}
	if !h.Held() {
		return false, finish(nil)
	}
	ok, err := h.ops.Verify(ctx)
	if err != nil {
		return false, finish(err)
	}
	finish(nil)
	if !ok {
		h.Lose(fmt.Errorf("%w: verify found the lease held by no one or by another owner", coordination.ErrLost))
	}
	return ok, nil
}

// Release deletes the lease if this owner still holds it, admitted as
// names.Release. A handle released
// before returns AlreadyReleased without a Redis call. After a definite
// answer the handle is released (its context cancelled with ErrReleased,
// unless it was lost before); after an error it is unchanged and Release
// may be called again.
func (h *Handle) Release(ctx context.Context) (coordination.ReleaseOutcome, error) {
	ctx, finish, err := h.coord.Admit(ctx, h.names.Release, h.names.Primitive)
	if err != nil {
		return 0, err
	}
	h.mu.Lock()
	if h.state == released {
		h.mu.Unlock()
		return coordination.AlreadyReleased, finish(nil)
	}
	h.mu.Unlock()
	out, err := h.ops.Release(ctx)
	if err != nil {
		return 0, finish(err)
	}
	finish(nil)
	h.mu.Lock()
	was := h.state
	h.state = released
	h.stopLocked()
	h.mu.Unlock()
	if was == held {
		h.cancel(coordination.ErrReleased)
		h.recordHold()
	}
	return out, nil
}

// KeepAlive starts a background renewal every TTL/3 (from the last
// successful renewal) until the handle is released or lost. A renewal that
// finds the lease gone marks it lost at once; a transient error is retried
// with backoff until the local deadline passes (which marks it lost); a
// terminal error marks it lost. Calling KeepAlive on a handle that already
// keeps alive, is no longer held, or has no expiry does nothing (a renewal
// to no expiry ends the keep-alive). It returns at once.
func (h *Handle) KeepAlive() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state != held || h.keep != nil || h.ttl == 0 {
		return
	}
	h.keep = make(chan struct{})
	h.keepDone = make(chan struct{})
	go h.keepAlive(h.keep, h.keepDone)
}

// StopKeepAlive stops the keep-alive (if running) and waits for it to end.
func (h *Handle) StopKeepAlive() {
	h.mu.Lock()
	stop, done := h.keep, h.keepDone
	if stop != nil {
		close(stop)
		h.keep = nil
	}
	h.mu.Unlock()
	if done != nil {
		<-done
	}
}

func (h *Handle) keepAlive(stop, done chan struct{}) {
	defer close(done)
	timer := time.NewTimer(h.TTL() / 3)
	defer timer.Stop()
	failures := 0
	for {
		select {
		case <-stop:
			return
		case <-h.ctx.Done():
			return
		case <-timer.C:
		}
		// Read the TTL under refreshMu: a Refresh that ran meanwhile
		// decides the TTL this renewal uses.
		h.refreshMu.Lock()
		ttl := h.TTL()
		if ttl == 0 {
			h.refreshMu.Unlock()
			// A Refresh removed the expiry: nothing to keep alive any more.
			h.mu.Lock()
			if h.keep == stop {
				h.keep = nil
			}
			h.mu.Unlock()
			return
		}
		ms, _ := coordination.Millis("ttl", ttl)
		// Bound each renewal by the time left, so a hung connection cannot
		// hold the renewal past the deadline.
		ctx, cancel := context.WithTimeout(h.ctx, max(h.Remaining(), time.Millisecond))
		ok, err := h.refresh(ctx, ttl, ms)
		cancel()
		h.refreshMu.Unlock()
		switch {
		case err == nil && ok:
			failures = 0
			timer.Reset(ttl / 3)
		case err == nil && !ok:
			h.countRenewalFailure()
			return // refresh marked it lost
		default:
			h.countRenewalFailure()
			if coordination.Classify(err) == coordination.Terminal {
				h.Lose(fmt.Errorf("%w: renewal failed: %w", coordination.ErrLost, err))
				return
			}
			failures++
			d := min(10*time.Millisecond<<min(failures-1, 10), ttl/6)
			d = max(d/2+rand.N(d/2+1), time.Millisecond)
			h.coord.Logger().Warn("coordination: lease renewal failed; retrying until the local deadline",
				"error_class", coordination.Classify(err).String(), "retry_in", d)
			timer.Reset(d)
		}
	}
}

func (h *Handle) countRenewalFailure() {
	if h.metrics.RenewalFailures != nil {
		h.metrics.RenewalFailures.Add(context.Background(), 1, h.attrs())
	}
}
