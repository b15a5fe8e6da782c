package lua

// Scripts of the counting semaphore (package semaphore). The key layout is
// described in semaphore_acquire.lua.
var (
	SemaphoreAcquire = mustLoad("semaphore_acquire")
	SemaphoreRelease = mustLoad("semaphore_release")
	SemaphoreRefresh = mustLoad("semaphore_refresh")
	SemaphoreVerify  = mustLoad("semaphore_verify")
	SemaphoreRead    = mustLoad("semaphore_read")
)
