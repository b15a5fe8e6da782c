package hooks

import (
	"context"
	"fmt"
)

// Outcome is how an admitted operation ended. It is reported exactly once,
// through the [Done] function returned by [Hook.Admit].
type Outcome int

const (
	// Succeeded means the operation reached Redis and got a definite answer.
	// A contended acquire, a rejected rate-limit request and a refresh that
	// found the lease gone are all Succeeded: the operation worked and the
	// answer was "no".
	Succeeded Outcome = iota + 1
	// Canceled means the caller's context ended (cancelled or past its
	// deadline) before the operation got a definite answer.
	Canceled
	// Failed means the operation ended with an error: a Redis error, a
	// network error, an invalid argument found after admission, or a
	// corrupt key.
	Failed
)

// String returns "succeeded", "canceled" or "failed".
func (o Outcome) String() string {
	switch o {
	case Succeeded:
		return "succeeded"
	case Canceled:
		return "canceled"
	case Failed:
		return "failed"
	default:
		return fmt.Sprintf("Outcome(%d)", int(o))
	}
}

// Operation names one public operation of one primitive. It carries no key,
// owner token, identity or endpoint: hooks see what is being done, never on
// what or for whom (keys and tokens can be secrets or personal data).
type Operation struct {
	// Name is the stable upper-case operation name, one of the constants
	// listed in the package documentation, e.g. "LOCK ACQUIRE".
	Name string
	// Primitive is the lower-case primitive kind: "lock", "fencing",
	// "rwlease", "semaphore", "latch", "leader", "idempotency",
	// "rate_limit", "redlock".
	Primitive string
}

// Done reports the outcome of an admitted operation. err is the error the
// operation returned to its caller (nil when Succeeded). Done is called
// exactly once per successful admission.
type Done func(outcome Outcome, err error)

// Hook admits each public operation before any Redis work and learns its
// outcome once.
//
// Contract:
//   - Admit is called before anything is sent to Redis. Returning a non-nil
//     error rejects the operation: the caller gets that error (wrapped) and
//     nothing reaches Redis. When Admit returns an error, its Done is not
//     called.
//   - On success Admit returns the context the operation runs with (return
//     ctx itself when there is nothing to add) and a Done that will be
//     called once with the outcome. Done may be nil.
//   - Internal retries, queued waits and background cleanup are not admitted
//     again: a blocking Acquire that waits through ten contended attempts is
//     one admission and one outcome.
//   - Admit and Done may be called from many goroutines at once and must be
//     safe for that; they must not panic and should return quickly.
type Hook interface {
	Admit(ctx context.Context, op Operation) (context.Context, Done, error)
}

// Func adapts an ordinary function to the [Hook] interface.
type Func func(ctx context.Context, op Operation) (context.Context, Done, error)

// Admit calls f(ctx, op).
func (f Func) Admit(ctx context.Context, op Operation) (context.Context, Done, error) {
	return f(ctx, op)
}

// Chain is an ordered list of hooks that acts as one hook. Admit asks each
// hook in order; the first rejection stops the chain, and the hooks already
// admitted learn the outcome Failed with the rejecting error (in reverse
// order). On success the returned Done reports to every hook in reverse
// order of admission. A nil or empty Chain admits everything.
//
// A Chain is safe for concurrent use if its hooks are; do not modify it
// after it has been handed to a coordinator.
type Chain []Hook

var _ Hook = Chain(nil)

// Admit implements [Hook].
func (c Chain) Admit(ctx context.Context, op Operation) (context.Context, Done, error) {
	switch len(c) {
	case 0:
		return ctx, nil, nil
	case 1:
		if c[0] == nil {
			return ctx, nil, nil
		}
		next, done, err := c[0].Admit(ctx, op)
		if next == nil {
			next = ctx
		}
		return next, done, err
	}
	dones := make([]Done, 0, len(c))
	for _, h := range c {
		if h == nil {
			continue
		}
		next, done, err := h.Admit(ctx, op)
		if err != nil {
			for i := len(dones) - 1; i >= 0; i-- {
				dones[i](Failed, err)
			}
			return ctx, nil, err
		}
		if next != nil {
			ctx = next
		}
		if done != nil {
			dones = append(dones, done)
		}
	}
	if len(dones) == 0 {
		return ctx, nil, nil
	}
	return ctx, func(o Outcome, err error) {
		for i := len(dones) - 1; i >= 0; i-- {
			dones[i](o, err)
		}
	}, nil
}
