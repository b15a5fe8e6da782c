// Package idempotency runs a piece of work once per idempotency key and
// replays its result to every retry, across the replicas of a service, with
// Redis as the shared record; and it makes net/http handlers idempotent with
// the Idempotency-Key header.
//
// # Claims
//
// A [Store] keeps one Redis string per key: its state (pending,
// completed, abandoned or failed), the owner token of the caller that claimed it, an optional
// request fingerprint and, once completed, the result bytes. Each
// transition is one Lua script on that one key, one round trip, so it works
// the same on a standalone server, behind Sentinel, and on Redis Cluster:
//
//	claim, err := store.Begin(ctx, key, 10*time.Minute, idempotency.WithFingerprint(digest))
//	if err != nil {
//		return nil, err
//	}
//	switch claim.State {
//	case idempotency.Started: // ours: do the work, then store its result
//		result := charge()
//		if _, err := store.Complete(ctx, key, claim.Owner, result); err != nil {
//			return nil, err
//		}
//		return result, nil
//	case idempotency.Completed: // done before: replay its result
//		return claim.Result, nil
//	case idempotency.InProgress: // someone else is doing it now
//		return nil, errRetryLater
//	case idempotency.Failed: // an earlier attempt failed, outcome unknown
//		return nil, errCheckFirst
//	default: // idempotency.FingerprintMismatch: the key belongs to another request
//		return nil, errKeyReused
//	}
//
// [Store.Do] wraps this in one call. Only a Started claim carries an owner
// token; [Store.Complete] and [Store.Abandon] succeed only with the token of
// the current pending claim.
//
// # Key layout
//
// A claim lives at the key given to Begin (for [NewMiddleware], at
// [StoreKey](namespace, key)), after the coordinator's key prefix: a Redis
// string that always has a TTL, in one of four forms:
//
//	pending    "P" <result ttl> ":" <fence> ":" <owner> ":" <fp>
//	completed  "C" <completion id> ":" <fp> <result>
//	abandoned  "A" <fence> ":" <abandon id>   (for 5 s after an Abandon; see below for a Begin's cleanup)
//	failed     "F" <fence> ":" <fail id> ":" <fp>   (after a Fail, for the rest of the claim's TTL)
//
// where result ttl is the result TTL in milliseconds (decimal, applied by
// Complete), fence the claim's fencing token ([Claim.Fence], decimal),
// owner the owner token of the claim's caller, completion id that of the
// Complete that stored the result, abandon id that of the Abandon that
// ended the claim and fail id that of the Fail that marked it failed (22
// characters each, base64url: never a ":"), result the stored bytes (to the end of the string), and fp the
// request fingerprint: "-:" when none was given, otherwise its length in
// decimal, ":" and its bytes (so "3:abc"). For example, a claim completed
// with the result "ok" and no fingerprint reads
//
//	C0b9e3c1e-52f1-4a3c-9d6e-2b1f5c7e8a90:-:ok
//
// A string is the most compact form Redis has for this: a completed claim
// with a 100-byte result and a 40-byte key takes about 250 bytes (MEMORY
// USAGE; a hash would turn into a hash table once a field exceeds 64 bytes,
// 640 bytes). Claims written by versions of this package before that layout
// (hashes with the fields state, owner, ttl, fp, result and done) are not
// read: every operation on such a key fails with coordination.ErrBadState
// and changes nothing; delete them, or let them expire.
//
// A key that is absent, or abandoned, has no claim: an abandoned key only
// remembers the last fence (so the next claim's is larger) and the Abandon
// call (so that its re-send is recognised), and the next Begin replaces it.
// Complete and Abandon publish
// "completed", "abandoned", "failed" or "forgotten" on the key's release channel (sharded
// Pub/Sub where the server has it; see package coordination), which
// waiting Begins subscribe to
// ([WithWait]); the publish is best effort, so a user whose ACL forbids the
// channel still completes and abandons, and waiters fall back to the
// claim's expiry and periodic re-checks. The scripts (idempotency_begin,
// idempotency_complete, idempotency_abandon, idempotency_fail,
// idempotency_forget, idempotency_renew in package lua) need GET, SET, DEL,
// PTTL, PEXPIRE and TIME, besides EVALSHA and EVAL (and SPUBLISH or
// PUBLISH for the notifications).
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
// work may still be running. Two things keep it from doing harm:
//
//   - Keep-alive: [Store.Do] and the middleware ([NewMiddleware]) renew
//     the claim every ttl/3 while the work runs ([Store.KeepAlive];
//     [WithKeepAlive](false) and [WithClaimKeepAlive] turn it off), so a claim
//     outlives its ttl as long as its owner is alive and reaches Redis;
//     when a renewal finds the claim gone or taken over, the work's
//     context is cancelled (cause matching coordination.ErrLost).
//   - Fencing: every claim lifetime carries a fencing token ([Claim.Fence];
//     in Do's function and the middleware's handler, [FenceFrom] on the
//     context), strictly increasing per key: the server's clock in
//     microseconds when the claim was created, or one more than the token
//     of the claim abandoned just before if that is larger. A process
//     paused past its claim's TTL (a stop-the-world pause, a frozen VM:
//     keep-alive cannot help) carries a smaller token than the caller
//     that took the key over, so a resource that checks tokens, such as
//     fencing.Guarded.Set, refuses its late writes.
//
// For example:
//
//	res, _, err := store.Do(ctx, key, time.Minute, digest, func(ctx context.Context) ([]byte, error) {
//		ledger, err := fencing.NewGuarded(coord, "ledger:"+key)
//		if err != nil {
//			return nil, err
//		}
//		fence, _ := idempotency.FenceFrom(ctx)
//		ok, _, err := ledger.Set(ctx, fence, entry, 24*time.Hour)
//		if err != nil {
//			return nil, err
//		}
//		if !ok {
//			return nil, errTakenOver // a later claim of this key wrote first
//		}
//		return []byte("booked"), nil
//	})
//
// The tokens increase as long as the server's clock does not step back by
// more than a claim's lifetime between two claims of a key (an expired
// claim leaves nothing to compare with). Choose a ttl longer than the
// work anyway, and make the work's side effects safe to repeat where a
// repeat would hurt.
//
// # Failures whose outcome is unknown
//
// When the work fails in a way that may have left effects (a payment
// gateway timed out: did it charge?), running it again at once could do
// it twice, and the library cannot know. [Store.Fail] (and [Store.Do]
// when fn returns an error not marked [RetrySafe], and the middleware when
// its handler panics) marks the claim failed for the rest of its TTL:
// every retry is answered [Failed] at once ([ErrOutcomeUnknown] from Do,
// 409 [ProblemOutcomeUnknown] from the middleware) with the time left in
// [Claim.Remaining] (Retry-After), instead of waiting on a claim nobody
// will finish. The ways out: wait until the record expires (the next
// attempt then runs the work, with a larger fencing token), or check the
// outcome and delete the record with [Store.Forget] (`coordctl
// idempotency forget` for an operator). A failure that is safe to retry is returned as
// [RetrySafe](err) (Do abandons the claim) or ended with [Store.Abandon].
//
// # Distributed single-flight
//
// [Store.Do] and [DoValue] with [WithWait] make one expensive computation
// shared by many processes: the first caller with a key runs fn, the
// others with the same key and fingerprint wait (woken by the
// completion's notification, not by polling) and get its result, and
// callers arriving afterwards get the stored result while it lasts
// (WithResultTTL). Unlike golang.org/x/sync/singleflight the result is
// shared across processes and kept after fn returns; a caller whose wait
// ends first gets [ErrInProgress]. If fn fails, the waiters get
// [ErrOutcomeUnknown], or run fn themselves when the failure was
// [RetrySafe]. A computation without side effects should return its
// errors as [RetrySafe](err): otherwise one failure (a timeout of the
// caller's own context included) leaves the key failed for the rest of its
// TTL. [DoValue] with [JSONCodec] stores a typed result.
//
// # What holds, and what does not
//
// The work runs once per key while Redis keeps the claim or its result.
// Expiry, eviction (use a noeviction policy for these keys), and data lost
// in a failover or a restart without persistence all forget a key, and a
// later request with it then runs the work again. For payments and other
// effects that must survive Redis data loss, also deduplicate in the
// durable store the effect lands in (a unique constraint on the key, or the
// downstream API's own idempotency key). Reserve these keys for this
// package: do not write them yourself.
//
// # Restarts, eviction and memory limits
//
// A server restart without persistence, or eviction of a key (every claim
// has a TTL, so volatile-* policies evict them too), forgets the claim or
// its result: the next Begin with the key answers Started and the work
// runs again, and the original owner's Complete and Abandon return false.
// Under maxmemory with noeviction Begin fails with the server's OOM error
// (terminal) before writing anything. The fault matrix in docs/faults.md lists
// every fault with the test that shows it.
//
// # Re-sends and ambiguous outcomes
//
// go-redis re-sends a command after a read timeout or a broken connection
// (MaxRetries, 3 by default), so a script may run twice with the same
// arguments. Every script here is safe under that: a re-sent Begin finds its
// own owner token and answers Started again without a second claim; a
// re-sent Complete carries the same random completion id and answers true
// again without storing anything new; a re-sent Abandon carries the same
// random abandon id, finds it in the abandoned key and answers true again
// (within the 5 s the abandoned key lasts, unless the cleanup of another
// call's ambiguous Begin replaced the abandon id meanwhile; after that it
// answers false);
// a re-sent Begin answers Started with the same fencing token. Outside such
// a re-send (a new call), a second Complete or Abandon returns false and
// changes nothing.
//
// When a call returns an ambiguous error (a timeout, a cancelled context, a
// lost connection, or a transient error reply such as LOADING after
// go-redis re-sent a command whose reply was lost: see
// coordination.IsAmbiguous) the script may or may not have run; the
// package never retries it silently. When any attempt of a Begin may have
// run unseen (once ambiguous, a call stays so whatever its later attempts
// answer) and the call does not end with Started, a background
// owner-checked Abandon with the call's token removes any claim it may have
// created: bounded by the claim's ttl and a minute, retried on transient
// errors, and counted in coordination.cleanup.abandoned when given up (the
// claim then ends at its TTL). That cleanup leaves the key abandoned with
// the call's owner token as the abandon id, for the claim's ttl clamped to
// 5 s..1 min, also when the key held no claim yet (the fence is then the
// server's time) or another call's abandoned claim (its fence kept): the
// call's own request, if it reaches the server only after the cleanup (a
// retransmission, a stalled link), finds it, creates nothing and is
// answered InProgress (nobody reads that answer), while every other Begin
// takes the key over at once. A request delayed longer than that, or past
// another claim's whole life, can still create a claim that lasts its TTL. After an ambiguous Complete, a Begin with
// the same fingerprint tells whether the result was stored (Completed) or
// not (InProgress until the claim expires). Per-call context deadlines
// bound network I/O only when the go-redis client is created with
// ContextTimeoutEnabled: true; otherwise its ReadTimeout and WriteTimeout
// apply.
//
// # Errors
//
// Invalid arguments fail with coordination.ErrInvalidArgument naming the
// argument, before anything is sent or admitted. A key holding another
// Redis type (a claim of an earlier version included) fails with
// coordination.ErrBadState (saying so), a string this package did
// not write, or a reply the client does not recognise,
// with coordination.ErrBadState; nothing is written then. Errors of the
// server reach the caller as its reply: NOAUTH or WRONGPASS for a client
// that is not authenticated, NOPERM when the ACL denies EVALSHA, the key,
// or a command the script runs (each server words the last one its own
// way inside a script; the library reports it as NOPERM). All of these
// are terminal (coordination.IsTransient is false).
//
// # HTTP
//
// [NewMiddleware] applies this to HTTP handlers following the IETF draft "The
// Idempotency-Key HTTP Header Field": the first request with a key runs the
// handler, retries replay its status, chosen headers and body with
// [HeaderReplayed]; 409 while the first is in progress (with Retry-After,
// or an optional bounded wait), 422 when the key is reused for a different
// request, 400 for a missing (when required) or malformed key, with RFC
// 9457 problem details. A replay policy decides by status which responses
// are stored ([DefaultReplayPolicy]: never 5xx, 409 or 429), and keys are
// scoped by a namespace function so one client cannot read another's
// result. The claim is kept alive while the handler runs
// ([WithClaimKeepAlive]), and the handler reads its fencing token with
// [FenceFrom](r.Context()).
//
// When the store fails, the middleware answers 503 (or, after the handler
// ran, leaves the claim to expire) and logs the failure on the
// coordinator's logger (coordination.WithLogger) with the error described
// by its class and the server's reply, e.g.
//
//	level=WARN msg="idempotency: store unavailable; request refused" stage=begin error="terminal: server replied NOAUTH Authentication required."
//
// once per distinct failure and then at most once a minute while it
// repeats. Log lines never hold keys, owner tokens, addresses or
// passwords. [WithErrorHandler] receives every failure with its error.
//
// # Hooks and metrics
//
// Begin, Complete, Abandon, Fail and Forget are admitted through the
// coordinator's hooks as IDEMPOTENCY BEGIN, IDEMPOTENCY COMPLETE, IDEMPOTENCY
// ABANDON, IDEMPOTENCY FAIL and IDEMPOTENCY FORGET, once
// per call however long a Begin waits (Do and the middleware call them, so
// they are admitted the same way). Every answer counts as succeeded, the
// InProgress, Failed and FingerprintMismatch states and a false Complete,
// Abandon or Fail
// included; a Begin that gave up waiting because its context ended counts
// as canceled; errors count as failed. Each admitted call records
// coordination.operation.duration, and these counters (in the library's
// metrics table):
//
//	coordination.idempotency.begins     Begin answers, by state: started, completed,
//	                                    in_progress, fingerprint_mismatch, failed
//	coordination.idempotency.completes  Complete answers, by result: stored, not_owner
//	coordination.idempotency.abandons   Abandon answers, by result: abandoned, not_owner
//	coordination.idempotency.fails      Fail answers, by result: failed, not_owner
//
// Keep-alive renewals are not admitted; a kept-alive claim records
// coordination.idempotency.claim_hold_time, claim_renewal_failures and
// claims_lost. A call that fails with an error is not counted in them. not_owner means
// the caller holds no pending claim on the key: none is there (it expired,
// or was abandoned), another caller's is (it was taken over), or the claim
// is completed (for Complete, by an earlier call). No attribute holds a key
// or a token.
//
// # Size bounds
//
// Keys are at most 1 KiB, owners 256 bytes, fingerprints 1 KiB and a
// result given to Store.Complete 16 MiB; a longer one fails with
// coordination.ErrInvalidArgument naming "key", "owner", "fingerprint" or
// "result", nothing sent. The middleware stores responses up to
// WithMaxResponseBytes (1 MiB by default, at most 16 MiB - 64 KiB) and
// accepts Idempotency-Key values up to WithMaxKeyLength (255 bytes by
// default, at most 512), so that a store key with its namespace fits.
package idempotency
