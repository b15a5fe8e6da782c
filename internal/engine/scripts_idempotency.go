package engine

import (
	"math"
	"time"
)

// Scripts of the idempotency store (package idempotency), each next to its
// decoder. The reply shapes are documented in the .lua files.
var (
	IdempotencyBegin    = NewScript("idempotency_begin", decodeIdempotencyBegin)
	IdempotencyComplete = NewScript("idempotency_complete", Bool01)
	IdempotencyAbandon  = NewScript("idempotency_abandon", Bool01)
	IdempotencyRenew    = NewScript("idempotency_renew", Bool01)

	// IdempotencyClaim is the lease kind of a pending claim kept alive
	// while its work runs (idempotency's Do and middleware): a handle
	// adopted with [Engine.Adopt] after Begin started the claim, renewed
	// by IdempotencyRenew, ended with [Handle.Forget] once the claim is
	// completed or abandoned. Renewals are not admitted.
	IdempotencyClaim = &LeaseKind{
		Primitive: "idempotency",
		Refresh:   IdempotencyRenew,
		Metrics:   IdempotencyClaimMetrics,
	}
)

// ClaimState is what idempotency_begin found at a key. Its values equal
// those of idempotency.State.
type ClaimState int

// The claim states.
const (
	ClaimStarted ClaimState = iota + 1
	ClaimCompleted
	ClaimInProgress
	ClaimFingerprintMismatch
)

// ClaimReply is the decoded reply of idempotency_begin: the state, and the
// fields of that state only.
type ClaimReply struct {
	State     ClaimState
	Fence     int64         // ClaimStarted: the claim's fencing token (>= 3)
	Result    string        // ClaimCompleted: the stored result bytes
	Remaining time.Duration // ClaimInProgress: the claim's PTTL (>= 0)
}

// decodeIdempotencyBegin reads -fence <= -3 (started), a string (completed: the
// result), an integer >= 0 (in progress: the claim's PTTL in ms) or -2
// (fingerprint mismatch); anything else (a PTTL beyond a time.Duration) is
// unrecognised.
// maxMillis is the largest millisecond count a time.Duration holds.
const maxMillis = int64(math.MaxInt64 / time.Millisecond)

func decodeIdempotencyBegin(v any) (ClaimReply, bool) {
	switch r := v.(type) {
	case string:
		return ClaimReply{State: ClaimCompleted, Result: r}, true
	case int64:
		switch {
		case r <= -3 && r != math.MinInt64: // -MinInt64 overflows
			return ClaimReply{State: ClaimStarted, Fence: -r}, true
		case r == -2:
			return ClaimReply{State: ClaimFingerprintMismatch}, true
		case r >= 0 && r <= maxMillis:
			return ClaimReply{State: ClaimInProgress, Remaining: time.Duration(r) * time.Millisecond}, true
		}
	}
	return ClaimReply{}, false
}
