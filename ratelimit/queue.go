package ratelimit

import (
	"container/list"
	"context"
	"time"

	coordination "github.com/coordkit/coordination"
)

type waiterState int

const (
	wQueued waiterState = iota
	wEvicted
	wClosed
)

// waiter is one queued Wait call. Its fields are guarded by limiter.mu,
// except sig, which is written to without the lock.
type waiter struct {
	permits int
	state   waiterState
	elem    *list.Element
	sig     chan struct{} // state or headship changed
}

func (w *waiter) signal() {
	select {
	case w.sig <- struct{}{}:
	default:
	}
}

// recheck caps a concurrency waiter's sleep, so a lost Pub/Sub message
// delays it by at most this long.
const recheck = 5 * time.Second

// Wait implements [Limiter].
func (l *limiter) Wait(ctx context.Context, permits int) (Lease, error) {
	ctx, finish, token, err := l.begin(ctx, permits)
	if err != nil {
		return Lease{}, err
	}
	defer l.active.Add(-1)
	l.mu.Lock()
	empty := l.queue.Len() == 0
	l.mu.Unlock()
	var first decision
	if empty || permits > l.capacity {
		// Nobody local is ahead: try at once.
		d, err := l.attempt(ctx, permits, token)
		if err != nil || d.acquired || permits > l.capacity || l.opts.queueLimit == 0 {
			return l.settle(ctx, d, err, finish)
		}
		first = d
	} else {
		first = decision{available: -1, retry: -1, hint: -1}
	}
	w, ok, err := l.enqueue(permits)
	if err != nil || !ok {
		return l.settle(ctx, first, err, finish)
	}
	d, err := l.serve(ctx, w, token, first)
	return l.settle(ctx, d, err, finish)
}

// enqueue adds a waiter for permits, evicting the oldest waiters under
// NewestFirst. It reports false when the request does not fit, and
// coordination.ErrClosed when the limiter was closed meanwhile.
func (l *limiter) enqueue(permits int) (*waiter, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, false, coordination.ErrClosed
	}
	if int64(permits) > int64(l.opts.queueLimit) {
		return nil, false, nil
	}
	if l.queued+int64(permits) > int64(l.opts.queueLimit) {
		if l.opts.order == OldestFirst {
			return nil, false, nil
		}
		for l.queued+int64(permits) > int64(l.opts.queueLimit) {
			old := l.queue.Front().Value.(*waiter)
			l.removeLocked(old)
			old.state = wEvicted
			old.signal()
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

func (l *limiter) headLocked() *waiter {
	var e *list.Element
	if l.opts.order == NewestFirst {
		e = l.queue.Back()
	} else {
		e = l.queue.Front()
	}
	if e == nil {
		return nil
	}
	return e.Value.(*waiter)
}

// removeLocked takes w out of the queue (if still there) and signals the
// new head when w was the head.
func (l *limiter) removeLocked(w *waiter) {
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

func (l *limiter) leave(w *waiter) {
	l.mu.Lock()
	l.removeLocked(w)
	l.mu.Unlock()
}

// serve runs w's turn in the queue: it waits until w is the head, sleeps
// until the last decision's retry time, and tries again, until granted,
// evicted, closed, cancelled or failed. last is the refused decision that
// sent it to the queue (retry < 0 when it was queued without trying).
func (l *limiter) serve(ctx context.Context, w *waiter, token string, last decision) (decision, error) {
	var (
		timer   *time.Timer
		watch   *coordination.Watch
		watched bool // a subscription was attempted (it may have failed)
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		watch.Close()
	}()
	// Zero: try as soon as w is the head. A concurrency waiter always does,
	// right after subscribing, so that a release between its first attempt
	// and the subscription is not missed.
	retryAt := time.Time{}
	if last.retry >= 0 {
		retryAt = time.Now().Add(last.retry)
	}
	refused := decision{available: -1, retry: -1, hint: -1}
	for {
		l.mu.Lock()
		state, head := w.state, l.headLocked() == w
		l.mu.Unlock()
		switch state {
		case wEvicted:
			return refused, nil
		case wClosed:
			return decision{}, coordination.ErrClosed
		}
		if !head {
			select {
			case <-w.sig:
				continue
			case <-ctx.Done():
				l.leave(w)
				return decision{}, coordination.GaveUp(ctx)
			}
		}
		if l.conc && !watched {
			// Subscribe before the next attempt, so a release after it is
			// never missed; without Pub/Sub (an ACL may forbid it) the
			// re-check bounds the wait.
			watched = true
			watch, _ = l.coord.Watch(ctx, l.key)
		}
		if d := time.Until(retryAt); d > 0 {
			if timer == nil {
				timer = time.NewTimer(d)
			} else {
				timer.Reset(d)
			}
			var notify <-chan struct{}
			if watch != nil {
				notify = watch.C()
			}
			var wake <-chan struct{}
			if l.conc {
				wake = l.wake
			}
			select {
			case <-timer.C:
			case <-notify:
			case <-wake:
			case <-w.sig:
				timer.Stop()
				continue // headship or state changed: look again
			case <-ctx.Done():
				l.leave(w)
				return decision{}, coordination.GaveUp(ctx)
			}
			timer.Stop()
		}
		d, err := l.attempt(ctx, w.permits, token)
		if err != nil || d.acquired {
			l.leave(w)
			return d, err
		}
		switch {
		case d.retry >= 0:
			retryAt = time.Now().Add(d.retry)
		case l.conc:
			retryAt = time.Now().Add(concWait(d, watch != nil))
		default:
			retryAt = time.Now().Add(recheck)
		}
	}
}

// concWait is how long a refused concurrency waiter sleeps at most before
// trying again: until the earliest lease would expire if it is not renewed,
// capped by the re-check period (250 ms without a Pub/Sub subscription).
// Releases (local, or announced on Pub/Sub) wake it earlier.
func concWait(d decision, subscribed bool) time.Duration {
	limit := recheck
	if !subscribed {
		limit = 250 * time.Millisecond
	}
	if d.hint > 0 && d.hint < limit {
		return d.hint
	}
	return limit
}
