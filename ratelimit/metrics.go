package ratelimit

import "github.com/coordkit/coordination/internal/instrument"

// The rate limiters' instruments, recorded by this package.
var (
	rateLimitAllowed = instrument.New(instrument.Counter, "coordination.rate_limit.allowed", "{request}", "reason",
		"Rate-limit requests granted (once per Allow, Wait or Reserve, and per concurrency TryAcquire or Acquire); reason=allow_list for identities on the allow list, no attribute otherwise.")
	rateLimitBlocked = instrument.New(instrument.Counter, "coordination.rate_limit.blocked", "{request}", "reason",
		"Rate-limit requests refused (once per Allow, Wait or Reserve, and per concurrency TryAcquire or Acquire), by reason (capacity, deny_list, unavailable).")
	rateLimitUnavailable = instrument.New(instrument.Counter, "coordination.rate_limit.unavailable", "{decision}", "failure_mode",
		"Rate-limit decisions Redis could not give, by the failure mode applied.")
	rateLimitNearLimit = instrument.New(instrument.Counter, "coordination.rate_limit.near_limit", "{request}", "",
		"Rate-limit grants decided by Redis after which at most a fifth of the capacity was free (available * 5 <= capacity: 80% or more in use), once per grant; a subset of allowed.")
	rateLimitCanceled = instrument.New(instrument.Counter, "coordination.rate_limit.canceled", "{request}", "",
		"Rate-limit Allow, Wait, Reserve, TryAcquire and Acquire calls whose context ended before an answer (while queued or during a round trip): neither allowed nor blocked.")
	rateLimitQueued = instrument.New(instrument.UpDownCounter, "coordination.rate_limit.queued", "{request}", "",
		"Requests waiting now in the local queues of this process's limiters (Wait, concurrency Acquire): the queue depth.")
	policyRefused = instrument.New(instrument.Counter, "coordination.rate_limit.policy.refused", "{request}", "policy, mode, reason",
		"HTTP middleware refusals by policy (its Name), mode (enforce: answered; shadow: would have been, admitted) and reason (capacity, deny_list, too_large, unavailable).")
	policyNearLimit = instrument.New(instrument.Counter, "coordination.rate_limit.policy.near_limit", "{request}", "policy",
		"HTTP middleware grants by policy (its Name) after which at most a fifth of the capacity was free, as coordination.rate_limit.near_limit.")
	// concurrencyMetrics are the lease instruments of concurrency limiters
	// (coordination.rate_limit.concurrency.*): their leases are engine
	// handles, whose life the engine records.
	concurrencyMetrics = withActive(instrument.NewLease("rate_limit.concurrency", "concurrency lease", "",
		"Concurrency-limiter attempts refused for want of free permits (every refused attempt, queued retries included)."))
)

// withActive adds the active-lease gauge to the concurrency lease family.
func withActive(l instrument.Lease) instrument.Lease {
	l.Active = instrument.New(instrument.UpDownCounter, "coordination.rate_limit.concurrency.active", "{lease}", "",
		"Concurrency leases held now by this process: acquired and not yet released, lost or ended by shutdown (those granted by FailOpen or an allow list hold nothing and are not counted).")
	return l
}
