// Package fencing is a lock that hands out fencing tokens: every
// acquisition draws the next value of a persistent counter, in the same
// script that takes the lease, so the holders of one lock receive strictly
// increasing tokens. The protected resource remembers the newest token it
// accepted and rejects writes carrying an older one; a holder that paused
// past its lease (GC, VM migration, partition) and wakes up believing it
// still holds the lock is stopped at the resource, not by hope.
//
//	mu, err := fencing.New(coord, "{invoice:42}:lease", "{invoice:42}:fence")
//	if err != nil {
//		return err
//	}
//	pdfs, err := fencing.NewGuarded(coord, "{invoice:42}:pdf")
//	if err != nil {
//		return err
//	}
//	lk, err := mu.TryAcquire(ctx, 30*time.Second)
//	if err != nil {
//		return err // coordination.ErrNotAcquired when another holder has it
//	}
//	defer func() {
//		if _, err := lk.Release(context.WithoutCancel(ctx)); err != nil {
//			log.Printf("release: %v", err) // retried in the background
//		}
//	}()
//	lk.KeepAlive()
//	ok, newest, err := pdfs.Set(ctx, lk.FencingToken(), pdf, 0)
//	if err != nil {
//		return err
//	}
//	if !ok {
//		return fmt.Errorf("a newer holder (token %d) wrote first", newest)
//	}
//
// A [Mutex] ([New]) is the lock on its two keys, created without I/O;
// [Mutex.TryAcquire] and [Mutex.Acquire] return a held [Lock] carrying its
// fencing token. A [Guarded] ([NewGuarded]) is a value in Redis that only
// the newest token may write.
//
// # Keys
//
// Two keys that must share one Cluster slot (one {hash tag}): the lease key
// (a hash {owner, fence} with a TTL, plus a holder field when acquired
// with [WithHolder]) and the counter key, which names the counter. The
// counter itself (since issue 24) is a field, named after the prefixed
// counter key, of the shared counter hash of that slot
// ("<prefix>coordination:fences:{N}", never expiring): the counters of
// all the fenced names of a slot share it, so the number of persistent
// keys does not grow with the number of names (about 28 bytes a name
// instead of about 56 for a key of its own; docs/locks.md has the
// figures). A counter key written by an earlier version (an integer
// string) is folded in by the first acquisition (its next token is that
// value + 1) and left holding "moved" for 7 days, which earlier versions
// refuse. coordctl fence retire deletes the counter of a name no longer
// used (its sequence then starts again at 1). [New] checks the slot of the
// prefixed keys before anything is sent. The acquire script validates the
// counter before
// writing: a counter (or its shared hash) of another Redis type, with a TTL, not a canonical
// integer, negative, beyond int64, or at 9223372036854775807 fails the
// acquisition without creating a lease (coordination.ErrBadState naming
// the counter key; the message says which). Tokens
// are exact over the whole int64 range: the script returns them as decimal
// strings, never as Lua numbers (doubles, exact only up to 2^53).
//
// # Enforcing tokens at the resource
//
// [Guarded.Set] is a compare-and-write in Redis: it stores a value only if
// the token is at least the newest one the resource accepted. For SQL, keep
// a fence column and write with
//
//	UPDATE t SET ..., fence = $token WHERE id = $id AND fence <= $token
//
// treating zero rows as a stale holder. The fenced-sql example
// (examples/fenced-sql, its own module) shows it end to end with SQLite:
// a holder paused past its lease writes after its successor, and the
// database refuses the late write.
//
// # Adopting, reading and forcing
//
// [Mutex.Adopt] takes a held lock back by its owner token after a restart,
// with its fencing token, its local deadline the lease key's remaining TTL
// (not extended: Refresh, then KeepAlive). [Mutex.Holder] reads the
// holder's owner token, fencing token and remaining TTL, writing nothing.
// [Mutex.ForceRelease] deletes the lease if a named token holds it,
// whoever calls, waking blocked acquirers; the counter stays, so the next
// holder's fencing token is larger and the resource keeps rejecting the
// forced holder's writes after the next holder's. Hooks see FENCED LOCK
// ADOPT, FENCED LOCK READ and FENCED LOCK FORCE RELEASE; the script is
// fencing_holder (and fencing_release).
//
// # What holds and what does not
//
// Tokens strictly increase within one retained Redis history. They are not
// monotonic across a failover that loses the counter's last increments
// (replication is asynchronous), a restore from an older snapshot, a
// FLUSHALL, or eviction of the counter (run with a noeviction or volatile-*
// maxmemory policy: the counter has no TTL, so volatile-* never evicts it).
// After such an event a token may be handed out twice. Where fencing must
// survive failover, use a consensus-backed store (etcd's revision,
// ZooKeeper's zxid) for the token; this package does not pretend to be one.
//
// # Restarts, eviction and memory limits
//
// A server restart without persistence forgets the lease and the counter:
// a second holder can acquire at once, and the counter starts again at 1,
// handing out tokens that were handed out before. Never silently: a
// coordinator that handed out a higher token from the same counter counts
// it in coordination.fencing.counter_resets and logs a warning (a
// coordinator that never saw a higher token cannot tell; the resource's
// check, which keeps the newest token it accepted, is what refuses the
// repeated ones). Under a volatile-* eviction policy the lease may be
// evicted before it expires (a second holder), but never the counter,
// which has no TTL: the next token continues. Under maxmemory with
// noeviction an acquisition fails with the server's OOM error (terminal)
// before writing anything; renewals and releases still work.
//
// Renewal keeps the token. Release and renewal are owner-checked by the
// holder's random owner token. The handle's lifecycle (Remaining, Context
// cancelled on loss, KeepAlive, lost-reply cleanup, re-send safety) is that
// of package lock. The cleanup of an ambiguous acquire leaves a tombstone
// (the lease hash {owner: token!} alone, for the TTL, at least 5 s and at
// most a minute), so that the acquire's request, if it reaches the server
// after the cleanup, takes nothing: it sets no TTL and draws no fencing
// token. Acquisitions abandoned close together (a network blip hitting
// several clients) share one tombstone, a list of their tokens
// ({owner: tokA!tokB!}, at most 8, the oldest dropped for a ninth; its TTL
// the longest of theirs), whose every token's late request is refused.
// Any other acquire takes a tombstone over as a free lease, with the
// next token, in its one script; Holder and Adopt read it as free; coordctl
// inspect shows its abandoned tokens. A request delayed longer than the
// tombstone lives, or past another holder's whole hold and release, can
// still take the lease for at most its TTL. A re-sent acquire with the same owner token finds its own
// lease and returns the same fencing token without touching the counter; a
// release deletes the lease key, and a re-sent release whose first send
// released reports Released (as package lock's does).
//
// All functions and methods are safe for concurrent use; a Mutex or a
// Guarded is reusable for as long as its coordinator lives.
//
// # Size bounds
//
// Keys are at most 1 KiB, a [WithHolder] holder at most 256 bytes and a
// [Guarded.Set] value at most 16 MiB; a longer one fails with
// coordination.ErrInvalidArgument naming "leaseKey", "fenceKey", "key",
// "holder" or "value", nothing sent.
package fencing
