package engine

// Scripts of the read-write leases (package rwlease), each next to its
// decoder. A lease is identified by its sorted-set member, "R:<token>" or
// "W:<token>" (its id in the lease argument convention); the layout is
// documented in rwlease_acquire.lua. Every reply also carries the server
// time the script ran at, which the decoders check and drop (the
// linearizability check reads it). The verify reply has the semaphore's
// shape and decoder ([VerifyNow]).
var (
	RWLeaseAcquire = NewScript("rwlease_acquire", decodeRWLeaseGrant)
	RWLeaseRefresh = NewScript("rwlease_refresh", decodeRWLeaseRefresh)
	RWLeaseVerify  = NewScript("rwlease_verify", VerifyNow(false))
	RWLeaseRelease = NewScript("rwlease_release", decodeRWLeaseRelease)
)

// decodeRWLeaseGrant reads {1, 0, now} (acquired) or {0, retry_ms, now}
// (refused; retry_ms >= 1 until the entry in the way expires).
func decodeRWLeaseGrant(v any) (Grant, bool) {
	a, ok := Ints(v, 3)
	if !ok || a[2] <= 0 {
		return Grant{}, false
	}
	switch {
	case a[0] == 1 && a[1] == 0:
		return Grant{Acquired: true}, true
	case a[0] == 0 && a[1] >= 1:
		return Grant{RetryIn: RetryIn(a[1])}, true
	}
	return Grant{}, false
}

// decodeRWLeaseRefresh reads {1, now} (refreshed) or {0, now} (gone).
func decodeRWLeaseRefresh(v any) (bool, bool) {
	a, ok := Ints(v, 2)
	if !ok || a[1] <= 0 {
		return false, false
	}
	return Bool01(a[0])
}

// decodeRWLeaseRelease reads {1, now} (released) or {0, now} (already
// gone). An entry belongs to its holder alone: there is no NotOwned.
func decodeRWLeaseRelease(v any) (Outcome, bool) {
	a, ok := Ints(v, 2)
	if !ok || a[1] <= 0 {
		return 0, false
	}
	switch a[0] {
	case 1:
		return Released, true
	case 0:
		return AlreadyReleased, true
	}
	return 0, false
}
