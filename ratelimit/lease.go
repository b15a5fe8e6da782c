package ratelimit

import (
	"context"
	"strconv"
	"time"

	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
)

// Decision is the answer to one [Limiter.Allow] or [Limiter.Wait]:
// whether the permits were granted and, when they were not, when to try
// again. The fixed-window, sliding-window, token-bucket, GCRA and
// composite limiters are consumptive: granted permits stay used whatever
// the caller does, and there is nothing to release.
//
// A Decision is a small immutable value, safe to copy and to use from
// several goroutines. The zero Decision is not allowed and has no
// RetryAfter.
type Decision struct {
	allowed    bool
	denied     bool
	failedOpen bool
	hasRetry   bool
	retry      time.Duration
	available  int64
}

// Allowed reports whether the permits were granted.
func (d Decision) Allowed() bool { return d.allowed }

// Denied reports whether the request was refused because its identity is
// on the limiter's deny list ([WithDenyList]). Such a decision has no
// RetryAfter and an Available of -1.
func (d Decision) Denied() bool { return d.denied }

// RetryAfter returns how long to wait before the same request would be
// admitted, as computed by the server from its own clock (a local
// limiter, [NewLocal], or a local fallback: from the local clock), and
// true; or 0
// and false when no such time is known. It is present (and at least 1 µs)
// for a request refused by a fixed window, sliding window, token bucket,
// GCRA or composite limiter, and covers the whole batch of permits. It is
// absent for granted requests, for denied identities ([Decision.Denied]),
// and for decisions produced by a [FailureMode]. ([Limiter.Wait] returns
// no refusal: its [*WaitError] carries the RetryAfter.)
//
// It is a computed wait, not a reservation: other callers may take the
// permits first.
func (d Decision) RetryAfter() (time.Duration, bool) {
	if !d.hasRetry {
		return 0, false
	}
	return d.retry, true
}

// Available returns the permits the limiter reported free right after this
// decision, or -1 when the server was not asked (a denied identity, a
// failure mode, more permits than the capacity in the middleware, a
// [Limiter.Wait] for 0 permits). For a
// composite limiter it is the smallest of its components'. Other processes
// may have used them since.
func (d Decision) Available() int64 { return d.available }

// FailedOpen reports whether the permits were granted without asking
// Redis because Redis could not be reached and the limiter's failure mode
// is [FailOpen]. Such a grant consumed nothing.
func (d Decision) FailedOpen() bool { return d.failedOpen }

// result is the internal answer to one acquisition of any limiter: a
// Decision's fields, a concurrency lease's handle, and what a refund or a
// settlement needs. It is a small value; copies refer to the same held
// permits.
type result struct {
	acquired   bool
	hasRetry   bool
	failedOpen bool
	retry      time.Duration
	denied     bool
	available  int64
	held       *held
	cause      error // the failure a FailureMode answered
	tooLarge   bool  // refused: more permits than the capacity (the middleware's form)
	near       bool  // granted, leaving at most a fifth of the capacity free
	// A consumptive grant: its limiter, and for a refundable grant its
	// mark (0 or more: see the decision scripts' D operation; a grant
	// without one cannot be refunded) and permits; for a reservation its
	// settlement state.
	lim     *Limiter
	mark    int64
	permits int
	res     *reservation
	loc     bool    // decided in this process: refunds and settlements go there
	policy  *policy // the middleware's policy that charges it by outcome (Policy.Charge)
}

// decision returns r's public form.
func (r result) decision() Decision {
	return Decision{allowed: r.acquired, denied: r.denied, failedOpen: r.failedOpen, hasRetry: r.hasRetry, retry: r.retry, available: r.available}
}

// RetryAfter is [Decision.RetryAfter].
func (r result) RetryAfter() (time.Duration, bool) {
	if !r.hasRetry {
		return 0, false
	}
	return r.retry, true
}

// release returns a concurrency result's permits (see
// [ConcurrencyLease.Release]); it does nothing for any other result.
func (r result) release(ctx context.Context) error {
	if r.held == nil {
		return nil
	}
	_, err := r.held.release(ctx)
	return err
}

// held is one live concurrency lease.
type held struct {
	l     *Limiter
	h     *engine.Handle
	token string
}

// A held lease without a handle (h nil) is a local lease: its state is
// in its limiter's localState (see localLease), keyed by the *held, so
// that a Redis lease's held stays as small as it was.

func (h *held) release(ctx context.Context) (decode.Outcome, error) {
	if h.h == nil {
		out := decode.AlreadyReleased
		if h.l.alt.releaseLocal(h) {
			out = decode.Released
		}
		h.l.forget(h)
		return out, nil
	}
	out, err := h.h.Release(ctx) // Released or AlreadyReleased (expired): the permits are free
	h.l.forget(h)                // released locally whatever the answer
	return out, err
}

// refund gives a refundable grant's permits back (one script call, not
// admitted: the middleware calls it when a later policy refuses the
// request), at most once (the script is never re-sent once it may have
// run). It names the grant's mark, which its decision returned (a fixed
// window: the window's end; every other algorithm and a composite: the
// server's time of the grant), and the key gives back only what it
// provably still holds of the grant: a fixed window only in the same
// window; a token bucket only when no refill period began since the
// grant; GCRA the grant's charge less the time since the grant (what has
// not come back by itself); a sliding window only from the grant's own
// segment while it is in the window; a composite each component by its rule (its fixed
// windows when they started at or before the grant). It reports whether
// anything was given back.
func (l result) refund(ctx context.Context) (bool, error) {
	if !l.acquired || l.lim == nil || l.mark < 0 || l.permits < 1 || l.res != nil {
		return false, nil
	}
	lim := l.lim
	lim.settingsMu.RLock()
	defer lim.settingsMu.RUnlock()
	sp := lim.sp
	if l.loc {
		r, err := lim.alt.adjust(sp, l.permits, l.mark)
		if err != nil {
			return false, err
		}
		lim.available.Store(r.Available)
		return r.Applied, nil
	}
	r, err := sp.scripts.adjust.Run(ctx, lim.e, lim.keys, sp.args("r"+strconv.FormatInt(l.mark, 10), l.permits)...)
	if err != nil {
		return false, err
	}
	lim.available.Store(r.Available)
	return r.Applied, nil
}

// settleCost charges a refundable grant of estimate permits its actual
// cost (the middleware's Policy.Charge): below the estimate, the
// difference is given back as refund does (what the state still holds of
// the grant); above it, the excess (at most one capacity) is charged.
func (l result) settleCost(ctx context.Context, estimate, actual int) error {
	delta := actual - estimate
	if delta == 0 || l.lim == nil || (delta < 0 && l.mark < 0) {
		return nil // a give-back needs the grant's mark (an estimate of 0 has none: nothing to give back)
	}
	lim := l.lim
	lim.settingsMu.RLock()
	defer lim.settingsMu.RUnlock()
	sp := lim.sp
	var (
		r   adjustReply
		err error
	)
	switch {
	case delta < 0 && l.loc:
		r, err = lim.alt.adjust(sp, -delta, l.mark)
	case delta < 0:
		r, err = sp.scripts.adjust.Run(ctx, lim.e, lim.keys, sp.args("r"+strconv.FormatInt(l.mark, 10), -delta)...)
	case l.loc:
		r, err = lim.alt.adjust(sp, min(delta, sp.capacity), -1)
	default:
		r, err = sp.scripts.adjust.Run(ctx, lim.e, lim.keys, sp.args("a", min(delta, sp.capacity))...)
	}
	if err != nil {
		return err
	}
	lim.available.Store(r.Available)
	return nil
}
