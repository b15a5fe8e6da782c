package semaphore

import (
	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/instrument"
)

// The semaphore's scripts, each next to its decoder, and its instruments.
// A permit is identified by its sorted-set member "P:<n>:<token>" (its id
// in the lease argument convention); the layout is documented in
// semaphore_acquire.lua.
var (
	acquireScript = engine.NewScript("semaphore_acquire", decodeGrant)
	refreshScript = engine.NewScript("semaphore_refresh", decode.Bool01)
	verifyScript  = engine.NewScript("semaphore_verify", decode.VerifyNow(true))
	releaseScript = engine.NewScript("semaphore_release", decode.SoleRelease)
	// abandonScript is the cleanup of an ambiguous acquisition: the
	// permits given back and a tombstone of the member left, which the
	// acquisition's late request cannot pass (engine.LeaseKind.Abandon).
	abandonScript = engine.NewScript("semaphore_abandon", decode.SoleRelease)
	readScript    = engine.NewScript("semaphore_read", decodeRead)
	// configureScript sets the capacity in the key, drains or resumes; its
	// reply is read as an acquisition's (0: done; a drain's retry time).
	configureScript = engine.NewScript("semaphore_configure", decodeGrant)

	// leaseMetrics are the permits' instruments (coordination.semaphore.*),
	// recorded by the engine's lease handles.
	leaseMetrics = instrument.NewLease("semaphore", "semaphore permit", "",
		"Semaphore acquisitions (TryAcquire, Acquire and their N forms) that found too few free permits, counted once per call.")
)

// decodeGrant reads 0 (acquired), retry_ms (too few permits free: >= 1
// until the earliest live permit expires, -1 when none does) or -3
// (refused while draining: no retry time, Value [draining]).
func decodeGrant(v any) (decode.Grant, bool) {
	r, ok := v.(int64)
	switch {
	case ok && r == -3:
		return decode.Grant{Value: draining}, true
	case !ok || r < -1:
		return decode.Grant{}, false
	case r == 0:
		return decode.Grant{Acquired: true}, true
	}
	return decode.Grant{RetryIn: decode.RetryIn(r)}, true
}

// draining is the Value of a refusal while the semaphore drains.
const draining = "draining"

// readReply is the decoded reply of semaphore_read.
type readReply struct {
	Capacity int64 // the recorded capacity; 0 when the key does not exist
	Used     int64 // permits held by live holders
	Holders  int64 // live holders
	NoExpiry int64 // live holders without expiry
	Mode     int64 // 0: no "mode" record; 1: the capacity set in the key; 2: draining too
}

// decodeRead reads {capacity, used, holders, no_expiry, now, mode}.
func decodeRead(v any) (readReply, bool) {
	a, ok := decode.Ints(v, 6)
	if !ok || a[4] <= 0 {
		return readReply{}, false
	}
	s := readReply{Capacity: a[0], Used: a[1], Holders: a[2], NoExpiry: a[3], Mode: a[5]}
	switch {
	case s.Capacity < 0, s.NoExpiry < 0, s.NoExpiry > s.Holders, s.Holders > s.Used, s.Mode < 0, s.Mode > 2:
		return readReply{}, false
	case s.Capacity == 0 && (s.Used != 0 || s.Mode != 0):
		return readReply{}, false
	}
	return s, true
}
