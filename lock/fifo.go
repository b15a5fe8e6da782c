package lock

import (
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/lockcore"
	"github.com/coordkit/coordination/internal/slot"
)

// Option configures a [Mutex] (see [New]).
type Option func(*config) error

type config struct {
	fifo bool
	// recheck and live are the first-in first-out waiters' re-check
	// period and how long a queued waiter counts as alive after each of
	// its attempts (fifoRecheck and fifoLive; tests shorten them).
	recheck, live time.Duration
}

// The first-in first-out order's timing: a queued waiter tries again at
// least every fifoRecheck (even without a notification), and each attempt
// keeps it in the queue for fifoLive. A waiter that dies (its process
// killed, its goroutine stuck) is removed from the queue at most fifoLive
// after its last attempt, by the next attempt of any waiter or release
// that finds it at the head; the waiters behind it then go on at their
// next re-check.
const (
	fifoRecheck = time.Second
	fifoLive    = 3 * time.Second
)

// WithFIFO makes the Mutex grant the lock to its blocked waiters in the
// order they arrived (first in, first out) when on is true; the default
// (false) lets every waiter race for the lock when it is released.
//
// In the first-in first-out order a waiter of [Mutex.Acquire] that finds
// the lock held (or others waiting) joins a queue kept beside the lock
// key, and a release wakes only the queue's head: a hand-off costs the
// same few commands (the release, the head's acquisition, one attempt of
// the next head) whatever the number of waiters, where the default order
// wakes every waiter at each release (about as many commands as there are
// waiters). [Mutex.TryAcquire] never jumps the queue: it is refused with
// coordination.ErrNotAcquired while any live waiter is queued, even when
// the lock is free at that instant. A waiter whose context ends leaves the
// queue (in the background, best effort). A waiter that dies without
// leaving (its process killed) counts as alive for 3 s after its last
// attempt (waiters try again at least every second); then the next
// attempt or release that finds it at the head removes it, so it holds up
// the waiters behind it for at most about 4 s. The cost of that bound: a
// queued waiter sends one command per second while it waits.
//
// Every Mutex of a key must use the same order: a default-order waiter
// takes a free lock without looking at the queue. The queue is two keys
// in the lock key's Cluster slot: the lock key followed by "\x00fifo" and
// a hash tag, a sorted set of the waiters' owner tokens by arrival, and
// the same followed by "\x00fifo-alive", a hash of each waiter's alive
// time; both expire 3 s after the last waiter's attempt. The first
// attempt of an acquisition is then a script (lock_fifo_acquire) rather
// than the plain SET NX GET PX, and a release is lock_fifo_release; each
// is still one round trip.
func WithFIFO(on bool) Option {
	return func(c *config) error {
		c.fifo = on
		return nil
	}
}

// fifoKind is the lease kind of a Mutex made WithFIFO: the lock's own
// hook names, refresh and verify scripts and instruments, with the
// first-in first-out acquire and release scripts, which take the lock key
// and its queue's two keys.
var fifoKind = &engine.LeaseKind{
	Primitive: "lock",
	AcquireOp: hooks.LockAcquire, RenewOp: hooks.LockRenew, VerifyOp: hooks.LockVerify, ReleaseOp: hooks.LockRelease,
	Acquire: fifoAcquire, Refresh: lockcore.Refresh, Verify: lockcore.Verify, Release: fifoRelease,
	Abandon:  fifoAbandon,
	WaitFlag: true, Queued: true,
	Metrics: lockcore.Metrics,
	Attrs:   []attribute.KeyValue{attribute.String("kind", "lock")},
}

// The first-in first-out scripts, each next to its decoder.
var (
	fifoAcquire = engine.NewScript("lock_fifo_acquire", decodeFIFOGrant)
	fifoRelease = engine.NewScript("lock_fifo_release", decode.Release)
	// fifoAbandon is the cleanup of an ambiguous acquisition: the token
	// leaves the queue and leaves a tombstone in the lock key
	// (engine.LeaseKind.Abandon).
	fifoAbandon = engine.NewScript("lock_fifo_abandon", decode.Release)
)

// decodeFIFOGrant reads lock_fifo_acquire's reply: 'OK' (acquired), the
// holder's PTTL (an integer >= 0: refused, retry then) or -2 (refused
// behind earlier waiters: no retry time).
func decodeFIFOGrant(v any) (decode.Grant, bool) {
	switch r := v.(type) {
	case string:
		return decode.Grant{Acquired: true}, r == "OK"
	case int64:
		switch {
		case r >= 0:
			return decode.Grant{RetryIn: decode.RetryIn(r)}, true
		case r == -2:
			return decode.Grant{}, true
		}
	}
	return decode.Grant{}, false
}

// fifoKeys returns the first-in first-out scripts' keys of the lock key
// (without the prefix): the key and its queue's two keys, in its Cluster
// slot, prefixed and slot-checked. Nothing is sent.
func fifoKeys(e *engine.Engine, key string) (engine.Keys, error) {
	prefix := e.Prefix()
	full := prefix + key
	s := slot.Of(full)
	queue := slot.KeyIn(full+"\x00fifo", s)
	alive := slot.KeyIn(full+"\x00fifo-alive", s)
	if queue == "" || alive == "" {
		return engine.Keys{}, check.InvalidArgument("key", "no queue key lies in its Cluster slot")
	}
	return e.NamedKeys([]string{"key", "queue", "queue"}, key, queue[len(prefix):], alive[len(prefix):])
}
