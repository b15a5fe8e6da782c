package engine

import "time"

// Scripts of the fencing-token lock (package fencing, and leader election
// through internal/fencelock), each next to its decoder.
var (
	FencingAcquire    = NewScript("fencing_acquire", decodeFencedGrant)
	FencingRefresh    = NewScript("fencing_refresh", Bool01)
	FencingVerify     = NewScript("fencing_verify", Bool01)
	FencingRelease    = NewScript("fencing_release", ReleaseReply)
	FencingGuardedSet = NewScript("fencing_guarded_set", decodeGuardedSet)
	FencingGuardedGet = NewScript("fencing_guarded_get", decodeGuardedGet)
	FencingRead       = NewScript("fencing_read", decodeFencingRead)
)

// decodeFencedGrant reads a string, the fence (acquired; a positive
// decimal), or an integer, the holder's PTTL (held by another; -1 when it
// has no TTL).
func decodeFencedGrant(v any) (Grant, bool) {
	switch r := v.(type) {
	case string:
		_, ok := PositiveDecimal(r)
		return Grant{Acquired: true, Value: r}, ok
	case int64:
		return Grant{RetryIn: RetryIn(r)}, r >= -1
	}
	return Grant{}, false
}

// GuardedWrite is the decoded reply of fencing_guarded_set.
type GuardedWrite struct {
	Accepted bool
	Current  int64 // the token the resource holds after the call
}

func decodeGuardedSet(v any) (GuardedWrite, bool) {
	a, ok := Array(v, 2)
	if !ok {
		return GuardedWrite{}, false
	}
	cur, ok := PositiveDecimal(a[1])
	if !ok {
		return GuardedWrite{}, false
	}
	switch a[0] {
	case int64(1):
		return GuardedWrite{Accepted: true, Current: cur}, true
	case int64(0):
		return GuardedWrite{Current: cur}, true
	}
	return GuardedWrite{}, false
}

// GuardedValue is the decoded reply of fencing_guarded_get.
type GuardedValue struct {
	Found bool
	Token int64
	Value string
}

func decodeGuardedGet(v any) (GuardedValue, bool) {
	if v == nil {
		return GuardedValue{}, true
	}
	a, ok := Array(v, 2)
	if !ok {
		return GuardedValue{}, false
	}
	tok, ok1 := PositiveDecimal(a[0])
	val, ok2 := a[1].(string)
	return GuardedValue{Found: true, Token: tok, Value: val}, ok1 && ok2
}

// FencedHolder is the decoded reply of fencing_read: who holds a
// fencing-token lease.
type FencedHolder struct {
	Held   bool
	Fence  int64
	Holder string
	TTL    time.Duration // 0 when the lease has no expiry
}

func decodeFencingRead(v any) (FencedHolder, bool) {
	if v == nil {
		return FencedHolder{}, true
	}
	a, ok := Array(v, 3)
	if !ok {
		return FencedHolder{}, false
	}
	fence, ok1 := PositiveDecimal(a[0])
	holder, ok2 := a[1].(string)
	pttl, ok3 := a[2].(int64)
	if !ok1 || !ok2 || !ok3 || pttl > maxMillis {
		return FencedHolder{}, false
	}
	h := FencedHolder{Held: true, Fence: fence, Holder: holder}
	if pttl > 0 {
		h.TTL = time.Duration(pttl) * time.Millisecond
	}
	return h, true
}
