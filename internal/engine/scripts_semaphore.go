package engine

// Scripts of the counting semaphore (package semaphore), each next to its
// decoder. A permit is identified by its sorted-set member
// "P:<n>:<token>" (its id in the lease argument convention); the layout is
// documented in semaphore_acquire.lua. Every reply also carries the server
// time the script ran at, which the decoders check and drop.
var (
	SemaphoreAcquire = NewScript("semaphore_acquire", grantNow(true))
	SemaphoreRefresh = NewScript("semaphore_refresh", decodeRefreshNow)
	SemaphoreVerify  = NewScript("semaphore_verify", verifyNow(true))
	SemaphoreRelease = NewScript("semaphore_release", decodeReleaseNow)
	SemaphoreRead    = NewScript("semaphore_read", decodeSemaphoreRead)
)

// grantNow returns the decoder of an acquire reply that carries the
// server time: {1, 0, now} (acquired) or {0, retry_ms, now} (refused;
// retry_ms >= 1 until the entry in the way expires, or, for a kind with
// entries without expiry, -1 when none of them expires). The semaphore
// and the read-write lease use it.
func grantNow(noExpiry bool) func(v any) (Grant, bool) {
	return func(v any) (Grant, bool) {
		a, ok := Ints(v, 3)
		if !ok || a[2] <= 0 {
			return Grant{}, false
		}
		switch {
		case a[0] == 1 && a[1] == 0:
			return Grant{Acquired: true}, true
		case a[0] == 0 && (a[1] >= 1 || (noExpiry && a[1] == -1)):
			return Grant{RetryIn: RetryIn(a[1])}, true
		}
		return Grant{}, false
	}
}

// decodeRefreshNow reads {1, now} (refreshed) or {0, now} (gone): the
// refresh reply of the semaphore and the read-write lease.
func decodeRefreshNow(v any) (bool, bool) {
	a, ok := Ints(v, 2)
	if !ok || a[1] <= 0 {
		return false, false
	}
	return Bool01(a[0])
}

// verifyNow returns the decoder of a verify reply that carries the server
// time: {1, remaining_ms, now} (live; remaining_ms >= 1, or -1 without
// expiry for a kind that has such entries) or {0, 0, now} (gone). The
// semaphore and the read-write lease use it.
func verifyNow(noExpiry bool) func(v any) (bool, bool) {
	return func(v any) (bool, bool) {
		a, ok := Ints(v, 3)
		if !ok || a[2] <= 0 {
			return false, false
		}
		switch {
		case a[0] == 1 && (a[1] >= 1 || (noExpiry && a[1] == -1)):
			return true, true
		case a[0] == 0 && a[1] == 0:
			return false, true
		}
		return false, false
	}
}

// decodeReleaseNow reads {1, now} (released) or {0, now} (already
// gone): the release reply of the semaphore and the read-write lease,
// whose entries belong to their holder alone (there is no NotOwned).
func decodeReleaseNow(v any) (Outcome, bool) {
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
