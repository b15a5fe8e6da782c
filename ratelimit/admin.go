package ratelimit

import (
	"context"

	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/engine"
)

// The administrative operations of a consumptive [Limiter]: each one
// script call on the limiter's key (on an in-process limiter, or while a
// local fallback decides, on the local state: no Redis), admitted through hooks under its own
// operation name (and so timed by the operation-duration metric), never
// counted in [Statistics] or the allowed / blocked counters, and never
// asking the deny list.

// admin admits an administrative operation named name after checking the
// limiter and permits (checkN: permits must be 1 to the largest limit).
func (l *Limiter) admin(ctx context.Context, name string, permits int, checkN bool) (context.Context, engine.Op, error) {
	if l == nil || l.e == nil {
		return ctx, engine.Op{}, engine.OpError(name, engine.Keys{}, check.InvalidArgument("limiter", "must not be nil; use New"))
	}
	if checkN && (permits < 1 || permits > maxLimit) {
		return ctx, engine.Op{}, engine.OpError(name, l.keys, check.InvalidArgument("permits", "must be between 1 and %d, got %d", maxLimit, permits))
	}
	if l.spec().alg == algConc {
		return ctx, engine.Op{}, engine.OpError(name, l.keys, check.InvalidArgument("limiter", "a concurrency limiter has no %s", name))
	}
	return l.admitOpen(ctx, name)
}

// Reset puts the limiter's key back to empty (one script call, admitted
// through hooks as RATE LIMIT RESET): it deletes the key, so the next
// decision of every process sharing it finds the limiter full. It checks
// first that the key holds this algorithm's state (under any settings)
// and touches nothing otherwise. Permits that a [WithBatch] block holds
// locally, in this process or others, stay theirs. Resetting an absent
// key does nothing; a re-sent Reset is harmless.
//
// Errors: coordination.ErrInvalidArgument naming "limiter" (nil);
// coordination.ErrClosed after Close; coordination.ErrConfigMismatch when
// the key holds another algorithm's state; coordination.ErrBadState when
// it holds foreign data; the hook's error; Redis and network errors.
func (l *Limiter) Reset(ctx context.Context) error {
	ctx, op, err := l.admin(ctx, hooks.RateLimitReset, 0, false)
	if err != nil {
		return err
	}
	if l.decidesLocally() {
		l.alt.mu.Lock()
		l.alt.st.Reset() // a local limiter's state (a fallback's: this replica's)
		l.alt.mu.Unlock()
	} else {
		sp := l.spec()
		_, err = resetScript.Run(ctx, l.e, l.keys, string(rune(sp.alg)), string(sp.kinds))
	}
	if err == nil {
		l.available.Store(int64(l.spec().capacity))
	}
	return op.End(err)
}

// Peek reads the limiter's state without consuming anything (one script
// call, admitted through hooks as RATE LIMIT PEEK; the probe of
// Allow(ctx, 0), without the deny list, the statistics and the allowed /
// blocked counters). The decision is allowed when one permit is free now;
// Available is the number of free permits; a refusal carries RetryAfter,
// the time until one permit is free (for an aligned fixed window, the
// next boundary). Peek writes nothing (except an expiry on a key that
// lost its own, see the package documentation).
//
// Errors: those of [Limiter.Allow] for its script call (with no failure
// mode applied: Redis errors are returned), and
// coordination.ErrInvalidArgument naming "limiter" (nil).
func (l *Limiter) Peek(ctx context.Context) (Decision, error) {
	ctx, op, err := l.admin(ctx, hooks.RateLimitPeek, 0, false)
	if err != nil {
		return Decision{}, err
	}
	l.settingsMu.RLock()
	d, err := l.decide(ctx, l.sp, 0, false)
	l.settingsMu.RUnlock()
	if err != nil {
		return Decision{}, op.End(err)
	}
	l.available.Store(d.available)
	return Decision{allowed: d.acquired, hasRetry: d.hasRetry, retry: d.retry, available: d.available}, op.End(nil)
}

// Penalize consumes permits out of band (one script call, admitted
// through hooks as RATE LIMIT ADJUST), whatever is available: a penalty
// may take the state past empty, which later requests then wait out. It
// returns the permits available after it. By algorithm:
//
//	fixed window    the window's count goes up (a window starts when none
//	                is live); past the limit it refuses until the window ends
//	sliding window  the current segment is charged; permits come back one
//	                window after it
//	token bucket    tokens are taken; below zero they are a debt that
//	                refills before any token is free
//	GCRA            the theoretical arrival time moves permits × interval
//	                forward
//	throttle        the run's count goes up, and the penalty is an attempt:
//	                the run ends Quiet after it
//	sliding log     one more entry at the server's time, leaving one window
//	                after it
//	composite       every component by its rule
//
// Like a settlement, a penalty the key cannot hold (a debt ending past
// 2^53 µs since the epoch; a window count at 10^14 is kept just below)
// is refused by the server with coordination.ErrInvalidArgument, nothing
// written. It is not idempotent: the script is sent at most once, and a
// lost reply is an ambiguous error (the penalty may have been applied).
//
// Errors: coordination.ErrInvalidArgument naming "permits" (below 1 or
// above 2147483647) or "limiter" (nil), with nothing admitted or sent;
// coordination.ErrClosed after Close; errors matching
// coordination.ErrConfigMismatch or coordination.ErrBadState as for
// Allow; the hook's error; Redis and network errors.
func (l *Limiter) Penalize(ctx context.Context, permits int) (int64, error) {
	return l.adjust(ctx, permits, permits)
}

// Reward returns permits out of band (one script call, admitted through
// hooks as RATE LIMIT ADJUST), never beyond full: a fixed or sliding
// window's count goes down (a sliding window's newest segments first) to
// no less than zero, a bucket's tokens (or debt) up to its limit, a GCRA
// arrival time back to no earlier than now, a throttle's count down to no
// less than zero (the end of its run stays), a sliding log's newest
// entries first; a composite's every component so. It returns the permits available after it. Like [Limiter.Penalize]
// it is sent at most once, and its errors are the same.
func (l *Limiter) Reward(ctx context.Context, permits int) (int64, error) {
	return l.adjust(ctx, permits, -permits)
}

func (l *Limiter) adjust(ctx context.Context, permits, delta int) (int64, error) {
	ctx, op, err := l.admin(ctx, hooks.RateLimitAdjust, permits, true)
	if err != nil {
		return 0, err
	}
	l.settingsMu.RLock()
	sp := l.sp
	var a adjustReply
	if l.decidesLocally() {
		a, err = l.alt.adjust(sp, delta, -1)
	} else {
		a, err = sp.scripts.adjust.Run(ctx, l.e, l.keys, sp.args("a", delta)...)
	}
	l.settingsMu.RUnlock()
	if err != nil {
		return 0, op.End(err)
	}
	l.available.Store(a.Available)
	return a.Available, op.End(nil)
}

// decidesLocally reports a limiter whose state is in this process now: an
// in-process limiter ([NewLocal]), or one whose local fallback decides.
// Its administrative operations then act on the local state.
func (l *Limiter) decidesLocally() bool {
	return l.alt != nil && (l.alt.sw == nil || l.alt.sw.local.Load())
}
