// Package idempotency runs a piece of work once per idempotency key and
// replays its result to every retry, across the replicas of a service, with
// Redis as the shared record; and it makes net/http handlers idempotent with
// the Idempotency-Key header.
//
// # Claims
//
// A [Store] keeps one Redis hash per key: its state (pending or
// completed), the owner token of the caller that claimed it, an optional
// request fingerprint and, once completed, the result bytes. Each
// transition is one Lua script on that one key, one round trip, so it works
// the same on a standalone server, behind Sentinel, and on Redis Cluster:
//
//	claim, err := store.Begin(ctx, key, 10*time.Minute, idempotency.WithFingerprint(digest))
//	switch claim.State {
//	case idempotency.Started: // ours: do the work, then
//		ok, err := store.Complete(ctx, key, claim.Owner, result)
//	case idempotency.Completed: // done before: claim.Result is its result
//	case idempotency.InProgress: // someone else is doing it now
//	case idempotency.FingerprintMismatch: // the key belongs to another request
//	}
//
// [Store.Do] wraps this in one call. Only a Started claim carries an owner
// token; [Store.Complete] and [Store.Abandon] succeed only with the token of
// the current pending claim.
//
// # Time
//
// A claim's TTL is kept by Redis (PEXPIRE), so the server's clock decides
// when it ends. A pending claim lasts the ttl given to Begin; Complete
// restarts the TTL for the result (the same ttl, or [WithResultTTL]).
// Lookups (a Begin that finds a claim, including a mismatch) never refresh
// or change the TTL, and a losing caller's ttl never changes the claim's.
// When a pending claim expires, for instance because its owner crashed, the
// next Begin takes the key over atomically with a new owner token, and the
// old owner's late Complete or Abandon returns false and changes nothing:
// there is no double completion through a stale owner. But the old owner's
// work may still be running, so choose a ttl longer than the work, and make
// the work's side effects safe to repeat where a repeat would hurt.
//
// # What holds, and what does not
//
// The work runs once per key while Redis keeps the claim or its result.
// Expiry, eviction (use a noeviction policy for these keys), and data lost
// in a failover or a restart without persistence all forget a key, and a
// later request with it then runs the work again. For payments and other
// effects that must survive Redis data loss, also deduplicate in the
// durable store the effect lands in (a unique constraint on the key, or the
// downstream API's own idempotency key). Reserve these hashes for this
// package: do not write their fields yourself.
//
// # Re-sends and ambiguous outcomes
//
// go-redis re-sends a command after a read timeout or a broken connection
// (MaxRetries, 3 by default), so a script may run twice with the same
// arguments. Every script here is safe under that: a re-sent Begin finds its
// own owner token and answers Started again without a second claim; a
// re-sent Complete carries the same random completion id and answers true
// again without storing anything new; a re-sent Abandon finds nothing to
// delete and answers false, the claim being gone either way. Outside such a
// re-send (a new call), a second Complete returns false and keeps the first
// result.
//
// When a call returns an ambiguous error (a timeout, a cancelled context, a
// lost connection: see coordination.IsAmbiguous) the script may or may not
// have run; the package never retries it silently. After an ambiguous
// Begin, a background owner-checked Abandon removes any claim the lost
// reply may have created. After an ambiguous Complete, a Begin with the
// same fingerprint tells whether the result was stored (Completed) or not
// (InProgress until the claim expires). Per-call context deadlines bound
// network I/O only when the go-redis client is created with
// ContextTimeoutEnabled: true; otherwise its ReadTimeout and WriteTimeout
// apply.
//
// # HTTP
//
// [Middleware] applies this to HTTP handlers following the IETF draft "The
// Idempotency-Key HTTP Header Field": the first request with a key runs the
// handler, retries replay its status, chosen headers and body with
// [HeaderReplayed]; 409 while the first is in progress (with Retry-After,
// or an optional bounded wait), 422 when the key is reused for a different
// request, 400 for a missing (when required) or malformed key, with RFC
// 9457 problem details. A replay policy decides by status which responses
// are stored ([DefaultReplayPolicy]: never 5xx, 409 or 429), and keys are
// scoped by a namespace function so one client cannot read another's
// result.
//
// # Hooks and metrics
//
// Begin, Complete and Abandon are admitted through the coordinator's hooks
// as IDEMPOTENCY BEGIN, IDEMPOTENCY COMPLETE and IDEMPOTENCY ABANDON (Do
// and the middleware call them, so they are admitted the same way). The
// counter coordination.idempotency.begins counts Begin answers by state
// (started, completed, in_progress, fingerprint_mismatch).
package idempotency
