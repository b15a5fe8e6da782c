package ratelimit

import (
	"container/list"
	"context"
	"time"

	"github.com/coordkit/coordination/internal/engine"
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
// are not free: it is granted when the server grants them, unless ctx ends
// first (or the request is evicted, or the limiter is closed). It is
// admitted through hooks once (RATE LIMIT ACQUIRE), however many attempts
// it makes.
//
// Like golang.org/x/time/rate, Wait fails fast: when the server's retry
// time is past ctx's deadline, it returns at once with the refused lease
// (and its RetryAfter) and a nil error, instead of sleeping until the
// deadline. More permits than the limiter's capacity can never be granted:
// Wait returns an error naming "permits" at once, admitting nothing. A
// denied identity ([WithDenyList]) is refused at once.
//
// Without [WithQueue] the queue is unbounded and served oldest first.
// With a bounded queue, a request that does not fit is refused at once
// (an unacquired lease) or, under [NewestFirst], evicts the oldest
// waiters (they get an unacquired lease); WithQueue(0, ...) makes Wait
// one attempt, like [Limiter.Allow]. A request that finds the queue empty
// tries Redis at once; one that finds waiters ahead of it queues behind
// them without trying first (refused because the queue is full, it then
// carries no RetryAfter).
//
// A queued request does not poll: the head of the queue sleeps until the
// server-computed retry time; a concurrency limiter's head sleeps until a
// lease is released here or announced on Redis Pub/Sub (re-checking at
// least every 5 s, and every 250 ms while the subscription is not
// confirmed) or the earliest lease would expire. The others sleep until
// they become the head. [Limiter.Update] wakes the head to try again under
// the new settings, and refuses queued requests larger than the new
// capacity.
//
// Errors are those of Allow, and coordination.ErrInvalidArgument naming
// "permits" for more permits than the capacity. When ctx ends while queued
// the error matches both coordination.ErrNotAcquired and ctx's error
// (context.Cause); after Close queued requests fail with
// coordination.ErrClosed. A Redis failure while queued ends the wait: the
// limiter's [FailureMode] applies, as for Allow.
func (l *Limiter) Wait(ctx context.Context, permits int) (Lease, error) {
	if l != nil && l.e != nil {
		if c := l.spec().capacity; permits > c {
			return Lease{}, engine.InvalidArgument("permits", "%d permits can never be granted: the limiter's capacity is %d", permits, c)
		}
	}
	ctx, op, err := l.begin(ctx, permits)
	if err != nil {
		return Lease{}, err
	}
	defer l.active.Add(-1)
	l.mu.Lock()
	empty := l.queue.Len() == 0
	l.mu.Unlock()
	first, tried := refused, false
	if empty {
		// Nobody local is ahead: try at once.
		d, err := l.attempt(ctx, permits)
		if err != nil || d.acquired || d.available < 0 || l.opts.queueLimit == 0 || pastDeadline(ctx, d) {
			return l.settle(ctx, op, d, err)
		}
		first, tried = d, true
	}
	w, ok, err := l.enqueue(permits)
	if err != nil || !ok {
		return l.settle(ctx, op, first, err)
	}
	start := time.Now()
	d, err := l.serve(ctx, w, first, tried)
	l.recordWait(start, err == nil && d.acquired)
	return l.settle(ctx, op, d, err)
}

// pastDeadline reports whether a refusal's retry time is past ctx's
// deadline: waiting for it cannot succeed.
func pastDeadline(ctx context.Context, d decision) bool {
	if !d.hasRetry {
		return false
	}
	dl, ok := ctx.Deadline()
	return ok && time.Now().Add(d.retry).After(dl)
}

// enqueue adds a waiter for permits, evicting the oldest waiters under
// NewestFirst. It reports false when the request does not fit, and
// coordination.ErrClosed when the limiter was closed meanwhile.
func (l *Limiter) enqueue(permits int) (*waiter, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, false, engine.ErrClosed
	}
	if limit := int64(l.opts.queueLimit); limit != unbounded {
		if int64(permits) > limit {
			return nil, false, nil
		}
		if l.queued+int64(permits) > limit {
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
	}
	oldHead := l.headLocked()
	w := &waiter{permits: permits, sig: make(chan struct{}, 1)}
	w.elem = l.queue.PushBack(w)
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
func (l *Limiter) serve(ctx context.Context, w *waiter, first decision, tried bool) (decision, error) {
	defer l.leave(w)
	cfg := engine.WaitConfig{Wake: w.sig}
	// A concurrency limiter subscribes to its key's release channel after
	// the loop's first unsuccessful attempt and tries again at once: the
	// refusal already in hand stands for that first attempt.
	reuse := false
	if l.spec().alg == algConc {
		cfg.Key = l.keys.Full()[0]
		reuse = tried
	} else if first.hasRetry {
		cfg.FirstIn = first.retry
	}
	var (
		d      decision
		failed error
	)
	err := l.e.Wait(ctx, cfg, func(ctx context.Context) (engine.Attempt, error) {
		l.mu.Lock()
		state, head := w.state, l.headLocked() == w
		l.mu.Unlock()
		switch state {
		case wEvicted:
			d = refused
			return engine.Attempt{Done: true}, nil
		case wTooLarge:
			d = refused // the settings changed: it can never be granted
			return engine.Attempt{Done: true}, nil
		case wClosed:
			return engine.Attempt{}, engine.ErrClosed
		}
		reuseNow := reuse
		reuse = false // only the loop's first attempt, and only as the head
		if !head {
			return engine.Attempt{}, nil
		}
		if reuseNow {
			return engine.Attempt{RetryIn: first.hint}, nil
		}
		r, err := l.attempt(ctx, w.permits)
		switch {
		case err != nil && engine.Classify(err) == engine.Canceled:
			return engine.Attempt{}, err // the loop gives up
		case err != nil:
			failed = err // the failure mode applies: stop waiting
			return engine.Attempt{Done: true}, nil
		case r.acquired, r.available < 0, pastDeadline(ctx, r):
			d = r
			return engine.Attempt{Done: true}, nil
		case r.hasRetry:
			return engine.Attempt{RetryIn: r.retry}, nil
		default:
			return engine.Attempt{RetryIn: r.hint}, nil
		}
	})
	if err == nil {
		err = failed
	}
	return d, err
}
