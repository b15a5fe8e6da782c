// Package sentinel holds the library's shared sentinel errors, the
// registry of sentinels that are answers rather than failures, and
// [LostError], the cause of a lost lease. Package coordination re-exports
// each sentinel under the same name (the same values, so errors.Is matches
// either); the engine, the argument checks and the primitives wrap them
// with context. It imports nothing of the library.
package sentinel

import (
	"errors"
	"sync"
)

// The shared sentinel errors. Package coordination re-exports each one under
// the same name; primitives return them wrapped with context.
var (
	ErrNotAcquired       = errors.New("coordination: not acquired")
	ErrNotHeld           = errors.New("coordination: not held")
	ErrLost              = errors.New("coordination: lease lost")
	ErrReleased          = errors.New("coordination: released")
	ErrUnsupportedServer = errors.New("coordination: unsupported server")
	ErrInvalidArgument   = errors.New("coordination: invalid argument")
	ErrBadState          = errors.New("coordination: key holds unexpected state")
	ErrConfigMismatch    = errors.New("coordination: configuration mismatch")
	ErrClosed            = errors.New("coordination: closed")
	ErrNotReplicated     = errors.New("coordination: not acknowledged by enough replicas")
)

// answers are the errors that are definite answers rather than failures:
// the operation reached Redis and the answer was "no" (a contended lock, a
// latch that already exists, no leader). Hooks learn such an operation as
// Succeeded; see the engine's outcomeOf. Packages register theirs with
// [RegisterAnswers] at initialisation.
var (
	answersMu sync.RWMutex
	answers   = []error{ErrNotAcquired}
)

// RegisterAnswers records sentinel errors (made with errors.New by the
// package that exports them) as answers. Call it from a package's init.
func RegisterAnswers(errs ...error) {
	answersMu.Lock()
	answers = append(answers, errs...)
	answersMu.Unlock()
}

// IsAnswer reports whether err is or wraps a registered answer.
func IsAnswer(err error) bool {
	if err == nil {
		return false
	}
	answersMu.RLock()
	defer answersMu.RUnlock()
	for _, a := range answers {
		if errors.Is(err, a) {
			return true
		}
	}
	return false
}

// LostError is the cause of a handle's context when its lease was lost. It
// matches [ErrLost]; Err is the error of the renewal that failed, when a
// failure (rather than an answer or the local deadline) ended the lease.
type LostError struct {
	Reason string
	Err    error
}

// Error returns "coordination: lease lost: REASON[: ERR]".
func (e *LostError) Error() string {
	s := ErrLost.Error() + ": " + e.Reason
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns ErrLost and the renewal's error.
func (e *LostError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrLost}
	}
	return []error{ErrLost, e.Err}
}
