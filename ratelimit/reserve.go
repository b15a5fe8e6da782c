package ratelimit

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/sentinel"
)

// ErrSettled is returned by [Reservation.Settle] for a reservation settled
// before: each reservation is settled once.
var ErrSettled = errors.New("ratelimit: reservation already settled")

// ErrReservationExpired is returned by [Reservation.Settle] after the
// reservation's timeout ([WithReservationTimeout]): it counts as settled at
// its estimate.
var ErrReservationExpired = errors.New("ratelimit: reservation expired (settled at its estimate)")

func init() { sentinel.RegisterAnswers(ErrSettled, ErrReservationExpired) }

// Reservation is the answer to one [Limiter.Reserve]: a [Decision] (its
// accessors say whether the estimate was granted and, when not, when to
// try again) and, when granted, the reservation to settle once with
// [Reservation.Settle]. Its methods are safe for concurrent use by multiple
// goroutines; a nil *Reservation is refused by Settle.
type Reservation struct {
	Decision
	lim *Limiter
	res *reservation
}

// reservation is the settlement state of a granted reservation.
type reservation struct {
	estimate int
	deadline time.Time // local monotonic deadline
	loc      bool      // decided in this process: settled there
	mark     int64     // a window's (or composite's) grant mark: what a give-back names; -1: none

	mu      sync.Mutex
	settled bool
}

// Reserve takes estimate permits now, like [Limiter.Allow], for work whose
// real cost is known only afterwards (tokens of a metered API, rows of a
// batch job): a granted [*Reservation] is settled with
// [Reservation.Settle] once the cost is known. It is admitted through
// hooks as RATE LIMIT ACQUIRE and does not wait; a refusal (a Reservation
// whose Allowed is false) carries RetryAfter as Allow's does. On an error
// the Reservation is nil.
//
// A reservation not settled within the limiter's reservation timeout
// ([WithReservationTimeout], a minute by default) counts as settled at its
// estimate: nothing more happens on the server.
//
// Every consumptive algorithm supports it (not a [ConcurrencyLimiter]):
// see [Reservation.Settle] for how each gives permits back and charges
// an excess. Errors: those of Allow (an estimate above the capacity
// among them).
func (l *Limiter) Reserve(ctx context.Context, estimate int) (*Reservation, error) {
	var h how
	if l != nil && l.e != nil && windowed(l.spec().alg) {
		h = refundable // a give-back names the grant
	}
	ctx, op, err := l.begin(ctx, estimate, 0)
	if err != nil {
		return nil, err
	}
	defer l.active.Add(-1)
	d, err := l.attempt(ctx, op, estimate, h)
	le, err := l.settle(ctx, op, d, err)
	if err != nil {
		return nil, err
	}
	r := &Reservation{Decision: le.decision(), lim: l}
	if le.acquired && le.permits > 0 && !le.failedOpen {
		r.res = &reservation{estimate: estimate, deadline: time.Now().Add(l.opts.reserve), loc: le.loc, mark: -1}
		if h == refundable {
			r.res.mark = le.mark
		}
	}
	return r, nil
}

// windowed reports an algorithm whose state cannot take permits back
// unconditionally (a window that ended holds nothing of a grant): fixed
// and sliding windows, sliding logs, throttles and composites, whose
// give-backs name the grant.
func windowed(alg byte) bool {
	return alg == algFixed || alg == algSliding || alg == algComp || alg == algThrot || alg == algLog
}

// Settle charges a reservation's real cost, actual permits, in one script
// call (admitted through hooks as RATE LIMIT SETTLE), and returns the
// permits given back: estimate - actual. When actual is below the
// estimate the difference returns to the limiter (never beyond full);
// when it is above, the excess is charged as debt that delays later
// admissions by exactly that much (for GCRA, excess × the interval; for a
// token bucket, the periods that refill the excess). actual equal to the
// estimate sends nothing.
//
// Windows give back only what they provably still hold of the
// reservation's grant, as the middleware's refunds do: a fixed window only
// while the grant's window lasts (after it, nothing: the grant's permits
// came back with the new window), a sliding window only from the grant's own segment while it is in the window, a throttle only to the run of attempts that
// holds the grant, a sliding log only from the grant's own entry
// while it is in the log, a composite each component by its rule. Settle
// then returns estimate - actual when anything was given back (a sliding
// window or a composite may give back fewer), 0 when nothing could be. An
// excess is charged to the window current at the settlement (a fixed
// window's count may pass its limit: later requests are refused until it
// ends).
//
// actual is 0 to estimate + the limiter's capacity, in permits (the
// capacity of its settings when Settle is called, as for
// [Limiter.Allow]): the excess, the debt one settlement leaves, is at
// most one whole capacity, the time an empty limiter takes to fill (a
// GCRA limiter of Burst 10 at 10 a minute: a minute). More is refused
// before anything is sent. Debts that pile up (many reservations each
// settled far above its estimate) are bounded by the server too: a
// settlement that would leave a debt the key cannot hold (its end past
// 2^53 microseconds since the epoch, in the year 2255, or sooner for a
// GCRA interval that is not a whole number of microseconds) is refused
// with coordination.ErrInvalidArgument, nothing written.
//
// A reservation is settled once: an admitted Settle marks it settled at
// once (a concurrent Settle gets [ErrSettled]), and its script is sent at
// most once (never re-sent after it may have run, see the package
// documentation). A Settle that fails leaves the reservation to be settled again when
// nothing was applied: bad input, a hook's rejection or a closed
// coordinator (refused before anything is admitted or sent), and an error
// that proves the settlement did not run (an error reply of the server,
// such as the out-of-range refusal above, or a connection that could not
// be made). A Settle that may have been applied (a lost reply, a timeout,
// a cancelled context: coordination.IsAmbiguous) leaves it settled.
//
// Errors: coordination.ErrInvalidArgument naming "actual" (negative, or
// above estimate + capacity) or "reservation" (nil, refused, or granted
// by [FailOpen] without asking Redis), with nothing sent;
// [ErrSettled] for a Settle after one that settled it;
// [ErrReservationExpired] after the reservation timeout (it then counts
// as settled at its estimate); coordination.ErrInvalidArgument from the
// server for a debt out of range; errors matching
// coordination.ErrConfigMismatch or coordination.ErrBadState as for
// Allow; Redis and network errors.
func (rv *Reservation) Settle(ctx context.Context, actual int) (int, error) {
	var keys engine.Keys // the limiter's, when there is one
	if rv != nil && rv.lim != nil {
		keys = rv.lim.keys
	}
	if actual < 0 {
		return 0, engine.OpError(hooks.RateLimitSettle, keys, check.InvalidArgument("actual", "must be >= 0, got %d", actual))
	}
	if rv == nil || rv.res == nil || rv.lim == nil {
		return 0, engine.OpError(hooks.RateLimitSettle, keys, check.InvalidArgument("reservation", "only a granted reservation of Reserve can be settled"))
	}
	r, lim := rv.res, rv.lim
	// actual - estimate cannot overflow (both are >= 0), nor can the sum
	// in int64.
	if c := lim.spec().capacity; actual-r.estimate > c {
		return 0, engine.OpError(hooks.RateLimitSettle, keys, check.InvalidArgument("actual",
			"must be at most %d (the estimate, %d, plus the limiter's capacity, %d), got %d", int64(r.estimate)+int64(c), r.estimate, c, actual))
	}
	ctx, op, err := lim.e.Admit(ctx, hooks.RateLimitSettle, primitive, lim.keys)
	if err != nil {
		return 0, err
	}
	r.mu.Lock()
	settled := r.settled
	r.settled = true
	r.mu.Unlock()
	switch {
	case settled:
		return 0, op.End(ErrSettled)
	case time.Now().After(r.deadline):
		return 0, op.End(ErrReservationExpired)
	}
	delta := actual - r.estimate
	if delta == 0 {
		return 0, op.End(nil)
	}
	lim.settingsMu.RLock()
	sp := lim.sp
	var (
		a     adjustReply
		mark  int64 = -1 // a give-back that names the grant
		opArg       = "a"
		n           = delta
	)
	if delta < 0 && r.mark >= 0 {
		mark, opArg, n = r.mark, "r"+strconv.FormatInt(r.mark, 10), -delta
	}
	if r.loc {
		a, err = lim.alt.adjust(sp, n, mark)
	} else {
		a, err = sp.scripts.adjust.Run(ctx, lim.e, lim.keys, sp.args(opArg, n)...)
	}
	lim.settingsMu.RUnlock()
	if err != nil {
		if !lim.e.Ambiguous(err) {
			// Refused by the server, or never sent: nothing was applied.
			r.mu.Lock()
			r.settled = false
			r.mu.Unlock()
		}
		return 0, op.End(err)
	}
	lim.available.Store(a.Available)
	if mark >= 0 && !a.Applied {
		return 0, op.End(nil) // the window holds nothing of the grant any more
	}
	return -delta, op.End(nil)
}
