package ratelimit

import (
	"context"
	"sync"
	"time"

	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/engine"
)

// WithBatch makes a limiter of [New] decide in blocks: one decision takes
// block permits from Redis at once, and the limiter then serves
// [Limiter.Allow] and [Limiter.Wait] of up to block permits from that block
// in this process, without a round trip, until it is used up. A block not
// used up within hold of its take gives its unused permits back to the
// key (in the background, one command); [Limiter.Close] gives back what
// is left too. It is for hot keys: one key shared by many processes is
// then decided at up to block times the rate one Redis key can answer.
//
// block is in permits, at least 1 and at most the limiter's capacity (a
// composite's: its smallest component's); hold is at least 1 ms. A
// typical choice is a block of 1% to 5% of the limit and a hold of a few
// milliseconds to a tenth of the window.
//
// The bound on overshoot: each batched instance holds at most block
// permits that Redis counted as taken but that it has neither granted nor
// given back. So in any span of time, the permits granted on the key
// exceed what its algorithm admits in that span by at most the sum of the
// blocks of the batched instances using it: P × block for P processes
// (instances) of the same block. A fixed window of Limit grants at most
// Limit + P × block in one window, a sliding window at most that in any
// span of one window, a token bucket at most Limit + the refill of the
// span + P × block, a GCRA limiter Burst + span / Interval + P × block.
// The bound holds whatever hold is (hold bounds how long unused permits
// stay out of other processes' reach, not the overshoot); its times are
// the server's, up to one round trip. Unbatched decisions on the same key
// (other processes, requests of more than block permits) add nothing to
// it.
//
// Every algorithm gives unused permits back, as a settlement does (see
// [Reservation.Settle]): a fixed window's count drops (in the window then
// live, never below empty), a sliding window's newest segments return
// them, a token bucket gets its tokens back and a GCRA limiter its
// arrival time (never beyond full). A give-back whose reply is lost may
// not have applied: those permits lapse, as do the unused permits of a
// process that ends without Close, or that calls Close after the
// coordinator's Shutdown (nothing is sent then). In the middleware, a
// policy before the last (whose grant a later policy's refusal refunds,
// naming the grant's server mark) is decided alone, never from a block.
//
// Serving: a request of 1 to block permits is granted from the block when
// enough are left; otherwise the limiter tops the block up to block
// permits in one decision (of block minus what is left), one at a time per
// instance (concurrent callers wait for it). When Redis refuses that, the
// request is decided alone, as without WithBatch, and so is every request
// until a whole block could be free again (the refusal's RetryAfter), so
// refusals carry the server's RetryAfter and Available for the request
// itself. Probes (0 permits), requests of more than block permits and
// [Limiter.Reserve] are always decided alone.
//
// A decision served from a block is an allowed [Decision] without
// RetryAfter, whose Available is the server's Available after the block
// was taken plus the permits left in the block. It is admitted through
// hooks as RATE LIMIT ACQUIRE and counted in
// coordination.rate_limit.allowed and [Statistics] Granted like any
// decision; taking a block and giving permits back are neither admitted
// nor counted (like a queued Wait's retries), and
// [Statistics] AvailablePermits is the server's answer to the latest
// take.
//
// Errors (from [New]): coordination.ErrInvalidArgument naming "block"
// (below 1 or above the capacity) or "hold" (below 1 ms); [NewConcurrency]
// refuses WithBatch (naming "block"): its leases are not consumptive; so
// does a [Throttle], every attempt of which moves the end of its block
// on the server.
func WithBatch(block int, hold time.Duration) Option {
	return func(o *options) error {
		if block < 1 {
			return check.InvalidArgument("block", "must be at least 1 permit, got %d", block)
		}
		if hold < time.Millisecond {
			return check.InvalidArgument("hold", "must be at least 1ms, got %v", hold)
		}
		o.batchBlock, o.batchHold = block, hold
		return nil
	}
}

// batch is a limiter's block of permits (WithBatch). Its fields are
// guarded by mu.
type batch struct {
	block int
	hold  time.Duration

	mu    sync.Mutex
	left  int   // permits taken from Redis, neither granted nor given back
	avail int64 // the server's Available after the latest take
	gen   uint64
	timer *time.Timer
	// taking is closed when the take or give-back in flight ends; nil when
	// none is. One at a time keeps left + what is in flight <= block.
	taking chan struct{}
	// lean: until then requests are decided alone (a block was refused).
	lean   time.Time
	closed bool
	bg     sync.WaitGroup // give-backs of expired blocks
}

// initBatch checks WithBatch against the settings and sets the batch up.
func (l *Limiter) initBatch() error {
	o := l.opts
	if o.batchBlock == 0 {
		return nil
	}
	if l.sp.alg == algConc {
		return check.InvalidArgument("block", "WithBatch applies to New only: a concurrency limiter's leases are not consumptive")
	}
	if l.sp.alg == algThrot {
		return check.InvalidArgument("block", "WithBatch does not apply to a Throttle: every attempt moves the end of its block on the server")
	}
	if c := l.sp.capacity; o.batchBlock > c {
		return check.InvalidArgument("block", "must be at most the limiter's capacity, %d, got %d", c, o.batchBlock)
	}
	l.batch = &batch{block: o.batchBlock, hold: o.batchHold}
	return nil
}

// take is attempt for Allow and Wait: with WithBatch, a request of 1 to
// block permits is served from the block (topped up when short), else
// decided alone; so is a refundable one (the middleware's policies before
// the last: a refund names the grant's server mark, which a grant served
// from the block does not have).
func (l *Limiter) take(ctx context.Context, op engine.Op, permits int, h how) (verdict, error) {
	b := l.batch
	if b == nil || permits == 0 || permits > b.block || h&refundable != 0 {
		return l.attempt(ctx, op, permits, h)
	}
	if ctx.Err() != nil {
		// As an unbatched decision: nothing is granted once ctx ended
		// (found by a new user's try: the block served it).
		return verdict{}, engine.Ended(ctx)
	}
	if d, done, err := l.listsFirst(ctx); done {
		return d, err
	}
	for {
		b.mu.Lock()
		if b.left >= permits {
			b.left -= permits
			d := verdict{acquired: true, available: b.avail + int64(b.left)}
			b.mu.Unlock()
			return d, nil
		}
		if b.closed {
			b.mu.Unlock()
			return verdict{}, errLimiterClosed
		}
		if ch := b.taking; ch != nil {
			b.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return verdict{}, ctx.Err()
			}
		}
		if !b.lean.IsZero() && time.Now().Before(b.lean) {
			b.mu.Unlock()
			return l.attempt(ctx, op, permits, h)
		}
		full := min(b.block, l.spec().capacity)
		charge := full - b.left
		if charge < 1 || permits > full {
			// The capacity fell below the block (Update): alone.
			b.mu.Unlock()
			return l.attempt(ctx, op, permits, h)
		}
		ch := make(chan struct{})
		b.taking = ch
		b.mu.Unlock()

		d, err := l.attempt(ctx, op, charge, 0)

		b.mu.Lock()
		b.taking = nil
		close(ch)
		switch {
		case err != nil:
			b.mu.Unlock()
			return verdict{}, err
		case d.denied:
			b.mu.Unlock()
			return d, nil
		case !d.acquired:
			retry := b.hold
			if d.hasRetry {
				retry = d.retry
			}
			b.lean = time.Now().Add(retry)
			b.mu.Unlock()
			return l.attempt(ctx, op, permits, h)
		case b.closed:
			// Close gave back what was left; give this block back too.
			b.mu.Unlock()
			l.giveBack(charge)
			return verdict{}, errLimiterClosed
		}
		b.left += charge - permits
		b.avail = d.available
		b.gen++
		gen := b.gen
		if b.timer != nil {
			b.timer.Stop()
		}
		b.timer = time.AfterFunc(b.hold, func() { l.expire(gen) })
		left := b.left
		b.mu.Unlock()
		return verdict{acquired: true, available: d.available + int64(left)}, nil
	}
}

// expire gives back what is left of the block taken as gen when its hold
// ends unused (a later take, or a give-back, changed gen: nothing to do).
func (l *Limiter) expire(gen uint64) {
	b := l.batch
	b.mu.Lock()
	if b.closed || b.gen != gen || b.taking != nil || b.left == 0 {
		b.mu.Unlock()
		return
	}
	n := b.left
	b.left = 0
	b.gen++
	ch := make(chan struct{})
	b.taking = ch
	b.bg.Add(1)
	b.mu.Unlock()
	defer b.bg.Done()
	l.giveBack(n)
	b.mu.Lock()
	b.taking = nil
	close(ch)
	b.mu.Unlock()
}

// closeBatch gives back what is left of the block and waits for
// give-backs in flight.
func (l *Limiter) closeBatch() {
	b := l.batch
	if b == nil {
		return
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	if b.timer != nil {
		b.timer.Stop()
	}
	n := b.left
	b.left = 0
	b.mu.Unlock()
	if n > 0 {
		l.giveBack(n)
	}
	b.bg.Wait()
}

// giveBackTimeout bounds one give-back.
const giveBackTimeout = time.Second

// giveBack returns n unused permits to the key, best effort: one
// adjustment of -n, as a settlement below its estimate (not admitted).
func (l *Limiter) giveBack(n int) {
	ctx, cancel := context.WithTimeout(context.Background(), giveBackTimeout)
	defer cancel()
	l.settingsMu.RLock()
	sp := l.sp
	a, err := sp.scripts.adjust.Run(ctx, l.e, l.keys, sp.args("a", -n)...)
	l.settingsMu.RUnlock()
	if err == nil {
		l.available.Store(a.Available)
	}
}
