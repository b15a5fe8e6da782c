package engine

// Scripts of the read-write leases (package rwlease), each next to its
// decoder. A lease is identified by its sorted-set member, "R:<token>" or
// "W:<token>" (its id in the lease argument convention); the layout is
// documented in rwlease_read.lua. Every reply also carries the server time
// the script ran at, which the decoders check and drop.
var (
	RWLeaseRead    = NewScript("rwlease_read", decodeRWLeaseGrant)
	RWLeaseWrite   = NewScript("rwlease_write", decodeRWLeaseGrant)
	RWLeaseRefresh = NewScript("rwlease_refresh", decodeRefreshNow)
	RWLeaseVerify  = NewScript("rwlease_verify", decodeRWLeaseVerify)
	RWLeaseRelease = NewScript("rwlease_release", decodeReleaseNow)
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

// decodeRWLeaseVerify reads {1, remaining_ms, now} (live; remaining_ms >=
// 1) or {0, 0, now} (gone).
func decodeRWLeaseVerify(v any) (bool, bool) {
	a, ok := Ints(v, 3)
	if !ok || a[2] <= 0 {
		return false, false
	}
	switch {
	case a[0] == 1 && a[1] >= 1:
		return true, true
	case a[0] == 0 && a[1] == 0:
		return false, true
	}
	return false, false
}
