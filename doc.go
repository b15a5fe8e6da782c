// Package coordination is the root of a library of distributed coordination
// primitives on Redis, Valkey and Redis Cluster: fencing-token locks
// (package fencing), owner-token locks (lock), semaphores, countdown
// latches, leader election, idempotency claims and rate limiters.
//
// A [Coordinator] is the one handle every primitive needs besides its own
// key and settings:
//
//	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
//	coord, err := coordination.New(rdb, coordination.WithKeyPrefix("billing:"))
//	lk, err := fencing.TryAcquire(ctx, coord, "{invoice:42}:lease", "{invoice:42}:fence", 30*time.Second)
//
// It accepts any go-redis universal client (*redis.Client,
// *redis.ClusterClient, the Sentinel-backed client of
// redis.NewFailoverClient) and never closes it.
//
// # How every operation works
//
// Each public operation is admitted once through the coordinator's hooks
// (package hooks), then runs one Lua script on one key, or on keys that
// share one Cluster slot, in one round trip: EVALSHA, or EVAL after a
// NOSCRIPT reply. Scripts take time from the server (TIME), compute in
// integer milliseconds, validate what they read before writing anything,
// and report failures with stable codes that map to the sentinel errors of
// this package ([ErrBadState], [ErrWrongType], [ErrCapacityMismatch], ...).
// Multi-key operations are checked on the client for a cross-slot pair
// ([ErrCrossSlot]) with the key prefix applied, whatever the client type.
//
// Blocking operations wait on a release notification rather than polling:
// releasing scripts PUBLISH on a channel derived from the key
// ([Coordinator.Channel]), and waiters of one coordinator share one Pub/Sub
// connection ([Coordinator.Watch]). A lost message only delays a waiter
// until its periodic re-check or the holder's expiry.
//
// # Errors
//
// Every primitive returns the sentinels of this package, wrapped with
// context: test with errors.Is. [Classify] sorts any error into transient
// (worth retrying after a delay), terminal and canceled; every retry loop
// in the library uses it. [IsAmbiguous] tells whether a write may have
// happened although the caller saw an error.
//
// # go-redis behaviour to know
//
// go-redis re-sends a command after a read timeout or a broken connection
// (MaxRetries, 3 by default), so a script may run twice. The library's
// acquire scripts are idempotent under such a re-send (they recognise the
// caller's owner token); consumptive operations such as rate-limit
// decisions document what a re-send does and how to turn it off
// (MaxRetries: -1). Per-call context deadlines bound network I/O only when
// the client has ContextTimeoutEnabled: true; otherwise ReadTimeout and
// WriteTimeout apply.
//
// # Telemetry
//
// Instruments are created from the coordinator's meter provider
// ([WithMeterProvider], default the OpenTelemetry global) and named
// coordination.<primitive>.<what>; coordination.operation.duration records
// every admitted operation. Attributes never carry keys, owner tokens,
// identities or endpoints, and neither do log lines ([WithLogger]).
package coordination
