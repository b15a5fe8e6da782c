package fencing

import (
	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
)

// The scripts of the guarded resource, each next to its decoder (the
// lock's are in internal/fencingcore, which leader and redlock run too).
// The layout is documented in fencing_guarded_set.lua.
var (
	// guardedSet is sent at most once (Once): a re-send that found a newer
	// token could not tell whether its first send had written, and would
	// report a rejection for a write that took place.
	guardedSet = engine.NewScript("fencing_guarded_set", decodeGuardedSet).Once()
	guardedGet = engine.NewScript("fencing_guarded_get", decodeGuardedGet)
)

// guardedWrite is the decoded reply of fencing_guarded_set.
type guardedWrite struct {
	Accepted bool
	Current  int64 // the token the resource holds after the call
}

func decodeGuardedSet(v any) (guardedWrite, bool) {
	a, ok := decode.Array(v, 2)
	if !ok {
		return guardedWrite{}, false
	}
	cur, ok := decode.PositiveDecimal(a[1])
	if !ok {
		return guardedWrite{}, false
	}
	switch a[0] {
	case int64(1):
		return guardedWrite{Accepted: true, Current: cur}, true
	case int64(0):
		return guardedWrite{Current: cur}, true
	}
	return guardedWrite{}, false
}

// guardedValue is the decoded reply of fencing_guarded_get.
type guardedValue struct {
	Found bool
	Token int64
	Value string
}

func decodeGuardedGet(v any) (guardedValue, bool) {
	if v == nil {
		return guardedValue{}, true
	}
	a, ok := decode.Array(v, 2)
	if !ok {
		return guardedValue{}, false
	}
	tok, ok1 := decode.PositiveDecimal(a[0])
	val, ok2 := a[1].(string)
	return guardedValue{Found: true, Token: tok, Value: val}, ok1 && ok2
}
