package engine

import "time"

// Scripts of the idempotency store (package idempotency), each next to its
// decoder. The reply shapes are documented in the .lua files.
var (
	IdempotencyBegin    = NewScript("idempotency_begin", decodeIdempotencyBegin)
	IdempotencyComplete = NewScript("idempotency_complete", Bool01)
	IdempotencyAbandon  = NewScript("idempotency_abandon", Bool01)
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
	Result    string        // ClaimCompleted: the stored result bytes
	Remaining time.Duration // ClaimInProgress: the claim's PTTL (>= 0)
}

// decodeIdempotencyBegin reads {1} (started), {2, result} (completed),
// {3, pttl_ms} (in progress, pttl_ms >= 0) or {4} (fingerprint mismatch);
// anything else is unrecognised.
func decodeIdempotencyBegin(v any) (ClaimReply, bool) {
	a, ok := v.([]any)
	if !ok || len(a) == 0 {
		return ClaimReply{}, false
	}
	switch {
	case a[0] == int64(1) && len(a) == 1:
		return ClaimReply{State: ClaimStarted}, true
	case a[0] == int64(2) && len(a) == 2:
		res, ok := a[1].(string)
		return ClaimReply{State: ClaimCompleted, Result: res}, ok
	case a[0] == int64(3) && len(a) == 2:
		pttl, ok := a[1].(int64)
		if !ok || pttl < 0 {
			return ClaimReply{}, false
		}
		return ClaimReply{State: ClaimInProgress, Remaining: time.Duration(pttl) * time.Millisecond}, true
	case a[0] == int64(4) && len(a) == 1:
		return ClaimReply{State: ClaimFingerprintMismatch}, true
	}
	return ClaimReply{}, false
}
