package engine

// Scripts of the owner-token lock (package lock), each next to its
// decoder. The reply shapes are documented in the .lua files.
var (
	LockAcquire = NewScript("lock_acquire", decodeGrant)
	LockRefresh = NewScript("lock_refresh", Bool01)
	LockVerify  = NewScript("lock_verify", Bool01)
	LockRelease = NewScript("lock_release", ReleaseReply)
)

// decodeGrant reads {1, ttl} (acquired) or {0, pttl} (held by another).
func decodeGrant(v any) (Grant, bool) {
	a, ok := Ints(v, 2)
	if !ok {
		return Grant{}, false
	}
	switch a[0] {
	case 1:
		return Grant{Acquired: true}, true
	case 0:
		return Grant{RetryIn: RetryIn(a[1])}, true
	}
	return Grant{}, false
}
