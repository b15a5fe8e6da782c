// Package ratelimit provides distributed rate limiters on Redis, Valkey and
// Redis Cluster: fixed window, segmented sliding window, token bucket, GCRA
// and concurrency. Processes whose limiters use the same key and settings
// share one budget.
//
// # Decisions
//
// Every decision is one Lua script on one key, run atomically with the
// server's clock (redis.call('TIME')) and integer milliseconds: one
// EVALSHA round trip per [Limiter.Acquire] once the script is cached. No
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
// [Limiter.Acquire] returns a [Lease]. permits = 0 probes without taking
// anything. Negative permits are an error. More permits than the limiter's
// capacity are refused at once, without RetryAfter, without touching Redis.
// Window, bucket and GCRA leases are consumptive; a concurrency lease holds
// its permits until [Lease.Release], renewing itself while held.
//
// # Queueing and failure
//
// [WithQueue] adds a local queue (a limit in permits, [OldestFirst] or
// [NewestFirst]) used by [Limiter.Wait]: queued requests sleep until the
// server-computed retry time instead of polling. [WithFailureMode] chooses
// what happens when Redis cannot answer: the error ([ReturnError], the
// default), an acquired lease ([FailOpen]) or a refusal ([FailClosed]).
//
// # Partitions and HTTP
//
// [Partitioned] keeps one limiter per partition (client, tenant, user),
// created on demand and evicted when idle; [PartitionKey] hashes partition
// strings into keys. [NewMiddleware] applies layered policies to net/http
// handlers and answers refusals with 429 (or 503 for a service-wide
// guard), Retry-After, Cache-Control: no-store and an RFC 9457
// application/problem+json body.
//
// # Hooks and metrics
//
// Acquire and Wait are admitted through the coordinator's hooks once each,
// as RATE LIMIT ACQUIRE (a queued Wait's retries are not admitted again);
// an unacquired lease is a Succeeded outcome. Concurrency releases and
// explicit renewals are RATE LIMIT RELEASE and RATE LIMIT RENEW. Counters:
// coordination.rate_limit.allowed, coordination.rate_limit.blocked
// (attribute reason = capacity | unavailable) and
// coordination.rate_limit.unavailable (attribute failure_mode). Keys and
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
// call has its own token).
//
// State lives in one Redis primary: asynchronous replication can lose
// recent consumption on failover (budgets reset a little), and eviction or a
// restart without persistence resets them. A server clock that jumps moves
// window and refill boundaries. Statistics are per instance.
//
// All limiters are safe for concurrent use by multiple goroutines.
package ratelimit
