package engine

// Scripts of the read-write leases (package rwlease). A lease is
// identified by its sorted-set member, "R:<token>" or "W:<token>" (its id
// in the lease argument convention); the layout is documented in
// rwlease_acquire.lua. Every reply also carries the server time the script
// ran at, which the decoders check and drop; they are the semaphore's
// (scripts_semaphore.go), without the replies for entries that never
// expire.
var (
	RWLeaseAcquire = NewScript("rwlease_acquire", grantNow(false))
	RWLeaseRefresh = NewScript("rwlease_refresh", decodeRefreshNow)
	RWLeaseVerify  = NewScript("rwlease_verify", verifyNow(false))
	RWLeaseRelease = NewScript("rwlease_release", decodeReleaseNow)
)
