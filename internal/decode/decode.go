// Package decode holds the building blocks of the strict reply decoders
// every script and command of the library is declared with
// (func(reply any) (R, bool)): readers of reply shapes that report false
// for anything outside their shape, the decoded reply types shared by the
// lease scripts (Grant, Outcome), the conversions of server durations, and
// [Unexpected], the error of a reply no decoder recognises. It knows no
// primitive and no engine.
package decode

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/coordkit/coordination/internal/sentinel"
)

// Reply decoding helpers for decoders. Each reports false for anything
// outside its shape.

// asInt reads an integer reply.
func asInt(v any) (int64, bool) {
	n, ok := v.(int64)
	return n, ok
}

// Ints reads an array of exactly n integers.
func Ints(v any, n int) ([]int64, bool) {
	a, ok := v.([]any)
	if !ok || len(a) != n {
		return nil, false
	}
	out := make([]int64, n)
	for i, x := range a {
		if out[i], ok = x.(int64); !ok {
			return nil, false
		}
	}
	return out, true
}

// Array reads an array of exactly n elements.
func Array(v any, n int) ([]any, bool) {
	a, ok := v.([]any)
	return a, ok && len(a) == n
}

// Str reads a bulk-string reply.
func Str(v any) (string, bool) {
	s, ok := v.(string)
	return s, ok
}

// PositiveDecimal reads a positive int64 sent as a decimal string (a
// fencing token beyond 2^53).
func PositiveDecimal(v any) (int64, bool) {
	s, ok := v.(string)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n > 0
}

// Bool01 reads the integer reply 1 (true) or 0 (false).
func Bool01(v any) (bool, bool) {
	switch v {
	case int64(1):
		return true, true
	case int64(0):
		return false, true
	}
	return false, false
}

// VerifyNow returns the decoder of a verify reply that carries the server
// time: {1, remaining_ms, now} (live; remaining_ms >= 1, or -1 without
// expiry when noExpiry is set, for a kind that has such entries) or
// {0, 0, now} (gone). The semaphore and the read-write lease use it.
func VerifyNow(noExpiry bool) func(v any) (bool, bool) {
	return func(v any) (bool, bool) {
		a, ok := Ints(v, 3)
		if !ok || a[2] <= 0 {
			return false, false
		}
		switch {
		case a[0] == 1 && (a[1] >= 1 || (noExpiry && a[1] == -1)):
			return true, true
		case a[0] == 0 && a[1] == 0:
			return false, true
		}
		return false, false
	}
}

// Outcome is what an owner-checked release found. Its values equal those
// of coordination.ReleaseOutcome.
type Outcome int

// The release outcomes.
const (
	unknownOutcome Outcome = iota // returned with an error
	Released
	AlreadyReleased
	NotOwned
)

// Release reads the release reply 1 (released), 0 (already released)
// or -1 (held by another owner).
func Release(v any) (Outcome, bool) {
	switch v {
	case int64(1):
		return Released, true
	case int64(0):
		return AlreadyReleased, true
	case int64(-1):
		return NotOwned, true
	}
	return unknownOutcome, false
}

// SoleRelease reads the release reply of a lease that belongs to its
// holder alone (a semaphore permit, a concurrency lease: there is no other
// owner, so no NotOwned): 1 (released) or 0 (already released).
func SoleRelease(v any) (Outcome, bool) {
	if v == int64(-1) {
		return unknownOutcome, false
	}
	return Release(v)
}

// Grant is the decoded reply of an acquire script: acquired, or the time
// until the holder's expiry as the server reported it; Value carries what
// the primitive hands out with the lease (a fencing token).
type Grant struct {
	Acquired bool
	RetryIn  time.Duration // 0: unknown (no expiry)
	Value    string
	// Again, on a refusal of a kind's First command, says that what it
	// found only the Acquire script can decide (a tombstone a cleanup left,
	// which the script takes over): the engine sends the script at once,
	// in the same attempt.
	Again bool
}

// RetryIn converts a PTTL-like reply in milliseconds into a wait: 0 for no
// expiry (-1) or gone (-2), at least 1 ms otherwise.
func RetryIn(ms int64) time.Duration {
	switch {
	case ms < 0:
		return 0
	case ms == 0:
		return time.Millisecond
	default:
		return Scaled(ms, time.Millisecond)
	}
}

// Unexpected returns an error wrapping [sentinel.ErrBadState] for a script reply
// whose shape or code the client does not understand. It describes the
// reply's shape only, never its contents, which may be large or secret.
func Unexpected(script string, reply any) error {
	return fmt.Errorf("%w: unexpected reply from %s: %s", sentinel.ErrBadState, script, shapeOf(reply))
}

func shapeOf(v any) string {
	switch r := v.(type) {
	case []any:
		parts := make([]string, 0, min(len(r), 8))
		for i, x := range r {
			if i == 8 {
				parts = append(parts, "...")
				break
			}
			parts = append(parts, shapeOf(x))
		}
		return fmt.Sprintf("array of %d [%s]", len(r), strings.Join(parts, ", "))
	case string:
		return fmt.Sprintf("string of %d bytes", len(r))
	case int64:
		return "integer"
	case nil:
		return "nil"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// Scaled returns n units as a Duration, saturating at the largest
// Duration (about 292 years) instead of overflowing into a negative one:
// a reply of the server (a PTTL, a wait in µs) may exceed what a Duration
// holds. n must not be negative.
func Scaled(n int64, unit time.Duration) time.Duration {
	if n > math.MaxInt64/int64(unit) {
		return math.MaxInt64
	}
	return time.Duration(n) * unit
}

// maxMillis is the largest millisecond count a time.Duration holds.
const maxMillis = int64(math.MaxInt64 / time.Millisecond)
