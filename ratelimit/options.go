package ratelimit

import (
	"fmt"

	coordination "github.com/coordkit/coordination"
)

// QueueOrder is the order in which a limiter's local queue serves waiters.
type QueueOrder int

const (
	// OldestFirst serves waiters in arrival order. A request that does not
	// fit in the queue is refused.
	OldestFirst QueueOrder = iota
	// NewestFirst serves the latest waiter first. A request that does not
	// fit evicts the oldest waiters (they get an unacquired lease) until it
	// fits.
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

// FailureMode says what a limiter answers when Redis cannot give a decision:
// a network error, a stopped or unreachable server, an error reply such as
// LOADING, READONLY or NOPERM. Cancellation of the caller's context is
// always returned as an error, whatever the mode, and so are usage errors: a
// closed limiter, and a key holding other settings
// (coordination.ErrConfigMismatch) or foreign data
// (coordination.ErrBadState). The hooks see the failure (outcome Failed)
// in every mode.
type FailureMode int

const (
	// ReturnError returns the error to the caller. It is the default.
	ReturnError FailureMode = iota
	// FailOpen grants an acquired lease that consumed nothing
	// ([Lease.FailedOpen] reports true): the limit is not enforced while
	// Redis is unreachable. Counted in coordination.rate_limit.unavailable
	// with failure_mode=fail_open.
	FailOpen
	// FailClosed refuses with an unacquired lease without RetryAfter.
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

// Option configures a limiter.
type Option func(*options) error

type options struct {
	queueLimit int
	order      QueueOrder
	failure    FailureMode
}

// WithQueue gives the limiter a local queue for [Limiter.Wait]: up to limit
// permits (not requests) may wait in this process, served in order. A
// queued request sleeps until the server-computed retry time (concurrency
// limiters: until a lease is released here or announced on Redis Pub/Sub,
// or the earliest lease would expire), then tries again; it never polls on
// a fixed period. The queue is local: other processes, and [Limiter.Acquire]
// calls here, are not ordered with it.
//
// limit must be >= 0; order must be OldestFirst or NewestFirst. The default
// is no queue (limit 0): Wait then makes one attempt, like Acquire.
func WithQueue(limit int, order QueueOrder) Option {
	return func(o *options) error {
		if limit < 0 {
			return coordination.InvalidArgument("queue limit", "must be >= 0, got %d", limit)
		}
		if order != OldestFirst && order != NewestFirst {
			return coordination.InvalidArgument("queue order", "must be OldestFirst or NewestFirst, got %d", int(order))
		}
		o.queueLimit, o.order = limit, order
		return nil
	}
}

// WithFailureMode sets what the limiter answers when Redis cannot decide.
// The default is [ReturnError].
func WithFailureMode(m FailureMode) Option {
	return func(o *options) error {
		if m != ReturnError && m != FailOpen && m != FailClosed {
			return coordination.InvalidArgument("failure mode", "unknown mode %d", int(m))
		}
		o.failure = m
		return nil
	}
}
