package coordination

import "time"

// Holder is one holder of a lease as the server reported it, read in one
// round trip by a primitive's Holder or Holders method
// ([github.com/coordkit/coordination/lock.Mutex.Holder],
// [github.com/coordkit/coordination/lock.FieldSet.Holder],
// [github.com/coordkit/coordination/fencing.Mutex.Holder],
// [github.com/coordkit/coordination/rwlease.RWMutex.Holders],
// [github.com/coordkit/coordination/semaphore.Semaphore.Holders],
// [github.com/coordkit/coordination/redlock.Group.Holder],
// [github.com/coordkit/coordination/ratelimit.ConcurrencyLimiter.Holders]), which
// write nothing. It is a snapshot: by the time it is returned the holder
// may have released, expired or been replaced. An administrator passes
// its Token to the primitive's ForceRelease (naming the token never
// removes a newer holder that took over meanwhile); the holder's own
// process, after a restart, passes it to the primitive's Adopt. The zero
// Holder describes nothing. It is a plain value, safe to copy and to
// share between goroutines.
type Holder struct {
	// Token is the holder's owner token, as [Lease.Token] of its handle
	// returns it: 22 characters of base64url.
	Token string
	// Remaining is the lease's remaining TTL on the server at the instant
	// the read ran, in whole milliseconds (at least 1 ms); the largest
	// time.Duration for a lease without expiry (written by hand: the
	// library's acquisitions always set a TTL). For a Redlock, the
	// validity a quorum of its nodes gives the holder (see
	// [github.com/coordkit/coordination/redlock.Group.Holder]).
	Remaining time.Duration
	// FencingToken is a fencing lock holder's fencing token (positive);
	// 0 for the other kinds.
	FencingToken int64
	// Permits is the number of permits a semaphore holder or a
	// concurrency limiter's lease holds (at least 1); 0 for the other
	// kinds.
	Permits int64
	// Shared is true for a read-write lease's read (shared) lease; false
	// for its write lease and for the other kinds.
	Shared bool
}
