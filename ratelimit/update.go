package ratelimit

import (
	"context"
	"reflect"

	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/sentinel"
)

// Update changes the limiter's settings (admitted through hooks as RATE
// LIMIT UPDATE). It sends nothing to Redis: the next decision applies the
// new settings to the stored state, in the same one command, preserving
// its usage by each algorithm's rule:
//
//	fixed window    the count and the window's end stay; the new limit applies
//	                at once, the new width from the next window
//	sliding window  permits of segments still live under both windows stay,
//	                placed in the new segment that holds their old segment's
//	                end (never returned earlier), then returned one new window
//	                after it
//	token bucket    whole periods that passed are refilled at the old rate,
//	                then the tokens are clamped to the new limit; the partial
//	                period in progress carries on at the new rate
//	GCRA            the debt (permits not yet back) is kept in permits and
//	                rescaled to the new interval, rounding up
//	throttle        the count and the run's attempt times stay; the new limit
//	                and quiet period apply at once
//	sliding log     the entries stay; the new limit and window apply to them
//	                at once
//	composite       each component by its rule
//	concurrency     the new limit applies to the leases held ([ConcurrencyLimiter.Update])
//
// Until that next decision the key keeps the expiry the old settings gave
// it: after an update to a longer window or quiet period (sliding window,
// throttle, sliding log), state that the new settings would still count
// expires under the old ones when no decision on the key comes before the
// old expiry (a Peek or a probe writes nothing and does not extend it);
// the next decision then starts afresh. A block by a throttle is extended
// only by the next attempt, which it refuses.
//
// An absent key stays absent (the next grant starts from the new
// settings); an identical update changes nothing. Processes that still run
// the old settings keep deciding with them (each decision migrates the
// state to its own settings), so a rolling deploy gets decisions, never an
// error, on both sides. [WithStrictSettings] makes such state an error
// instead.
//
// Update waits for the decisions in flight on this instance to finish,
// then swaps the settings: every decision uses one consistent set. It
// wakes the local queue to try again at once, and fails queued requests
// larger than the new capacity ([Limiter.Wait] returns an error wrapping
// coordination.ErrInvalidArgument naming "permits").
//
// The key and the algorithm cannot change (nor, for a composite, the
// number and the algorithms of its components): use a new key.
//
// Errors: coordination.ErrInvalidArgument naming "limiter" (nil),
// "settings" (nil, another algorithm or composite structure) or the
// invalid setting ("limit", "window" ...), with nothing admitted;
// coordination.ErrClosed after Close; the hook's error.
func (l *Limiter) Update(ctx context.Context, s Settings) error {
	if l == nil || l.e == nil {
		return engine.OpError(hooks.RateLimitUpdate, engine.Keys{}, check.InvalidArgument("limiter", "must not be nil; use New"))
	}
	next, err := specOf("settings", s)
	if err != nil {
		return engine.OpError(hooks.RateLimitUpdate, l.keys, err)
	}
	if err := l.sameAlgorithm(next); err != nil {
		return engine.OpError(hooks.RateLimitUpdate, l.keys, err)
	}
	_, op, err := l.e.Admit(ctx, hooks.RateLimitUpdate, primitive, l.keys)
	if err != nil {
		return err
	}
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return op.End(sentinel.ErrClosed)
	}
	l.settingsMu.Lock()
	same := l.sp.cfg == next.cfg
	if !same {
		l.sp = next
	}
	l.settingsMu.Unlock()
	if !same {
		l.requeue(next.capacity)
	}
	return op.End(nil)
}

// requeue refuses queued requests larger than capacity and wakes the head
// to try again under new settings.
func (l *Limiter) requeue(capacity int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for el := l.queue.Front(); el != nil; {
		next := el.Next()
		if w := el.Value.(*waiter); w.permits > capacity {
			l.removeLocked(w)
			w.state = wTooLarge
			w.signal()
		}
		el = next
	}
	if w := l.headLocked(); w != nil {
		w.signal()
	}
}

// sameAlgorithm refuses settings of another algorithm (or composite
// structure) than the limiter's, naming "settings".
func (l *Limiter) sameAlgorithm(next *spec) error {
	cur := l.spec()
	if next.alg != cur.alg || !reflect.DeepEqual(next.kinds, cur.kinds) {
		return check.InvalidArgument("settings", "the algorithm cannot change (nor a composite's components): use a new key")
	}
	return nil
}

// adopt gives a limiter no one has used yet the settings of next, without
// hooks ([Partitioned.UpdateAll]'s settings for the partitions it creates
// afterwards); settings of another algorithm are refused as Update refuses
// them.
func (l *Limiter) adopt(next *spec) error {
	if err := l.sameAlgorithm(next); err != nil {
		return engine.OpError(hooks.RateLimitUpdate, l.keys, err)
	}
	l.settingsMu.Lock()
	l.sp = next
	l.settingsMu.Unlock()
	return nil
}
