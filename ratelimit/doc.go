// Package ratelimit provides distributed rate limiters on Redis, Valkey and
// Redis Cluster: fixed window, segmented sliding window, token bucket,
// GCRA, a composite of several of them on one key, a sliding-expiration
// throttle, an exact sliding log for small limits, and concurrency.
// Processes whose limiters use the same key share one budget.
//
// [New] returns a consumptive [*Limiter] for the settings of one
// algorithm: [FixedWindow], [SlidingWindow], [TokenBucket], [GCRA],
// [Throttle], [SlidingLog] or [Composite]. Its verbs follow golang.org/x/time/rate: [Limiter.Allow]
// decides at once, [Limiter.Wait] waits, both returning a [Decision] (a
// small value: nothing to release). [Limiter.Reserve] holds an estimate
// until [Reservation.Settle] charges the real cost; [Limiter.Update]
// changes the settings of a live limiter; a [DenyList] refuses identities
// before they use any capacity.
//
// [NewConcurrency] returns a [*ConcurrencyLimiter]: at most a limit of
// permits held at once. [ConcurrencyLimiter.TryAcquire] (never waits) and
// [ConcurrencyLimiter.Acquire] (waits) return a [*ConcurrencyLease], a held
// lease that embeds coordination.Lease, renews itself in the background
// and returns its permits on Release. [ConcurrencyLimiter.Adopt] takes a
// lease back by its token after a restart, [ConcurrencyLimiter.Holders]
// lists the live leases and [ConcurrencyLimiter.ForceRelease] gives back
// one lease's permits, as the other lease kinds do.
//
// [NewLocal] and [NewLocalConcurrency] return the same types deciding in
// this process's memory, without Redis (the same algorithms and answers,
// a local monotonic clock): an instance guard that keeps working while
// Redis is down. [WithLocalFallback] makes a Redis limiter decide locally,
// with a per-replica share of its limits, while Redis cannot give
// decisions.
//
// # Decisions
//
// Every decision is one Lua script on one key, run atomically with the
// server's clock (redis.call('TIME'), in microseconds): one EVALSHA round
// trip per [Limiter.Allow] once the script is cached. The scripts, one per
// algorithm, are package lua's ratelimit_fixed, ratelimit_sliding,
// ratelimit_bucket, ratelimit_gcra, ratelimit_throttle, ratelimit_log and
// ratelimit_composite; each
// algorithm's arithmetic is written once and shared by its script and the
// composite's. A fixed window reads the clock only to start a window or to
// refuse: a grant inside a live window needs none, since the key expires
// when its window ends. No application
// clock enters a shared decision, and a key never spans two Cluster
// slots. Rates are exact: a GCRA interval is kept as a fraction of a
// microsecond (3 per second admits exactly 3 per second over any long
// run; 1,000,000 per second per key works), windows and periods are whole
// microseconds (fixed windows whole milliseconds), never rounded.
//
//	algorithm        state in Redis                           RetryAfter
//	fixed window     string: count, window end                until the window ends
//	sliding window   string: total, permits per live segment  until enough segments return
//	token bucket     string: tokens, refill start             until enough whole periods pass
//	GCRA             string: one timestamp (TAT)              until the whole batch conforms
//	throttle         string: count, first and latest attempt  until the run ends (Quiet after the latest attempt)
//	sliding log      string: one entry per grant in the window until enough of the oldest grants leave
//	composite        hash: one field per component            the longest of the components'
//	concurrency      sorted set: one entry per lease          never
//
// # One decision per call, even when a reply is lost
//
// A decision, a settlement and a refund consume: running one twice would
// consume twice. So the library sends each at most once. go-redis never
// re-sends it once it may have reached the server (its retries skip
// it), and the library sends it again itself only when the previous
// attempt provably did not run: nothing was written to a connection (a
// refused dial, a pool timeout), with the client's MaxRetries and
// backoff. A reply lost after the command was written (a read timeout, a
// connection reset), and an error reply to a written command (LOADING,
// BUSY ...: a proxy may send one for a command the server ran), is an
// error for which coordination.IsAmbiguous
// reports true: the decision may have consumed once, never twice, however
// busy the key. The failure mode answers it like any other failure
// ([FailOpen] grants, [FailClosed] refuses, [ReturnError] returns it). No
// bookkeeping is stored for this: the keys hold only the limiter's state.
// Concurrency acquisitions are idempotent by their own lease member, and
// go-redis re-sends them as usual.
//
// The middleware's refunds (a later policy refused the request) name
// what they need to be applied safely: the grant's mark, which a
// decision made for a policy that is not the last returns (a fixed
// window's end; for every other algorithm and a composite, the server's
// time of the grant). The key gives back only what it provably still
// holds of that grant: a fixed window only while the grant's window lasts
// (a composite's fixed window: one that started at or before the grant);
// a token bucket only when no refill period began since the grant; GCRA
// the grant's charge less the time since the grant (what has not come
// back by itself); a sliding window only from the grant's own segment while it is in the window; a throttle only to the run that holds the
// grant; a sliding log only from the grant's own entry while it is in the log. A
// refund after its window rolled over does
// nothing, and a refund is itself sent at most once.
//
// # Key layouts
//
// The exact contents of a limiter's key (the coordinator's prefix
// applied), for tools that decode them; times are server microseconds
// since the Unix epoch (_ms: milliseconds), numbers are decimal integers:
//
//	fixed window     "f:<limit>:<window_ms>|<end_ms>|<used>"; expires at end_ms;
//	                 aligned (FixedWindow.Align), the settings end in ":e"
//	                 (windows at multiples of window_ms since the epoch; also
//	                 UTC minutes, hours and days) or are
//	                 "f:<limit>:0:<p>:<zone>" (a calendar period p: m, h, d
//	                 or M, in the time zone named zone, e.g. Europe/Berlin)
//	sliding window   "s:<limit>:<window>:<segments>|<n>|<o>|<l>|<c_o>,...,<c_l>":
//	                 segment i (g = ceil(window / segments) long, aligned to
//	                 server time) holds c_i permits, charged until
//	                 (i+1)*g + window; n is their total; expires when the
//	                 newest segment's permits return
//	token bucket     "b:<limit>:<tokens_per_period>:<period>|<tokens>|<refill>"
//	                 (refill: when the current period started; tokens below
//	                 zero are a settled reservation's debt); expires when the
//	                 bucket would be full again
//	GCRA             "g:<burst>:<q>:<d>|<tat>|<rem>": one permit every
//	                 q/d µs; the theoretical arrival time is tat + rem/d;
//	                 expires once the full burst is back
//	throttle         "t:<limit>:<quiet_ms>|<n>|<first>|<latest>": n permits
//	                 counted in the run of attempts that began at first;
//	                 the run ends, and the key expires, at latest +
//	                 quiet_ms
//	sliding log      "l:<limit>:<window>|<n>|<e>|<last>|<t>:<k>,<t>:<k>,...":
//	                 k permits granted at t, oldest first, at most limit
//	                 entries (about 19 bytes each); n their sum, e their
//	                 number, last the newest t; expires when the newest
//	                 entry leaves the window
//	composite        hash: c = the components' settings joined with ";",
//	                 and fields 1..n = each component's state as above
//	                 (without settings); expires when every
//	                 component is back to empty
//	concurrency      sorted set: member "#" scored -limit (the settings), and one
//	                 member "<permits>:<token>" per lease scored by its expiry
//	                 in server milliseconds (token: 22 random base64url
//	                 characters); expires with its latest lease, deleted with
//	                 its last one
//	deny list        sorted set: one member per identity, scored with the
//	                 end of its denial in server milliseconds (inf: without
//	                 end); never expires (ended entries go with the next
//	                 DenyFor)
//
// MEMORY USAGE of an idle key with a 40-byte name, Redis 7.0 / Valkey
// 9.1: fixed window, token bucket and GCRA 136 / 104 bytes, sliding window
// 136 / 120 (one live segment; 168 / 144 with ten), a composite of 3
// components 248 / 208, a concurrency limiter holding one lease 152 / 144
// (each more lease adds about 30). Beyond a bare counter, a key holds its
// settings (for the settings check and migration, about 15 bytes) and its
// state's times (a window's end, a refill start, an arrival time: 13 to
// 16 digits each).
//
// Every path that reads a key leaves it with the expiry its state calls
// for (the instant its state is back to empty, rounded up to a whole
// millisecond): a key that lost its expiry (PERSIST, RESTORE without a
// TTL) gets it back at the next decision, probe or refusal included, and a
// key whose state is over is deleted. One edge: a fixed window's grant
// trusts the key's expiry, so on a key PERSISTed past its window's end that
// one grant is counted in the old window (whose key it then deletes),
// not in a new one. A partitioned limiter per client therefore
// leaves nothing behind for clients that went away.
//
// # Settings
//
// Each key stores the settings its state was made under. A decision under
// other settings of the same algorithm migrates the state to its own, in
// the same one command, keeping the usage by the rules [Limiter.Update]
// lists: two processes with different limits on one key (a rolling
// deploy) both get decisions, never an error. [WithStrictSettings] refuses
// other settings with coordination.ErrConfigMismatch instead. Another
// algorithm on the key (or another structure of composite) is always
// coordination.ErrConfigMismatch, and nothing is written.
//
// # Decisions, reservations and leases
//
// [Limiter.Allow] returns a [Decision], allowed or refused;
// [Limiter.Reserve] a [*Reservation], granted or refused; [Limiter.Wait]
// an allowed Decision or an error, never a nil error without the permits.
// permits = 0 makes Allow and Reserve probe without taking anything, and
// Wait grant at once without asking Redis (as x/time/rate's WaitN(ctx,
// 0)). Negative permits, and more
// permits than the limiter's capacity (they can never be granted), are an
// error wrapping coordination.ErrInvalidArgument naming "permits", without
// touching Redis. Window, bucket, GCRA and composite grants are
// consumptive. A reservation ([Limiter.Reserve], every consumptive algorithm) is
// settled once with [Reservation.Settle], or at its estimate when it times
// out. A settlement's actual cost is at most the estimate plus the
// capacity (a debt of at most one whole capacity); a negative or greater
// one is an error wrapping coordination.ErrInvalidArgument naming
// "actual", without touching Redis, and leaves the reservation to settle.
//
// A concurrency lease ([ConcurrencyLimiter.TryAcquire] and
// [ConcurrencyLimiter.Acquire], at least 1 permit, at most the limit)
// holds its permits until [ConcurrencyLease.Release], renewing itself
// while held. It follows the library's one release semantics (see
// coordination.Lease): the lease counts as released the moment Release is
// called (its context is cancelled, its renewal stops); a release that
// fails with a transient error is retried in the background, and the
// caller gets the error; a second Release returns AlreadyReleased without
// asking Redis.
//
// # Hot keys: batched decisions
//
// One key is decided by one Redis thread: every process sharing it waits
// for the same server. [WithBatch](block, hold) makes a limiter take block
// permits in one decision and serve [Limiter.Allow] and [Limiter.Wait] of
// up to block permits from them locally, topping the block up when it
// runs short and giving unused permits back when it was not used up
// within hold (and on Close). Each process then asks Redis about once per
// block, so one key is decided at a multiple of what it answers unbatched
// (bench/README.md, "Batched mode: one hot key": 33x to 50x at 1, 4 and
// 16 processes). The price is a bounded overshoot: in any span of time,
// the key grants at most the sum of the batched instances' blocks (P ×
// block for P processes) more than its algorithm admits in that span (a
// fixed window: Limit + P × block per window), since each instance holds
// at most one block's permits that Redis counted but it has not granted.
// Every algorithm gives unused permits back; a give-back whose reply is
// lost, and a process that ends without Close, lets them lapse.
//
// # Waiting and failure
//
// [Limiter.Wait] and [ConcurrencyLimiter.Acquire] wait in a local queue,
// served oldest first and bounded: up to [DefaultQueueWaiters] (1,000)
// requests, or what [WithQueue] sets instead (in permits, [OldestFirst] or
// [NewestFirst]; WithQueue(0, ...) never queues); a request that does not
// fit fails at once with a [*WaitError]. Queued requests sleep
// until the server-computed retry time, or until a concurrency lease is
// released, instead of polling. Like golang.org/x/time/rate's WaitN, a
// Wait whose retry time is past the context's deadline fails at once
// rather than sleeping in vain: every Wait that returns without its
// permits (past the deadline, the context ended, the queue full, evicted,
// denied, refused by FailClosed) returns a [*WaitError], which matches
// coordination.ErrNotAcquired and carries the server's RetryAfter when
// known, so `if _, err := l.Wait(ctx, 1); err != nil { return err }` is
// safe; a refused [ConcurrencyLimiter.TryAcquire] returns a *WaitError
// too. [WithFailureMode] chooses what happens when Redis cannot answer:
// the error ([ReturnError], the default), a grant that consumed nothing
// ([FailOpen]; for a concurrency limiter a lease that holds nothing, whose
// FailedOpen reports true and whose Context is never cancelled) or a
// refusal ([FailClosed]; a [*WaitError] for Wait, TryAcquire and
// Acquire).
//
// # Deny lists
//
// A [DenyList] is a Redis sorted set of identities, each denied without
// end ([DenyList.Deny]) or until a time ([DenyList.DenyFor], a lockout
// judged by the server's clock). A limiter bound to one and to
// an identity ([WithDenyList]) checks the membership first, through a
// local cache (1024 identities, 1 s, by default; [WithDenyCache]); a
// denied identity gets a refused decision whose [Decision.Denied] is true
// (from Wait, TryAcquire and Acquire, a [*WaitError] whose Denied is
// true), without touching the limiter's key or queue.
//
// An [AllowList] is the same machinery for identities never limited: a
// limiter bound to one ([WithAllowList]) checks it after the deny list,
// and grants an allowed identity at once, without a decision, consuming
// nothing (Available -1; a concurrency lease that holds nothing).
//
// # Partitions and HTTP
//
// [Partitioned] keeps one limiter per partition (client, tenant, user),
// created on demand and evicted when idle or, past [WithMaxPartitions]
// ([DefaultMaxPartitions], 10,000, by default), least recently used first
// (never while in use; the Redis state is kept), and
// [PartitionedConcurrency] one concurrency limiter per partition;
// [Partitioned.UpdateAll] changes the settings of every partition at once.
// [PartitionKey] hashes partition strings into keys. [NewMiddleware] applies layered policies to net/http
// handlers, all or nothing (a later refusal gives earlier grants back),
// and answers refusals with 429 (or 503 for a service-wide guard, 403 for
// a denied identity), Retry-After (spread and capped by
// [WithRetryAfter]), Cache-Control: no-store and an RFC 9457
// application/problem+json body naming the refusing policy (and the
// request's trace id, when its context carries a span), or with the
// policy's own problem fields or Reject function; a request costing more
// than a policy's capacity gets no Retry-After and a detail saying so
// (see [Policy.Permits]). A policy's state is private unless it asks for
// the RateLimit and RateLimit-Policy header fields of the IETF draft
// draft-ietf-httpapi-ratelimit-headers-11 ([Policy.RateLimitHeader],
// [Policy.PublishQuota]); a partition key is never sent. It logs limiter failures
// without keys, addresses or passwords ([WithLogger]) and hands them to
// an optional error handler ([WithErrorHandler]). A shadow policy
// ([Policy.Shadow], [WithShadow]) decides and consumes but never refuses:
// to try a limit on real traffic before enforcing it.
//
// # Hooks and metrics
//
// Allow, Wait, Reserve, TryAcquire and Acquire are admitted through the
// coordinator's hooks once each, as RATE LIMIT ACQUIRE (a queued call's
// retries are not admitted again); a refusal is a Succeeded outcome, and
// so is a [*WaitError] other than a context that ended; a Wait or Acquire
// that gave up when its context ended is Canceled. A concurrency lease's
// Refresh, Verify and Release are RATE LIMIT RENEW, VERIFY and RELEASE,
// settlements RATE LIMIT SETTLE, updates RATE LIMIT UPDATE, deny-list
// calls RATE LIMIT DENY LIST READ and WRITE, allow-list calls RATE LIMIT
// ALLOW LIST READ and WRITE (a limiter's own checks are
// not admitted again); background renewals and the middleware's refunds
// are not admitted. Counters:
// coordination.rate_limit.allowed (reason = allow_list for allowed
// identities), coordination.rate_limit.blocked
// (attribute reason = capacity | deny_list | unavailable),
// coordination.rate_limit.unavailable (attribute failure_mode),
// coordination.rate_limit.near_limit (grants leaving at most a fifth of
// the capacity free) and coordination.rate_limit.canceled (calls whose
// context ended before an answer); up-down counters
// coordination.rate_limit.queued (local queue depth) and
// coordination.rate_limit.concurrency.active (leases held). The
// middleware counts coordination.rate_limit.policy.refused (attributes
// policy, mode = enforce | shadow, reason) and
// coordination.rate_limit.policy.near_limit (policy): a limiter does not
// know the policies it serves, so only the middleware's instruments carry
// the policy's Name.
// Concurrency leases also record coordination.rate_limit.concurrency.*:
// contention (each refused attempt), hold_time, renewal_failures, lost,
// and acquire_wait (the time an Acquire spent queued, by result). Keys,
// partitions and identities are never attributes.
//
// # What holds and what does not
//
// A call cancelled or timed out while its command was in flight may have
// consumed its permits without returning a grant. Per-call context
// deadlines bound network I/O only with go-redis' ContextTimeoutEnabled:
// true. A concurrency attempt whose reply was lost is released in the
// background, leaving a tombstone of its member (0 permits, expiring
// after the lease duration clamped to 5 s..1 min) that the attempt's own
// request refuses if it reaches the server later: a late request takes
// nothing, and nobody else is held up by the tombstone.
//
// State lives in one Redis primary: asynchronous replication can lose
// recent consumption on failover (budgets reset a little), and eviction or a
// restart without persistence resets them. A server clock that jumps moves
// window and refill boundaries. Statistics are per instance.
//
// A server restart without persistence, or eviction of a limiter's key (it
// has a TTL, so volatile-* policies evict it too), resets its budget: the
// next decision finds the full limit, and a concurrency limiter's leases
// are forgotten (all permits free while their holders may still run).
// Under maxmemory with noeviction a decision fails with the server's OOM
// error before writing anything (an error reply: with a failure mode other
// than ReturnError, the mode's answer), while a concurrency acquisition still succeeds (its
// first write prunes expired leases, and the server then lets the script
// finish). The fault matrix (docs/faults.md) lists every fault with the test that
// shows it.
//
// All limiters and deny lists are safe for concurrent use by multiple
// goroutines.
//
// # Size bounds
//
// Keys are at most 1 KiB and deny-list identities 256 bytes; a longer
// one fails with coordination.ErrInvalidArgument naming "key" or
// "identity", nothing sent.
package ratelimit
