package engine

import (
	"strconv"
	"time"
)

// Scripts of the rate limiters (package ratelimit), each next to its
// decoder. The reply shapes are documented in the .lua files.
var (
	// RateLimitDecide makes a decision of a fixed-window, sliding-window,
	// token-bucket, GCRA or composite limiter; RateLimitAdjust runs the
	// same script for a settlement or a refund (operations a, r, A, R).
	RateLimitDecide = NewScript("ratelimit_decide", decodeDecision)
	RateLimitAdjust = NewScript("ratelimit_decide", decodeAdjust)

	// The concurrency limiter's lease scripts follow the lease argument
	// convention (ARGV = member, TTL ms, limit, permits, strict for the
	// acquire; member, TTL ms for the renewal; member for the verify and
	// the release).
	RateLimitConcAcquire = NewScript("ratelimit_conc_acquire", decodeConcGrant)
	RateLimitConcRenew   = NewScript("ratelimit_conc_renew", Bool01)
	RateLimitConcVerify  = NewScript("ratelimit_conc_verify", Bool01)
	RateLimitConcRelease = NewScript("ratelimit_conc_release", decodeConcRelease)

	// RateLimitDenyRead reads and RateLimitDenyWrite changes a deny list's
	// membership.
	RateLimitDenyRead  = NewScript("ratelimit_deny_read", Bool01)
	RateLimitDenyWrite = NewScript("ratelimit_deny_write", Bool01)
)

// Decision is the decoded reply of a decision ([RateLimitDecide]).
type Decision struct {
	Acquired bool
	// Available is the number of permits free after the decision.
	Available int64
	// RetryIn is, for a refusal, the server-computed time until the same
	// request would be admitted (at least 1 µs); HasRetry is false when
	// there is none (an acquired request, or more permits than the limit).
	RetryIn  time.Duration
	HasRetry bool
}

// decodeDecision reads a grant (an integer >= 0: the permits available)
// or a refusal ({available >= 0, wait_us >= 1 or -1}).
func decodeDecision(v any) (Decision, bool) {
	if n, ok := v.(int64); ok {
		return Decision{Acquired: true, Available: n}, n >= 0
	}
	a, ok := v.([]any)
	if !ok || len(a) != 2 {
		return Decision{}, false
	}
	n, ok1 := a[0].(int64)
	w, ok2 := a[1].(int64)
	if !ok1 || !ok2 || n < 0 || (w < 1 && w != -1) {
		return Decision{}, false
	}
	d := Decision{Available: n}
	if w > 0 {
		d.RetryIn, d.HasRetry = Scaled(w, time.Microsecond), true
	}
	return d, true
}

// Adjustment is the decoded reply of a settlement or a refund
// ([RateLimitAdjust]): whether it was applied (a refund whose grant the
// key no longer remembers is not), and the permits available after it.
type Adjustment struct {
	Applied   bool
	Available int64
}

func decodeAdjust(v any) (Adjustment, bool) {
	a, ok := Ints(v, 2)
	if !ok || a[1] < 0 || (a[0] != 0 && a[0] != 1) {
		return Adjustment{}, false
	}
	return Adjustment{Applied: a[0] == 1, Available: a[1]}, true
}

// decisionInts reads {acquired, available, retry_ms}: acquired is 0 or 1,
// available >= 0, retry_ms -1 when acquired and >= -1 otherwise.
func decisionInts(v any) ([]int64, bool) {
	a, ok := Ints(v, 3)
	if !ok || a[1] < 0 {
		return nil, false
	}
	switch a[0] {
	case 1:
		return a, a[2] == -1
	case 0:
		return a, a[2] >= -1
	}
	return nil, false
}

// decodeConcGrant reads the concurrency acquire's {acquired, available,
// next_ms} as a Grant: RetryIn is the time until the earliest live lease
// expires (0 when none), Value the permits available as a decimal string
// (read it with [ConcAvailable]).
func decodeConcGrant(v any) (Grant, bool) {
	a, ok := decisionInts(v)
	if !ok {
		return Grant{}, false
	}
	return Grant{Acquired: a[0] == 1, RetryIn: RetryIn(a[2]), Value: strconv.FormatInt(a[1], 10)}, true
}

// ConcAvailable returns the permits available that a concurrency grant
// carries, or -1 for a grant that did not come from
// [RateLimitConcAcquire].
func ConcAvailable(g Grant) int64 {
	n, err := strconv.ParseInt(g.Value, 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// decodeConcRelease reads 1 (released) or 0 (already gone). A concurrency
// lease has no other owner: -1 is not a reply of this script.
func decodeConcRelease(v any) (Outcome, bool) {
	switch v {
	case int64(1):
		return Released, true
	case int64(0):
		return AlreadyReleased, true
	}
	return 0, false
}
