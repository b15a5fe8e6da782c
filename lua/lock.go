package lua

// Scripts of the owner-token lock (package lock).
var (
	LockAcquire = mustLoad("lock_acquire")
	LockRefresh = mustLoad("lock_refresh")
	LockVerify  = mustLoad("lock_verify")
	LockRelease = mustLoad("lock_release")
)
