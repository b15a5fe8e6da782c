// Package coordination is the root of a library of distributed coordination
// primitives on Redis, Valkey and Redis Cluster: fencing-token locks
// (package fencing), owner-token locks and named leases in hash fields
// (lock), read-write leases (rwlease), semaphores, countdown latches,
// leader election, idempotency claims and rate limiters.
//
// A [Coordinator] is the one handle every primitive needs besides its own
// key and settings (in a function that returns (err error), as in README.md):
//
//	rdb := redis.NewClient(&redis.Options{
//		Addr:                  addr,
//		ContextTimeoutEnabled: true, // without it a context's deadline does not bound a command
//	})
//	defer rdb.Close()
//	coord, err := coordination.New(rdb, coordination.WithKeyPrefix("billing:"))
//	if err != nil {
//		return err
//	}
//	defer func() { err = errors.Join(err, coord.Shutdown(context.Background())) }()
//	// A fencing-token lock: both keys share one {hash tag} (one Cluster slot).
//	mu, err := fencing.New(coord, "{invoice:42}:lease", "{invoice:42}:fence")
//	if err != nil {
//		return err // bad keys (empty, too long, in two Cluster slots); nothing sent
//	}
//	lk, err := mu.TryAcquire(ctx, 30*time.Second)
//	if errors.Is(err, coordination.ErrNotAcquired) {
//		fmt.Println("another replica holds the lock")
//		return nil
//	}
//	if err != nil {
//		return err // Redis unreachable, bad input, a corrupt key ...
//	}
//
// It accepts any go-redis universal client (*redis.Client,
// *redis.ClusterClient, the Sentinel-backed client of
// redis.NewFailoverClient), warns once ([New]) when the client's options
// leave ContextTimeoutEnabled off, and never closes the client: [Coordinator.Shutdown]
// ends the coordinator's own background work (keep-alives, background
// cleanups, the Pub/Sub connection) and makes later operations fail with
// [ErrClosed]; shut it down before closing the client. This package exports only
// what a user calls: [New] and its options, the [Coordinator], the shared
// sentinel errors, [IsTransient] and [IsAmbiguous], [ReleaseOutcome], and
// [Lease], the held lease every lease handle embeds.
//
// # How every operation works
//
// Each public operation is admitted once through the coordinator's hooks
// (package hooks), then runs one Lua script on one key, or on keys that
// share one Cluster slot, in one round trip: EVALSHA, or EVAL after a
// NOSCRIPT reply. Scripts take time from the server (TIME), compute in
// integer milliseconds, validate what they read before writing anything,
// and report failures with stable codes that map to the sentinel errors of
// this package ([ErrBadState], [ErrConfigMismatch], ...), the message
// saying which; a reply the client does not recognise is [ErrBadState],
// never a guess. Multi-key operations are checked on the client for a
// cross-slot pair ([ErrInvalidArgument] naming the slots) with the key
// prefix applied, whatever the client type.
// The scripts are in package lua, for audit and for writing ACLs.
//
// Blocking operations wait on a release notification rather than polling.
// Where the server has sharded Pub/Sub (Redis 7.0 and later, Valkey),
// releasing scripts SPUBLISH on the key's shard channel, which lies in the
// key's Cluster slot, so that on Redis Cluster a release is delivered by
// the key's own shard instead of being broadcast to every node:
// "coordination:" followed by the prefixed key when the key has a hash
// tag, and followed by the key and the key again in braces ("{" key "}")
// when it holds no brace. Elsewhere (a server without SPUBLISH, a user
// whose ACL lacks +spublish, a key whose braces form no hash tag) they
// PUBLISH on the classic channel, "coordination:" followed by the
// prefixed key. For a lease in a hash field both names are followed by a
// NUL byte and the field. Grant &coordination:<prefix>* in ACLs. The
// waiters of one coordinator share one sharded Pub/Sub connection per
// shard at most (per primary on a Cluster client, one otherwise) plus one
// classic connection, whatever the number of keys and waiters. A lost
// message only delays a waiter until its periodic re-check or the holder's
// expiry.
//
// Every held thing (lock, permit, lease) is released the same way: Release
// marks it released at once (its context is cancelled with [ErrReleased]),
// returns the outcome or the error, and when the release failed with a
// transient error or a cancelled context, retries it in the background
// until it gets an answer or the lease's TTL has passed. TryX never waits;
// the plain verb waits (rate limiters: Allow and Wait).
//
// # Errors
//
// Every primitive returns the sentinels of this package, wrapped with
// context: test with errors.Is. [IsTransient] tells whether an error is
// worth retrying after a delay; every retry loop in the library classifies
// errors the same way. [IsAmbiguous] tells whether a write may have
// happened although the caller saw an error (not after a failed dial or a
// connection-pool timeout: nothing was sent). A NOPERM reply (an ACL that
// denies a command a script runs) reaches the caller as the server's
// error, terminal, never as corrupt state.
//
// An error of an operation names the operation and the key as the caller
// gave it (without the prefix; never a token, identity or password), and
// wraps the cause, so errors.Is and errors.As reach the sentinel, the
// go-redis error (a *net.OpError, a NOPERM reply) or the context's error:
//
//	coordination: lock acquire "jobs:nightly": key holds the wrong Redis type (COORD_WRONGTYPE)
//	coordination: lock release "jobs:nightly": dial tcp 10.0.0.7:6379: connect: connection refused
//
// Bad input (an empty key, a TTL below 1 ms, a nil coordinator or a nil
// context) is an error wrapping [ErrInvalidArgument] naming the argument,
// with nothing admitted or sent. Given to a verb, it names the operation
// and the key first, as the operation's other errors do (the operation
// alone when the key itself, or the receiver, is the bad argument); a
// constructor's names the argument alone:
//
//	coordination: lock renew "jobs:nightly": invalid argument ttl: must be at least 1ms, got 0s
//	coordination: invalid argument key: must not be empty
//
// A Release that got no answer returns [ReleaseUnknown] with its error.
//
// # go-redis behaviour to know
//
// go-redis re-sends a command after a read timeout, a broken connection or
// a retryable error reply (MaxRetries, 3 by default), so a script may run
// twice, and the error the caller finally sees is the last attempt's. The
// library's acquire scripts are idempotent under such a re-send (they
// recognise the caller's owner token), and once any attempt of an
// operation may have reached the server, the library treats the operation
// as ambiguous and cleans up what it may have left, whatever later attempts
// answered.
//
// A release removes what it releases and leaves no record behind, so a
// release re-sent after its first send's reply was lost finds its lease
// gone. The library counts how often go-redis wrote each command and
// decides such a re-send's outcome from the handle's own state, without
// writing anything on the server: when go-redis wrote the release more
// than once and the lease was still held locally (before its local
// deadline, not lost) when Release began, a re-send that finds the lease
// gone or another owner's reports [Released], what its first send did.
// The one edge: when someone else deleted the lease's key (by hand, or a
// forced release) while the release's reply was lost, that is reported as
// Released too. Without a re-send the server's answer stands.
//
// Per-call context deadlines bound network I/O only when the client has
// ContextTimeoutEnabled: true; otherwise ReadTimeout and WriteTimeout
// apply.
//
// # Telemetry
//
// Instruments are created from the coordinator's meter provider
// ([WithMeterProvider], default the OpenTelemetry global) and named
// coordination.<primitive>.<what> (docs/metrics.md lists them all);
// coordination.operation.duration records every admitted operation.
// Every admitted operation is also one span of the coordinator's tracer
// provider ([WithTracerProvider], default the OpenTelemetry global), a
// child of the caller's (docs/observability.md). Attributes never carry
// keys, owner tokens, identities or endpoints, and neither do spans nor
// log lines ([WithLogger]).
package coordination
