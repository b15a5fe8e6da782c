package lua

// Scripts of the fencing-token lock (package fencing).
var (
	FencingAcquire    = mustLoad("fencing_acquire")
	FencingRefresh    = mustLoad("fencing_refresh")
	FencingVerify     = mustLoad("fencing_verify")
	FencingRelease    = mustLoad("fencing_release")
	FencingGuardedSet = mustLoad("fencing_guarded_set")
	FencingGuardedGet = mustLoad("fencing_guarded_get")
)
