package lua

// Scripts of the rate limiters (package ratelimit). Each touches one key and
// returns {acquired, available, retry_ms} for a decision; see each file's
// header for its KEYS, ARGV and errors.
var (
	// RateLimitFixed takes permits from a fixed-window counter.
	RateLimitFixed = mustLoad("ratelimit_fixed")
	// RateLimitSliding takes permits from a segmented sliding window.
	RateLimitSliding = mustLoad("ratelimit_sliding")
	// RateLimitBucket takes tokens from a token bucket.
	RateLimitBucket = mustLoad("ratelimit_bucket")
	// RateLimitGCRA takes permits with the Generic Cell Rate Algorithm.
	RateLimitGCRA = mustLoad("ratelimit_gcra")
	// RateLimitConcAcquire records a concurrency lease if permits are free.
	RateLimitConcAcquire = mustLoad("ratelimit_conc_acquire")
	// RateLimitConcRenew extends a live concurrency lease.
	RateLimitConcRenew = mustLoad("ratelimit_conc_renew")
	// RateLimitConcRelease removes a concurrency lease and wakes waiters.
	RateLimitConcRelease = mustLoad("ratelimit_conc_release")
)
