package engine

// Scripts of the counting semaphore (package semaphore), each next to its
// decoder. A permit is identified by its sorted-set member
// "P:<n>:<token>" (its id in the lease argument convention); the layout is
// documented in semaphore_acquire.lua.
var (
	SemaphoreAcquire = NewScript("semaphore_acquire", decodeSemaphoreGrant)
	SemaphoreRefresh = NewScript("semaphore_refresh", Bool01)
	SemaphoreVerify  = NewScript("semaphore_verify", VerifyNow(true))
	SemaphoreRelease = NewScript("semaphore_release", decodeSemaphoreRelease)
	SemaphoreRead    = NewScript("semaphore_read", decodeSemaphoreRead)
)

// decodeSemaphoreGrant reads 0 (acquired) or retry_ms (too few permits
// free: >= 1 until the earliest live permit expires, -1 when none does).
func decodeSemaphoreGrant(v any) (Grant, bool) {
	r, ok := v.(int64)
	switch {
	case !ok || r < -1:
		return Grant{}, false
	case r == 0:
		return Grant{Acquired: true}, true
	}
	return Grant{RetryIn: RetryIn(r)}, true
}

// decodeSemaphoreRelease reads 1 (released) or 0 (already gone). A permit
// belongs to its holder alone: there is no NotOwned.
func decodeSemaphoreRelease(v any) (Outcome, bool) {
	switch v {
	case int64(1):
		return Released, true
	case int64(0):
		return AlreadyReleased, true
	}
	return 0, false
}

// SemaphoreState is the decoded reply of semaphore_read.
type SemaphoreState struct {
	Capacity int64 // the recorded capacity; 0 when the key does not exist
	Used     int64 // permits held by live holders
	Holders  int64 // live holders
	NoExpiry int64 // live holders without expiry
}

// decodeSemaphoreRead reads {capacity, used, holders, no_expiry, now}.
func decodeSemaphoreRead(v any) (SemaphoreState, bool) {
	a, ok := Ints(v, 5)
	if !ok || a[4] <= 0 {
		return SemaphoreState{}, false
	}
	s := SemaphoreState{Capacity: a[0], Used: a[1], Holders: a[2], NoExpiry: a[3]}
	switch {
	case s.Capacity < 0, s.NoExpiry < 0, s.NoExpiry > s.Holders, s.Holders > s.Used:
		return SemaphoreState{}, false
	case s.Capacity == 0 && s.Used != 0:
		return SemaphoreState{}, false
	}
	return s, true
}
