package semaphore

import (
	"time"

	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/slot"
)

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

// WithFIFO makes the Semaphore grant permits to its blocked waiters in the
// order they arrived (first in, first out) when on is true; the default
// (false) lets every waiter race for the permits when some are released.
//
// In the first-in first-out order a waiter of [Semaphore.Acquire] (or
// AcquireN) that finds too few permits free (or others waiting) joins a
// queue kept beside the semaphore key, and a release wakes only the
// queue's head: a hand-off costs the same few commands (the release, the
// head's acquisition, one attempt of the next head) whatever the number of
// waiters, where the default order wakes every waiter at each release
// (about as many commands as there are waiters). The head is granted only
// when all the permits it asks for are free, and nobody behind it is
// granted before it: a waiter for many permits is not starved by smaller
// requests (they wait behind it, even when enough permits for them are
// free). [Semaphore.TryAcquire] and TryAcquireN never jump the queue: they
// are refused with coordination.ErrNotAcquired while any live waiter is
// queued. A waiter whose context ends leaves the queue at once (in the
// background, best effort). A waiter that dies without leaving (its
// process killed) counts as alive for 3 s after its last attempt (queued
// waiters try again at least every second, whatever [WithRecheck] says
// when it is longer); then the next attempt or release that finds it at
// the head removes it, so it holds up the waiters behind it for at most
// about 4 s. The cost of that bound: a queued waiter sends one command per
// second while it waits.
//
// Every Semaphore of a key must use the same order: a default-order caller
// takes free permits without looking at the queue. The queue is two keys
// in the semaphore key's Cluster slot: the key followed by "\x00fifo" and
// a hash tag, a sorted set of the waiters' permit ids ("P:<n>:<token>") by
// arrival, and the same followed by "\x00fifo-alive", a hash of each
// waiter's alive time; both expire 3 s after the last waiter's attempt.
// An acquisition is then semaphore_fifo_acquire, a release
// semaphore_fifo_release, and the cleanup of an ambiguous acquisition
// semaphore_fifo_abandon (it leaves the queue and the tombstone); each is
// still one round trip. [Semaphore.SetCapacity] raising the capacity and
// [Semaphore.Resume] do not wake the queue's head: it finds the permits
// at its next re-check (within a second).
func WithFIFO(on bool) Option {
	return func(c *config) error {
		c.fifo = on
		return nil
	}
}

// fifoConfig is a first-in first-out Semaphore's acquisition: its keys (the
// semaphore key and its queue's two), its scripts' extra arguments (the
// capacity, the alive time in ms) and its waiters' re-check period.
type fifoConfig struct {
	keys    engine.Keys
	extra   []any
	recheck time.Duration
}

// fifoKind is the lease kind of a Semaphore made WithFIFO: the permits'
// hook names, refresh and verify scripts and instruments, with the
// first-in first-out acquire, release and cleanup scripts, which take the
// semaphore key and its queue's two keys.
var fifoKind = &engine.LeaseKind{
	Primitive: primitive,
	AcquireOp: hooks.SemaphoreAcquire, RenewOp: hooks.SemaphoreRenew, VerifyOp: hooks.SemaphoreVerify, ReleaseOp: hooks.SemaphoreRelease,
	Acquire: fifoAcquireScript, Refresh: refreshScript, Verify: verifyScript, Release: fifoReleaseScript,
	Abandon:  fifoAbandonScript,
	WaitFlag: true, Queued: true,
	Metrics: leaseMetrics,
}

// The first-in first-out scripts, each next to its decoder.
var (
	fifoAcquireScript = engine.NewScript("semaphore_fifo_acquire", decodeFIFOGrant)
	fifoReleaseScript = engine.NewScript("semaphore_fifo_release", decode.SoleRelease)
	// fifoAbandonScript is the cleanup of an ambiguous acquisition: the
	// member leaves the queue and leaves a tombstone
	// (engine.LeaseKind.Abandon).
	fifoAbandonScript = engine.NewScript("semaphore_fifo_abandon", decode.SoleRelease)
	// fifoForceRelease is ForceRelease's release: the holder's, waking the
	// queue's head, sent at most once.
	fifoForceRelease = engine.NewScript("semaphore_fifo_release", decode.SoleRelease).Once()
)

// decodeFIFOGrant reads semaphore_fifo_acquire's reply: 0 (acquired),
// retry_ms (too few permits free: >= 1 until the earliest live permit
// expires, -1 when none does), -2 (refused behind earlier waiters: no
// retry time) or -3 (refused while draining, as decodeGrant reads it).
func decodeFIFOGrant(v any) (decode.Grant, bool) {
	if r, ok := v.(int64); ok && r == -2 {
		return decode.Grant{}, true
	}
	return decodeGrant(v)
}

// newFIFO returns the first-in first-out acquisition of the semaphore key
// (without the prefix) of the given capacity: its keys, in the key's
// Cluster slot, prefixed and slot-checked, and its arguments. Nothing is
// sent.
func newFIFO(e *engine.Engine, key string, capacity int64, recheck, live time.Duration) (*fifoConfig, error) {
	prefix := e.Prefix()
	full := prefix + key
	s := slot.Of(full)
	queue := slot.KeyIn(full+"\x00fifo", s)
	alive := slot.KeyIn(full+"\x00fifo-alive", s)
	if queue == "" || alive == "" {
		return nil, check.InvalidArgument("key", "no queue key lies in its Cluster slot")
	}
	keys, err := e.NamedKeys([]string{"key", "queue", "queue"}, key, queue[len(prefix):], alive[len(prefix):])
	if err != nil {
		return nil, err
	}
	return &fifoConfig{keys: keys, extra: []any{capacity, live.Milliseconds()}, recheck: recheck}, nil
}
