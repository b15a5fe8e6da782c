// Package lock is an owner-token lock on one Redis key: at most one holder
// at a time, each holder identified by a random owner token that every
// renewal, verification and release checks, so an expired holder can never
// touch its successor's lock.
//
//	l, err := lock.TryAcquire(ctx, coord, "jobs:nightly", 30*time.Second)
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
// [TryAcquire] returns at once; [Acquire] waits without polling: it
// subscribes to the key's release channel (one Pub/Sub connection per
// coordinator, shared by every waiter), then sleeps until the holder
// releases or its TTL, as the server reported it, runs out. Every hot-path
// operation is one round trip: an acquisition's first attempt is the plain
// command SET key token NX GET PX ttl (so the server needs Redis 7.0 or
// later, or Valkey), and a blocked waiter's later attempts, refresh, verify
// and release are one script each (EVALSHA; EVAL only after NOSCRIPT).
//
// # Storage
//
// The lock key is a string holding the holder's owner token ([Lock.Token]),
// with the lock's TTL. A blocked waiter that finds the lock held appends
// "+" to the value before it sleeps; the release publishes on the Pub/Sub
// channel "coordination:" followed by the prefixed key only when that mark
// is there, so a lock nobody waits for is released without a notification
// (and without its cost; on Redis Cluster a PUBLISH reaches every node).
// Inspect a lock with GET and PTTL.
//
// A held [Lock] estimates its remaining time locally ([Lock.Remaining]),
// measured from the instant before the acquire request was sent, minus a
// drift allowance of 1% + 2 ms (capped at half the TTL): TTLs are accepted
// from 1 ms, but below about 10 ms a holder has almost no time of its own. Its [Lock.Context] is cancelled when the
// lock is released, when a refresh or verify finds it gone, or when the
// local estimate reaches zero without a successful renewal; protected work
// should run under that context. [Lock.KeepAlive] renews at a third of the
// TTL.
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
// # Lost replies and re-sends
//
// go-redis re-sends a command after a read timeout or a broken connection
// (MaxRetries, 3 by default), so an acquire may run twice on the server;
// finding the caller's own token (SET NX GET returns it) counts as success,
// so a re-send yields one lock, whose TTL runs from the first send. When an acquire's outcome is unknown to the caller (a timeout, a
// cancelled context, or an error reply after a re-send: see
// coordination.IsAmbiguous), the lock may exist on the server: a background
// owner-checked release removes it. Release marks the handle released at
// once and retries a failed release in the background until the lock's
// TTL has passed. Per-call context deadlines bound
// network I/O only when the client has ContextTimeoutEnabled: true;
// otherwise go-redis' ReadTimeout and WriteTimeout apply.
//
// All functions and methods are safe for concurrent use.
package lock
