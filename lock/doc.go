// Package lock is an owner-token lock on one Redis key: at most one holder
// at a time, each holder identified by a random owner token that every
// renewal, verification and release checks, so an expired holder can never
// touch its successor's lock.
//
//	mu, err := lock.New(coord, "jobs:nightly") // no I/O; reuse it for every run
//	if err != nil {
//		return err
//	}
//	l, err := mu.TryAcquire(ctx, 30*time.Second)
//	if errors.Is(err, coordination.ErrNotAcquired) {
//		return nil // another replica runs it
//	}
//	if err != nil {
//		return err
//	}
//	defer func() {
//		if _, err := l.Release(context.WithoutCancel(ctx)); err != nil {
//			log.Printf("release: %v", err) // retried in the background
//		}
//	}()
//	l.KeepAlive()
//	return runJob(l.Context()) // cancelled if the lock is lost
//
// # Operations
//
// [New] returns a [Mutex] for one key without sending anything; it is safe
// for concurrent use and serves any number of acquisitions, each returning
// a new [Lock] with its own owner token. [Mutex.TryAcquire] returns at
// once; [Mutex.Acquire] waits without polling: it subscribes to the key's
// release channel (one Pub/Sub connection per coordinator, shared by every
// waiter), then sleeps until the holder releases or its TTL, as the server
// reported it, runs out. [New] and [NewFieldSet] succeed after the
// coordinator's Shutdown began; the acquisitions then fail with an error
// wrapping coordination.ErrClosed, sending nothing. Every hot-path operation
// is one round trip: an acquisition's first attempt is the plain command
// SET key token NX GET PX ttl (so the server needs Redis 7.0 or later, or
// Valkey), and a blocked waiter's later attempts, refresh, verify and
// release are one script each (EVALSHA; EVAL only after NOSCRIPT).
//
// # Storage
//
// The lock key is a string holding the holder's owner token ([coordination.Lease.Token]),
// with the lock's TTL. A blocked waiter that finds the lock held appends
// "+" to the value before it sleeps; the release notifies on the key's
// release channel (sharded Pub/Sub where the server has it; see package
// coordination) only when that mark is there, so a lock nobody waits for
// is released without a notification (and without its cost).
// Inspect a lock with GET and PTTL.
//
// A held [Lock] estimates its remaining time locally ([coordination.Lease.Remaining]),
// measured from the instant before the acquire request was sent, minus a
// drift allowance of 1% + 2 ms (capped at half the TTL): TTLs are accepted
// from 1 ms, but below about 10 ms a holder has almost no time of its own. Its [coordination.Lease.Context] is cancelled when the
// lock is released, when a refresh or verify finds it gone, or when the
// local estimate reaches zero without a successful renewal; protected work
// should run under that context. [coordination.Lease.KeepAlive] renews every third of the
// TTL, counted from the acquisition: at once when it is called later than that.
//
// # First-in first-out order
//
// By default a release wakes every blocked waiter and the first attempt
// to arrive wins: a hand-off then costs about one command per waiter, and
// a waiter may lose any number of races. [WithFIFO] grants the lock to
// blocked waiters in the order they arrived instead:
//
//	mu, err := lock.New(coord, "reports:nightly", lock.WithFIFO(true))
//
// A waiter that finds the lock held joins a queue kept in two keys beside
// the lock key (in its Cluster slot: the lock key followed by "\x00fifo"
// or "\x00fifo-alive" and a hash tag), and a release wakes only the
// queue's head, by publishing its owner token: a hand-off costs about
// three commands whatever the queue's length (the release, the head's
// acquisition, one attempt of the next head). [Mutex.TryAcquire] does not
// jump the queue: while any live waiter is queued it is refused with
// coordination.ErrNotAcquired, even when the lock is free at that
// instant. A waiter whose context ends leaves the queue (a background
// owner-checked release, which also wakes the next head when the lock is
// free). A queued waiter tries again at least every second, and each
// attempt keeps it in the queue for 3 s: a waiter that dies without
// leaving (its process killed) is removed once that passes, by the next
// attempt or release that finds it at the head, so it holds up the
// waiters behind it for about 4 s at most. Every Mutex of a key must use
// the same order: a default-order acquisition does not look at the
// queue. Every acquisition attempt and release is one script
// (lock_fifo_acquire, lock_fifo_release; refresh and verify are the
// default order's).
//
// # What holds and what does not
//
// Expiry is decided by the server's clock (PX on the key); clients' clocks
// only shorten their own estimate. Mutual exclusion holds while Redis keeps
// its data and holders stop work when their context is cancelled. It does
// not hold across a failover that loses the last writes (Redis replication
// is asynchronous), and a holder paused longer than its TTL (GC, VM
// suspension) may act after its lock expired without knowing: for writes
// that must never interleave, use package fencing and let the resource
// reject stale fencing tokens.
//
// # Restarts, eviction and memory limits
//
// A server restart without persistence forgets every lock: the holder's
// Verify and Refresh report false (its keep-alive reports the lock lost
// and cancels its context), and a second holder can acquire it at once.
// Eviction under a volatile-* policy forgets a lock early in the same way
// (an allkeys-* policy too); a named lease in a hash field is not evicted
// by volatile-* (field TTLs do not make the hash volatile), only by
// allkeys-*. Under maxmemory with noeviction an acquisition fails with the
// server's OOM error (terminal) before writing anything, while renewals and
// releases still work. The fault matrix in docs/faults.md lists every fault with
// the test that shows it.
//
// # Lost replies and re-sends
//
// go-redis re-sends a command after a read timeout or a broken connection
// (MaxRetries, 3 by default), so an acquire may run twice on the server;
// finding the caller's own token (SET NX GET returns it) counts as success,
// so a re-send yields one lock, whose TTL runs from the first send. A
// refresh or verify re-sent reports what the first send did. A release
// deletes the lock key and leaves nothing behind; a re-sent release whose
// first send released reports Released, not AlreadyReleased, decided from
// the handle's own state (package coordination, "go-redis behaviour to
// know", says how, and its one edge). When an acquire's outcome is unknown
// to the caller (a timeout, a cancelled context, or an error reply after a
// re-send: see coordination.IsAmbiguous), the lock may exist on the server:
// a background owner-checked cleanup removes it and leaves in its place a
// tombstone of the abandoned token (the token followed by '!', for the
// lock's TTL, at least 5 s and at most a minute), so that the acquisition's
// request, if it is still on its way (a retransmission, a stalled link) and
// reaches the server after the cleanup, takes nothing: the lock is never
// re-created for nobody. A tombstone holds nothing: any other acquisition
// takes it over (at the cost of one more round trip for the first attempt
// after it), and refresh, verify and release of other tokens never match
// it. What remains: a request delayed longer than the tombstone's life, or
// past another holder's whole hold and release, can still take the lock,
// for at most its TTL. A FieldSet's field lease is cleaned up the same
// way, the tombstone in its field (with the field's own expiry); field
// leases abandoned close together share it, a list of their tokens
// (tokA!tokB!, at most 8, the oldest dropped for a ninth), whose every
// token's late request is refused. Release
// marks the handle
// released at once and retries a failed release in the background until the
// lock's TTL has passed. Per-call context deadlines bound network I/O only
// when the client has ContextTimeoutEnabled: true; otherwise go-redis'
// ReadTimeout and WriteTimeout apply.
//
// # Adopting, reading and forcing
//
// [Mutex.Adopt] takes a held lock back by its owner token, for a process
// that restarted and kept [coordination.Lease.Token]: one script reads the
// key's owner and PTTL; the Lock returned is an acquired one whose local
// deadline is that remaining TTL (the TTL is not extended: Refresh, then
// KeepAlive). [Mutex.Holder] reads the holder's token and remaining TTL
// ([coordination.Holder]), writing nothing. [Mutex.ForceRelease] deletes
// the lock if a named token holds it, whoever calls, with the holder's own
// release script (so blocked acquirers are woken at once), sent at most
// once. [FieldSet.Adopt], [FieldSet.Holder] and [FieldSet.ForceRelease] do
// the same for one field. Hooks see LOCK ADOPT, LOCK READ and LOCK FORCE
// RELEASE (LEASE ... for a field); the scripts are lock_holder and
// lease_holder (and the release scripts).
//
// # Named leases in hash fields
//
// A [FieldSet] ([NewFieldSet], no I/O) holds many named leases in one hash:
// each field is a lease of its own, with its own holder and its own expiry,
// so that a worker pool can own shards, partitions or jobs by name in one
// key (one key also on Redis Cluster, no hash tag needed):
//
//	shards, err := lock.NewFieldSet(coord, "workers:shards") // no I/O
//	if err != nil {
//		return err
//	}
//	lease, err := shards.TryAcquire(ctx, "shard:7", 30*time.Second)
//	if errors.Is(err, coordination.ErrNotAcquired) {
//		return nil // another worker owns shard 7
//	}
//	if err != nil {
//		return err // coordination.ErrUnsupportedServer before Redis 7.4 or Valkey 9.0
//	}
//	defer func() {
//		if _, err := lease.Release(context.WithoutCancel(ctx)); err != nil {
//			log.Printf("release: %v", err) // retried in the background
//		}
//	}()
//	lease.KeepAlive()
//	return processShard(lease.Context(), 7) // cancelled if the lease is lost
//
// A [FieldLease] behaves exactly like a [Lock]: owner-checked Refresh,
// Verify and Release, KeepAlive at a third of the TTL, a context cancelled
// on release or loss, a background owner-checked release after an
// ambiguous acquire, and the same one release semantics. They live in this
// package because they are locks (one holder each, owner tokens, the same
// handle) that happen to share a key; their hook operations are LEASE
// ACQUIRE, LEASE RENEW, LEASE VERIFY and LEASE RELEASE (primitive lock),
// and their instruments coordination.lock.* with kind=lease.
//
// Layout, for tools that decode it: the key is a hash; each field is one
// lease, named by the field (any non-empty bytes), whose value is the holder's owner
// token (22 characters, a UUID v4 in base64url) and whose expiry is the field's own
// (HPEXPIRE, server time, whole milliseconds). Inspect it with
//
//	HGETALL <key>
//	HPTTL <key> FIELDS <n> <field>...
//
// The hash never has a key-level TTL: acquire and refresh refuse a hash
// that has one (coordination.ErrBadState, nothing written), since it would
// end every lease in it at once. A field whose value is not the caller's
// token counts as held by someone else (one without expiry, which the
// library never writes, as held until someone deletes it). A hash the
// library did not write is therefore not refused: its fields count as
// held and an acquisition of another field adds that field to it, so give
// a FieldSet a key of its own.
// The hash disappears with its last field. A release notifies on the
// key's release channel followed by a NUL byte and the field (see package
// coordination), which only that field's waiters watch; an expiry publishes
// nothing, and waiters wake at the field's remaining TTL as the server
// reported it.
//
// Hash-field expiration exists on Redis 7.4 and later and Valkey 9.0 and
// later (not on Redis 7.0-7.2, Valkey 8, or miniredis, which lacks
// HPEXPIRE). Every script calls HPEXPIRETIME first, so on a server without
// it the first operation fails before writing anything, with an error
// matching coordination.ErrUnsupportedServer that names the feature and the
// versions that have it. The value of a field is only ever written when
// the field is created, and always together with its expiry, so no write
// path can leave a lease without TTL (Redis drops a field's TTL when HSET
// rewrites it).
//
// Re-sends: an acquire re-sent by go-redis finds its own token and reports
// acquired (one lease); a re-sent refresh sets the same expiry again; a
// re-sent release whose first send released reports Released, as a
// lock's does (nothing is left in the hash).
//
// [FieldSet.TryAcquire] returns at once; [FieldSet.Acquire] waits for the
// field as [Mutex.Acquire] waits for a lock.
//
// All functions and methods are safe for concurrent use.
//
// # Size bounds
//
// Keys and field names are at most 1 KiB; a longer
// one fails with coordination.ErrInvalidArgument naming "key" or "field",
// nothing sent.
package lock
