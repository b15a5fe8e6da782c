package ratelimit

import (
	"fmt"
	"time"

	"github.com/coordkit/coordination/internal/check"
)

// QueueOrder is the order in which a limiter's local queue serves waiters.
type QueueOrder int

const (
	// OldestFirst serves waiters in arrival order. A request that does not
	// fit in a bounded queue fails (a [*WaitError]). It is the default.
	OldestFirst QueueOrder = iota
	// NewestFirst serves the latest waiter first. A request that does not
	// fit evicts the oldest waiters (their Wait fails with a [*WaitError])
	// until it fits.
	NewestFirst
)

// String returns "oldest first" or "newest first".
func (o QueueOrder) String() string {
	switch o {
	case OldestFirst:
		return "oldest first"
	case NewestFirst:
		return "newest first"
	default:
		return fmt.Sprintf("QueueOrder(%d)", int(o))
	}
}

// FailureMode says what a limiter answers when Redis cannot give a
// decision: a network error, a stopped or unreachable server, an error
// reply such as LOADING, READONLY, NOPERM or NOAUTH. Cancellation of the
// caller's context is always returned as an error, whatever the mode, and
// so are usage errors: a closed limiter, and a key holding other settings
// (coordination.ErrConfigMismatch) or foreign data
// (coordination.ErrBadState). The hooks see the failure (outcome Failed)
// in every mode, and [NewMiddleware] logs it.
//
// So a frozen server (one that accepts a command and never answers) is
// an outage for a mode only when go-redis gives up first (its read
// timeout, 3 s by default): a call whose own deadline passes first
// returns the context's error in every mode, and FailOpen admits nothing.
// Where a hung server must be admitted, give the calls a deadline longer
// than the client's read timeout, or use [WithLocalFallback], which
// counts a passed deadline as a failure of Redis and decides locally.
type FailureMode int

const (
	// ReturnError returns the error to the caller. It is the default.
	ReturnError FailureMode = iota
	// FailOpen grants without consuming anything: an allowed [Decision] or
	// [Reservation] whose FailedOpen reports true, and for a
	// [ConcurrencyLimiter] a [*ConcurrencyLease] that holds nothing
	// ([ConcurrencyLease.FailedOpen]). The limit is not enforced while
	// Redis is unreachable. Counted in coordination.rate_limit.unavailable
	// with failure_mode=fail_open.
	FailOpen
	// FailClosed refuses: a refused Decision or Reservation without
	// RetryAfter; from [Limiter.Wait], [ConcurrencyLimiter.TryAcquire] and
	// [ConcurrencyLimiter.Acquire] a [*WaitError] whose Err is the failure.
	// Counted in coordination.rate_limit.blocked with reason=unavailable.
	FailClosed
)

// String returns "return error", "fail open" or "fail closed".
func (m FailureMode) String() string {
	switch m {
	case ReturnError:
		return "return error"
	case FailOpen:
		return "fail open"
	case FailClosed:
		return "fail closed"
	default:
		return fmt.Sprintf("FailureMode(%d)", int(m))
	}
}

// Option configures a limiter. Options are applied in order; an invalid
// one makes the constructor fail with an error naming it.
type Option func(*options) error

type options struct {
	queueLimit int // permits; defaultQueue (-1): DefaultQueueWaiters waiters
	order      QueueOrder
	failure    FailureMode
	strict     bool
	deny       *DenyList
	identity   string
	allow      *AllowList
	allowID    string // the identity WithAllowList checks
	reserve    time.Duration
	lease      time.Duration   // NewConcurrency's lease duration; 0: default
	batchBlock int             // WithBatch: permits per block; 0: no batch
	batchHold  time.Duration   // WithBatch: how long a block is served
	fallback   *fallbackSwitch // WithLocalFallback; nil without
	clock      func() int64    // local decisions' clock (µs; tests); nil: monotonic
}

// DefaultReservationTimeout is how long a reservation ([Limiter.Reserve])
// may stay unsettled when no [WithReservationTimeout] is given.
const DefaultReservationTimeout = time.Minute

// DefaultQueueWaiters is how many requests may wait in a limiter's local
// queue ([Limiter.Wait], [ConcurrencyLimiter.Acquire]) when no [WithQueue]
// is given: 1,000 waiters, served oldest first; one more fails at once
// with a [*WaitError] ("the local queue is full"). The default bounds the
// waiters, not the permits: each waiter is a goroutine of the caller's
// (a few KB of stack) parked in this process, which is what an unbounded
// queue lets a burst of traffic pile up without end (1,000 parked
// goroutines are a few MB per limiter); a bound in permits would instead
// refuse the large requests of a limiter counted in bytes or tokens, which
// its capacity admits. 1,000 is far above what a queue serves within
// usual timeouts for a limit of tens of requests per second, and far
// below what exhausts a process's memory.
const DefaultQueueWaiters = 1000

// defaultQueue is the queue limit of a limiter without [WithQueue]:
// DefaultQueueWaiters waiters, whatever their permits.
const defaultQueue = -1

// WithQueue bounds the local queue of [Limiter.Wait] and
// [ConcurrencyLimiter.Acquire]: up to limit permits
// (not requests) may wait in this process, served in order. A request that
// does not fit fails at once under [OldestFirst] (a [*WaitError], with
// RetryAfter when it tried Redis first); under [NewestFirst] it evicts
// the oldest waiters instead (each fails with a [*WaitError]). WithQueue(0, order) means Wait never queues:
// it makes one attempt, like [Limiter.Allow].
//
// Without WithQueue the queue holds up to [DefaultQueueWaiters] requests
// (whatever their permits), served oldest first; WithQueue replaces that
// bound by its own, in permits. There is no unbounded mode: a limit as
// large as math.MaxInt is one in effect, asked for explicitly.
//
// The queue is local: other processes, and Allow calls here, are not
// ordered with it. A queued request sleeps until the server-computed retry
// time (concurrency limiters: until a lease is released here or announced
// on Redis Pub/Sub, or the earliest lease would expire), then tries again;
// it never polls on a fixed short period.
//
// Errors: coordination.ErrInvalidArgument naming "queueLimit" for
// limit < 0, or "queueOrder" for an order other than OldestFirst and
// NewestFirst.
func WithQueue(limit int, order QueueOrder) Option {
	return func(o *options) error {
		if limit < 0 {
			return check.InvalidArgument("queueLimit", "must be >= 0, got %d", limit)
		}
		if order != OldestFirst && order != NewestFirst {
			return check.InvalidArgument("queueOrder", "must be OldestFirst or NewestFirst, got %d", int(order))
		}
		o.queueLimit, o.order = limit, order
		return nil
	}
}

// WithFailureMode sets what the limiter answers when Redis cannot decide.
// The default is [ReturnError]. Errors: coordination.ErrInvalidArgument
// naming "failureMode" for an unknown mode.
func WithFailureMode(m FailureMode) Option {
	return func(o *options) error {
		if m != ReturnError && m != FailOpen && m != FailClosed {
			return check.InvalidArgument("failureMode", "unknown mode %d", int(m))
		}
		o.failure = m
		return nil
	}
}

// WithStrictSettings sets whether a limiter refuses a key whose state was
// stored under other settings (another limit, window, rate ...) with an
// error matching coordination.ErrConfigMismatch. The default is false: a
// decision applies the limiter's own settings to such state, preserving
// its usage (see [Limiter.Update]), so that a rolling deploy of new limits
// just works.
func WithStrictSettings(on bool) Option {
	return func(o *options) error {
		o.strict = on
		return nil
	}
}

// WithDenyList binds the limiter to a deny list and the identity its
// requests belong to (a client, tenant or user): every [Limiter.Allow],
// [Limiter.Wait], [Limiter.Reserve], [ConcurrencyLimiter.TryAcquire] and
// [ConcurrencyLimiter.Acquire] checks the identity's membership (through
// the list's local cache) before anything else, and a denied identity is
// refused: a Decision or Reservation whose Denied reports true (from Wait,
// TryAcquire and Acquire a [*WaitError] whose Denied is true), without
// RetryAfter, without touching the limiter's key or queue. Queued
// requests check again before each retry. Counted in
// coordination.rate_limit.blocked with reason=deny_list.
//
// Errors: coordination.ErrInvalidArgument naming "denyList" (nil) or
// "identity" (empty).
func WithDenyList(list *DenyList, identity string) Option {
	return func(o *options) error {
		if err := checkBinding("denyList", list == nil, identity); err != nil {
			return err
		}
		o.deny, o.identity = list, identity
		return nil
	}
}

// WithAllowList binds the limiter to an allow list and the identity its
// requests belong to (a client, tenant or user; with [NewPartitioned],
// the partition the factory is given): every [Limiter.Allow],
// [Limiter.Wait], [Limiter.Reserve], [ConcurrencyLimiter.TryAcquire] and
// [ConcurrencyLimiter.Acquire] checks the identity's membership (through
// the list's local cache: at most one Redis read, shared) before any
// decision, and an allowed identity is granted at once, whatever the
// permits: without the decision script, consuming nothing, without
// queuing behind other waiters. Such a grant is like [FailOpen]'s without
// its FailedOpen: a Decision whose Available is -1, a Reservation with
// nothing to settle, a [*ConcurrencyLease] that holds nothing (its
// Context is never cancelled, Release asks nothing of Redis). The deny
// list ([WithDenyList]) is checked first: an identity on both is denied.
// An allowed grant is counted in coordination.rate_limit.allowed with
// reason=allow_list. A failing read of the list is the limiter's failure
// (its [FailureMode] applies).
//
// Errors: coordination.ErrInvalidArgument naming "allowList" (nil) or
// "identity" (empty).
func WithAllowList(list *AllowList, identity string) Option {
	return func(o *options) error {
		if err := checkBinding("allowList", list == nil, identity); err != nil {
			return err
		}
		o.allow, o.allowID = list, identity
		return nil
	}
}

// checkBinding checks the arguments of WithDenyList and WithAllowList:
// the list (named arg; nilList when nil) and the identity.
func checkBinding(arg string, nilList bool, identity string) error {
	if nilList {
		return check.InvalidArgument(arg, "must not be nil")
	}
	if identity == "" {
		return check.InvalidArgument("identity", "must not be empty")
	}
	return check.Size("identity", len(identity), check.MaxIdentityBytes)
}

// WithReservationTimeout sets how long a reservation ([Limiter.Reserve])
// may stay unsettled: after it, the reservation counts as settled at its
// estimate and [Reservation.Settle] is refused. At least 1 ms; the default is
// [DefaultReservationTimeout]. Errors: coordination.ErrInvalidArgument
// naming "reservationTimeout".
func WithReservationTimeout(d time.Duration) Option {
	return check.AtLeast("reservationTimeout", d, time.Millisecond, func(o *options) { o.reserve = d })
}

// WithLeaseDuration sets how long a [ConcurrencyLimiter]'s lease survives
// without renewal: at least 30 ms, rounded up to whole milliseconds. Its
// leases renew themselves every third of it while held. The default is
// [DefaultLeaseDuration]. It is an option of [NewConcurrency] only: [New]
// refuses it. Errors: coordination.ErrInvalidArgument naming
// "leaseDuration".
func WithLeaseDuration(d time.Duration) Option {
	return check.AtLeast("leaseDuration", d, minLeaseDuration, func(o *options) { o.lease = d })
}
