package engine

import (
	"strconv"
	"time"
)

// Scripts of the rate limiters (package ratelimit), each next to its
// decoder. The reply shapes are documented in the .lua files.
var (
	RateLimitFixed   = NewScript("ratelimit_fixed", decodeDecision)
	RateLimitSliding = NewScript("ratelimit_sliding", decodeDecision)
	RateLimitBucket  = NewScript("ratelimit_bucket", decodeDecision)
	RateLimitGCRA    = NewScript("ratelimit_gcra", decodeDecision)

	// The concurrency limiter's lease scripts follow the lease argument
	// convention (ARGV = member, TTL ms, limit, permits for the acquire;
	// member, TTL ms for the renewal; member for the release).
	RateLimitConcAcquire = NewScript("ratelimit_conc_acquire", decodeConcGrant)
	RateLimitConcRenew   = NewScript("ratelimit_conc_renew", Bool01)
	RateLimitConcRelease = NewScript("ratelimit_conc_release", decodeConcRelease)
)

// Decision is the decoded reply of a fixed-window, sliding-window,
// token-bucket or GCRA script.
type Decision struct {
	Acquired bool
	// Available is the number of permits free after the decision.
	Available int64
	// RetryIn is, for a refusal, the server-computed time until the same
	// request would be admitted (at least 1 ms); HasRetry is false when
	// there is none (an acquired request, or more permits than the limit).
	RetryIn  time.Duration
	HasRetry bool
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

func decodeDecision(v any) (Decision, bool) {
	a, ok := decisionInts(v)
	if !ok {
		return Decision{}, false
	}
	d := Decision{Acquired: a[0] == 1, Available: a[1]}
	if !d.Acquired && a[2] >= 0 {
		d.RetryIn, d.HasRetry = max(time.Duration(a[2])*time.Millisecond, time.Millisecond), true
	}
	return d, true
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
