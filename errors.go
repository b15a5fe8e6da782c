package coordination

import (
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/sentinel"
)

// Shared sentinel errors. Every primitive returns these (wrapped with
// context), so errors.Is works the same way across packages.
var (
	// ErrNotAcquired is returned when a lease, lock, permit or claim could
	// not be acquired because it is held by someone else (contention). A
	// blocking acquire that gives up because its context ended returns an
	// error matching both ErrNotAcquired and the context's cause, when
	// Redis answered its last attempt. An outage is not contention: when
	// the last attempt failed (Redis unreachable, a failover) or Redis
	// answered none (each attempt was cut by the context), the error
	// matches the context's cause and that failure, and not
	// ErrNotAcquired. An acquire whose context had ended before it sent
	// anything, blocking or not, returns the context's cause alone, named
	// like its other errors (`coordination: lock acquire "KEY": context
	// canceled`), and sends nothing.
	ErrNotAcquired = sentinel.ErrNotAcquired

	// ErrNotHeld is the cause of the context of the zero [Lease], which
	// holds nothing. It is also returned, wrapped, by a primitive's Adopt
	// when the lease is not held by the token given, and by its Holder when
	// the lease is free: an answer, not a failure (hooks learn the
	// operation as Succeeded).
	ErrNotHeld = sentinel.ErrNotHeld

	// ErrLost is matched by the cause of a handle's context when ownership
	// was lost or became uncertain: a renewal found the lease gone or failed
	// terminally, or the local lease deadline passed before a renewal
	// succeeded.
	ErrLost = sentinel.ErrLost

	// ErrReleased is the cause of a handle's context after the holder
	// released it.
	ErrReleased = sentinel.ErrReleased

	// ErrUnsupportedServer is returned when the server lacks a feature an
	// operation needs (hash-field leases on Redis before 7.4, Valkey before
	// 9.0 or miniredis), before anything is written. The wrapping error
	// names the feature and the server versions that have it.
	ErrUnsupportedServer = sentinel.ErrUnsupportedServer

	// ErrInvalidArgument is returned for bad input: an empty key, a duration
	// below one millisecond, a nil coordinator or context, a negative count,
	// a zero-value primitive, or the keys of a multi-key operation in
	// different Redis Cluster slots (detected on the client from the
	// prefixed keys, whatever the client type: use one {hash tag} in every
	// key). The wrapping error names the argument and why; given to a
	// verb, it also names the operation and the key first, as every error
	// of the operation does (`coordination: lock renew "jobs": invalid
	// argument ttl: ...`). Nothing is admitted or sent to Redis.
	ErrInvalidArgument = sentinel.ErrInvalidArgument

	// ErrBadState is returned when a script finds a key that holds something
	// the library did not write (a malformed or negative fencing counter, a
	// fencing counter at 9223372036854775807 that cannot be incremented, a
	// counter with a TTL, a key of the wrong Redis type, a member or record
	// the primitive did not write), or when a reply has a shape the client
	// does not recognise. The message says which. Scripts detect bad state
	// before writing anything.
	ErrBadState = sentinel.ErrBadState

	// ErrConfigMismatch is returned when a caller's settings differ from the
	// settings recorded in a key: a semaphore's capacity while the key has
	// live holders (the message says capacity), a rate limiter's settings.
	ErrConfigMismatch = sentinel.ErrConfigMismatch

	// ErrClosed is returned by operations on a closed limiter or other
	// closable object, and by every operation of a coordinator's
	// primitives after [Coordinator.Shutdown].
	ErrClosed = sentinel.ErrClosed

	// ErrNotReplicated is returned by an operation of a coordinator created
	// with [WithReplicaAcks] when fewer replicas than required acknowledged
	// its writes within the timeout. The write is on the primary: the error
	// is transient and ambiguous (see [IsAmbiguous]).
	ErrNotReplicated = sentinel.ErrNotReplicated
)

// IsTransient reports whether err may succeed if the same operation is
// tried again after a delay: a LOADING, BUSY, TRYAGAIN, CLUSTERDOWN,
// MASTERDOWN, READONLY or NOREPLICAS reply, "max number of clients
// reached", a network error, a timeout, a connection-pool timeout, or
// [ErrNotReplicated]. It is false for nil, for a cancellation (the caller's
// context ended, or a blocking acquire gave up when it did), and for errors
// that fail again if retried: authentication and permission errors
// (NOAUTH, WRONGPASS, NOPERM), WRONGTYPE, the library's own refusals
// ([ErrBadState], [ErrConfigMismatch], [ErrInvalidArgument], [ErrClosed]),
// and every error not known to be transient. It is the same
// classification every retry loop of the library uses (blocking acquire,
// keep-alive, leader campaign, background cleanup, rate-limit queue). An
// answer such as [ErrNotAcquired] (contention) is not transient: asking
// again at once gives the same answer; wait for the holder with the
// blocking verb (Acquire) instead of a retry loop.
func IsTransient(err error) bool { return engine.Classify(err) == engine.Transient }

// IsAmbiguous reports whether err leaves the outcome of a write unknown: the
// command may have run on the server although the caller saw an error. That
// is every cancellation and every transient error, error replies included:
// go-redis re-sends a command after a lost reply (MaxRetries, 3 by
// default), and the error the caller sees is the last attempt's, whatever
// the first attempt did. It is false for terminal errors, and for errors
// that prove nothing was sent: a failed dial (a *net.OpError with Op
// "dial": connection refused, a host name that does not resolve, a dial
// timeout) and redis.ErrPoolTimeout, whatever the error wraps. The one
// case this misjudges: a server that ran an earlier attempt and became
// unreachable before go-redis' re-send dialled it (a crash within the retry
// backoff); what that attempt wrote expires at its TTL. The library's
// primitives decide the same way, except that on a client that never
// re-sends (MaxRetries: -1) an error reply also proves that the one attempt
// did not run.
func IsAmbiguous(err error) bool { return engine.IsAmbiguous(err) }
