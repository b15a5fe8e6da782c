package ratelimit

import "github.com/coordkit/coordination/internal/instrument"

// The rate limiters' instruments, recorded by this package.
var (
	rateLimitAllowed = instrument.New(instrument.Counter, "coordination.rate_limit.allowed", "{request}", "",
		"Rate-limit requests granted (once per Allow, Wait or Reserve, and per concurrency TryAcquire or Acquire).")
	rateLimitBlocked = instrument.New(instrument.Counter, "coordination.rate_limit.blocked", "{request}", "reason",
		"Rate-limit requests refused (once per Allow, Wait or Reserve, and per concurrency TryAcquire or Acquire), by reason (capacity, deny_list, unavailable).")
	rateLimitUnavailable = instrument.New(instrument.Counter, "coordination.rate_limit.unavailable", "{decision}", "failure_mode",
		"Rate-limit decisions Redis could not give, by the failure mode applied.")
	// concurrencyMetrics are the lease instruments of concurrency limiters
	// (coordination.rate_limit.concurrency.*): their leases are engine
	// handles, whose life the engine records.
	concurrencyMetrics = instrument.NewLease("rate_limit.concurrency", "concurrency lease", "",
		"Concurrency-limiter attempts refused for want of free permits (every refused attempt, queued retries included).")
)
