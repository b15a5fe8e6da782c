package lua

// Scripts of the rate limiters (package ratelimit). Each touches one key.
var (
	RateLimitFixed       = mustLoad("ratelimit_fixed")
	RateLimitSliding     = mustLoad("ratelimit_sliding")
	RateLimitBucket      = mustLoad("ratelimit_bucket")
	RateLimitGCRA        = mustLoad("ratelimit_gcra")
	RateLimitConcAcquire = mustLoad("ratelimit_conc_acquire")
	RateLimitConcRenew   = mustLoad("ratelimit_conc_renew")
	RateLimitConcRelease = mustLoad("ratelimit_conc_release")
)
