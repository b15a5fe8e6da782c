// Package ratelimit provides distributed rate limiters on Redis, Valkey and
// Redis Cluster: fixed window, segmented sliding window, token bucket, GCRA
// and concurrency. Processes whose limiters use the same key and settings
// share one budget.
//
// Every constructor ([NewFixedWindow], [NewSlidingWindow],
// [NewTokenBucket], [NewGCRA], [NewConcurrency]) returns a [*Limiter].
// Its verbs follow golang.org/x/time/rate: [Limiter.Allow] decides at
// once, [Limiter.Wait] waits.
//
// # Decisions
//
// Every decision is one Lua script on one key, run atomically with the
// server's clock (redis.call('TIME')) and integer milliseconds: one
// EVALSHA round trip per [Limiter.Allow] once the script is cached. No
// application clock enters a shared decision, and a key never spans two
// Cluster slots. Each key stores its limiter's settings; a limiter whose
// settings differ gets an error matching coordination.ErrConfigMismatch
// and nothing is written.
//
//	algorithm        state in Redis                     RetryAfter
//	fixed window     string: count, window end           until the window ends
//	sliding window   hash: total + one field per segment until enough segments return
//	token bucket     string: tokens, refill start        until enough whole periods pass
//	GCRA             string: one timestamp (TAT)         until the whole batch conforms
//	concurrency      sorted set: one entry per lease     never
//
// # Key layouts
//
// The exact contents of a limiter's key (the coordinator's prefix applied),
// for tools that decode them; times are server milliseconds since the Unix
// epoch, every number a decimal integer:
//
//	fixed window     string "f:<limit>:<window_ms>|<used>|<end_ms>"; expires at end_ms
//	sliding window   hash: c = "s:<limit>:<window_ms>:<segments>", n = permits charged,
//	                 o = oldest segment index that may hold permits, l = newest segment
//	                 index written, and one field per live segment i, named
//	                 i mod (segments + 3), holding its permits; a segment is
//	                 ceil(window_ms / segments) long, aligned to server time; expires
//	                 when the newest segment's permits return
//	token bucket     string "b:<limit>:<tokens_per_period>:<period_ms>|<tokens>|<refill_ms>"
//	                 (refill_ms: when the current refill period started); expires
//	                 when the bucket would be full again
//	GCRA             string "g:<burst>:<interval_ms>|<tat_ms>"; expires at tat_ms
//	concurrency      sorted set: member "#" scored -limit (the settings), and one
//	                 member "<permits>:<token>" per lease scored by its expiry
//	                 (token: 22 random base64url characters); expires with its
//	                 latest lease, deleted with its last one
//
// MEMORY USAGE of one live key with a 53-byte name, on Redis 7.0 / 8.0:
// 136-168 bytes for a fixed window, token bucket or GCRA, 168 for a
// sliding window with one live segment (200-216 with ten), 168-184 for a
// concurrency limiter holding one lease (each more lease adds about 30).
//
// Idle state expires on its own: a window key when the window is over, a
// bucket when it is full again, a GCRA key when the full burst is back, a
// concurrency key with its last lease. A partitioned limiter per client
// therefore leaves nothing behind for clients that went away.
//
// # Leases and permits
//
// [Limiter.Allow] and [Limiter.Wait] return a [Lease]. permits = 0 probes
// without taking anything. Negative permits are an error. More permits
// than the limiter's capacity are refused at once, without RetryAfter,
// without touching Redis. Window, bucket and GCRA leases are consumptive;
// a concurrency lease holds its permits until [Lease.Release], renewing
// itself while held.
//
// Releasing a concurrency lease follows the library's one release
// semantics: the lease counts as released the moment Release is called
// (its context is cancelled, its renewal stops); a release that fails
// with a transient error is retried in the background, and the caller gets
// the error; a second Release does nothing.
//
// # Waiting and failure
//
// [Limiter.Wait] waits in a local queue, served oldest first and unbounded
// unless [WithQueue] bounds it (in permits, [OldestFirst] or
// [NewestFirst]; WithQueue(0, ...) never queues): queued requests sleep
// until the server-computed retry time, or until a concurrency lease is
// released, instead of polling. [WithFailureMode] chooses what happens
// when Redis cannot answer: the error ([ReturnError], the default), an
// acquired lease ([FailOpen]) or a refusal ([FailClosed]).
//
// # Partitions and HTTP
//
// [Partitioned] keeps one limiter per partition (client, tenant, user),
// created on demand and evicted when idle; [PartitionKey] hashes partition
// strings into keys. [NewMiddleware] applies layered policies to net/http
// handlers and answers refusals with 429 (or 503 for a service-wide
// guard), Retry-After, Cache-Control: no-store and an RFC 9457
// application/problem+json body. It logs limiter failures without keys,
// addresses or passwords ([WithLogger]) and hands them to an optional
// error handler ([WithErrorHandler]).
//
// # Hooks and metrics
//
// Allow and Wait are admitted through the coordinator's hooks once each,
// as RATE LIMIT ACQUIRE (a queued Wait's retries are not admitted again);
// an unacquired lease is a Succeeded outcome, a Wait that gave up when its
// context ended is Canceled. Concurrency releases are RATE LIMIT RELEASE;
// background renewals are not admitted. Counters:
// coordination.rate_limit.allowed, coordination.rate_limit.blocked
// (attribute reason = capacity | unavailable) and
// coordination.rate_limit.unavailable (attribute failure_mode).
// Concurrency leases also record coordination.rate_limit.concurrency.*:
// contention (each refused attempt), hold_time, renewal_failures, lost,
// and acquire_wait (the time a Wait spent queued, by result). Keys and
// partitions are never attributes.
//
// # What holds and what does not
//
// Consumption is not idempotent: go-redis re-sends a command after a lost
// reply or a read timeout (MaxRetries, 3 by default), and a re-sent
// fixed-window, sliding-window, token-bucket or GCRA script consumes its
// permits a second time. Create the client with MaxRetries: -1 when
// double counting matters more than a transient error. A cancelled or
// timed-out call may have consumed permits without returning a lease.
// Per-call context deadlines bound network I/O only with go-redis'
// ContextTimeoutEnabled: true. Concurrency acquisition is idempotent (each
// attempt has its own member), and an attempt whose reply was lost is
// released in the background.
//
// State lives in one Redis primary: asynchronous replication can lose
// recent consumption on failover (budgets reset a little), and eviction or a
// restart without persistence resets them. A server clock that jumps moves
// window and refill boundaries. Statistics are per instance.
//
// All limiters are safe for concurrent use by multiple goroutines.
package ratelimit
