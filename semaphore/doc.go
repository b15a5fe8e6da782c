// Package semaphore is a distributed counting semaphore on Redis: at most
// Capacity permits are held at once across every process that uses the
// same key, each holder's permits expire on the server unless renewed, and
// a holder may take several permits at once (all or nothing).
//
//	sem, err := semaphore.New(coord, "batch:42:permits", 4)
//	if err != nil {
//		return err
//	}
//	p, err := sem.TryAcquire(ctx, 30*time.Second)
//	if errors.Is(err, coordination.ErrNotAcquired) {
//		return nil // all 4 are taken
//	}
//	if err != nil {
//		return err
//	}
//	defer func() {
//		if _, err := p.Release(context.WithoutCancel(ctx)); err != nil {
//			log.Printf("release: %v", err) // retried in the background
//		}
//	}()
//	p.KeepAlive()
//	return export(p.Context()) // cancelled if the permit is lost
//
// # Storage
//
// One sorted set per semaphore, so the key needs no hash tag on Redis
// Cluster. Each holder is one member, "P:<n>:<token>", holding n permits,
// scored by its expiry in server-time milliseconds (+inf for a permit
// without expiry). Reserved members, the only ones the library scores below
// zero, are records: "capacity", scored by the negated capacity, records the
// capacity the contenders agreed on; "multi" (score -1) is there while a
// holder of more than one permit may be live; "waiting" (score -1) while a
// blocked [Semaphore.Acquire] (or [Semaphore.Drain]) was refused and no
// release has notified yet. The key's TTL follows the latest expiry, and
// the key is deleted when the last permit is released, so an abandoned
// semaphore disappears by itself. A capacity set in the key
// ([Semaphore.SetCapacity], [Semaphore.Drain]) is the record
// "capacity-set" (the negated capacity) in place of "capacity", with
// "draining" (score -1) while draining; such a key has no TTL and stays
// when no permit is held (see Capacity). A holder's member scored between
// -1 and 0 is no permit but the tombstone of an abandoned acquisition (see
// "Lost replies and failed releases").
// Inspect it with
//
//	ZRANGE <key> 0 -1 WITHSCORES
//
// Every operation is one Lua script on that one key, in one round trip,
// using the server's clock, and a bounded number of Redis calls whatever
// the number of holders: the permits in use are the live holders, counted
// with ZCOUNT (and, while "multi" is there, read and summed). A release
// publishes a notification only while "waiting" is there. Expired permits
// are pruned by the next acquisition; there is no cleanup worker. The
// pruning goes by score, not by name: a member someone else added with a
// score in the past (a permit's expiry already gone) is taken for an
// expired permit and removed with them, unread (reading every expired
// member's name would cost every acquisition a command).
//
// Every verb checks what it goes by before it writes anything, and refuses
// a key outside the layout with an error matching
// coordination.ErrBadState, the key left as it was: the records (a
// capacity that is an integer in 1..[MaxCapacity], the other records
// below 0), the caller's own permit's expiry (a whole millisecond, at most
// the longest TTL from now, or +inf), and the other scores it reads: the
// earliest live permit's (a refusal's retry time), the highest other
// permit's when a release or a shorter refresh moves the key's TTL from the
// caller's permit to it, the latest permit's when an acquisition or a
// refresh gives a key left without a TTL its TTL back. Scores no verb reads
// are left unchecked, and so are members below zero that are not records
// (checking every one would cost every call two more commands): such a key
// works until a verb reads the score. `coordctl inspect KEY` reports every
// member outside the layout, and a TTL that does not follow the permits (a
// permit without expiry on a key with a TTL, or a key without a TTL and no
// such permit), exiting 1.
//
// # Capacity
//
// Until a capacity is set in the key, every contender must use the same
// capacity. While any permit is live, an acquisition with a different
// capacity fails with an error matching coordination.ErrConfigMismatch and
// writes nothing; once no permit is live, the next acquisition records its
// own capacity.
//
// [Semaphore.SetCapacity] sets the capacity in the key instead, in one
// round trip, while permits are live: from then on it is in force for
// every Semaphore on the key, in every process, whatever capacity [New]
// was given (no ErrConfigMismatch), until the next SetCapacity. Raising it
// wakes the blocked [Semaphore.Acquire] callers at once, and they are
// granted as the new capacity allows. Lowering it revokes nothing: held
// permits stay valid (refresh, verify and release work as before) until
// released or expired, and nothing is granted until the permits in use
// fall below the new capacity. [Semaphore.Capacity] still reports the
// capacity given to New, which bounds the permits one caller takes at
// once; [Semaphore.State] reads the capacity in force. A key with a
// capacity set keeps no TTL and is not deleted with its last permit, so
// the setting survives an idle period; DEL the key (with no permit held)
// to return to the contenders' capacity.
//
// [Semaphore.Drain] stops every grant on the key (for every process) and
// waits, bounded by its context, until no permit is held: released, or
// expired for a holder that crashed. The drain lasts until
// [Semaphore.Resume], which grants again and wakes the blocked
// acquisitions; the capacity may be changed meanwhile. Drain sets the
// capacity in force in the key as SetCapacity does.
//
// The capacity in force at a grant is what the acquisition compares with,
// atomically: at most that many permits are held right after any grant. A
// grant never exceeds the capacity in force at that instant, but permits
// granted before a lowering stay until released.
//
// # Permits without expiry
//
// Every permit has a lease: a TTL below 1 ms (0 included) is refused by
// the acquisitions and by [coordination.Lease.Refresh] with
// coordination.ErrInvalidArgument naming ttl, nothing sent, so a permit of
// a holder that crashed always ends at its expiry. Hold a permit for as
// long as needed with [coordination.Lease.KeepAlive]. A member without
// expiry (scored +inf) can only be written by hand; [Semaphore.State]
// counts such holders in NoExpiry, and each occupies capacity (and pins
// the capacity value) until removed. To recover, list them and remove the
// member:
//
//	ZRANGEBYSCORE <key> +inf +inf
//	ZREM <key> P:<n>:<token>
//
// or stop every holder and DEL the key. (<key> includes the coordinator's
// key prefix; [coordination.Lease.Token] and [Permit.N] name a holder's member.)
//
// # Waiting
//
// [Semaphore.TryAcquire] and [Semaphore.TryAcquireN] never queue or wait.
// [Semaphore.Acquire] and [Semaphore.AcquireN] wait without polling: after
// a refused attempt they subscribe to the key's Pub/Sub channel (one
// connection per coordinator, shared by every waiter) and try again when a
// release is announced, when the earliest live permit expires, or at the
// re-check period ([WithRecheck]) in case a message was lost. Every waiter
// wakes on every release and retries; in this, the default order, there
// is no fairness and no queue: a waiter for many permits may wait while
// smaller requests keep succeeding.
//
// [WithFIFO] (true) grants permits to blocked waiters in the order they
// arrived instead: a refused waiter joins a queue kept beside the key (two
// keys in its Cluster slot), a release wakes only the queue's head, and
// the head is granted only when all the permits it asks for are free, with
// nobody behind it (nor TryAcquire) taking permits before it, so a large
// request is not starved. A hand-off costs about three commands whatever
// the number of waiters (the default order: about one per waiter). A
// waiter whose context ends leaves the queue at once; one that dies leaves
// it within about 4 s (queued waiters try again every second). Every
// Semaphore of a key must use the same order.
//
// # What holds, and what does not
//
// Within one Redis history (one primary, no failover), at most Capacity
// permits are live at any server instant, a holder's refresh or release
// never touches another holder's permits, and an expired holder cannot
// revive its permit. Expiry uses only the server's clock, so client clock
// jumps do not affect it; [coordination.Lease.Remaining] is a local estimate measured
// from before the request was sent, minus a drift allowance, so it errs
// towards "expired".
//
// It is not consensus. Asynchronous replication means a failover can lose
// recent acquisitions and releases (the new primary may grant permits
// that were already granted), and a server whose clock jumps expires
// permits early or late. A GC pause longer than a permit's TTL lets the
// holder run on after its permit expired: stop work when [coordination.Lease.Context]
// is cancelled, and use a fencing token (package fencing) where stale
// holders must be rejected by the resource itself.
//
// # Restarts, eviction and memory limits
//
// A server restart without persistence, or eviction of the key (it has a
// TTL, so volatile-* policies evict it too), forgets every permit:
// holders' Verify reports false, their keep-alive reports the permit lost,
// and Capacity new permits can be taken at once while the old holders may
// still be working. Under maxmemory with noeviction an acquisition is
// refused with the server's OOM error (terminal, not ambiguous) before it
// writes anything. A renewal is refused the same way (it moves the
// holder's deadline with ZADD), so a keep-alive reports the permit lost; a
// release still works. The fault matrix (docs/faults.md) lists
// every fault with the test that shows it.
//
// # Lost replies and failed releases
//
// go-redis re-sends a command after a lost reply (MaxRetries, 3 by
// default). Acquire, refresh and release are safe to re-run: a re-sent
// acquisition finds its own member and does not take more permits, and a
// re-sent release whose first send released reports Released, decided from
// the handle's own state with nothing left on the server (package
// coordination, "go-redis behaviour to know", says how, and its one edge).
// When an acquisition's outcome is ambiguous (a timeout, a cancelled
// context, a broken connection, or a lost reply followed by a LOADING or
// READONLY reply to the re-send; see coordination.IsAmbiguous), the permits
// may exist on the server: a background owner-checked cleanup gives them
// back and leaves in their place a tombstone of the acquisition's member
// (the same member, scored -(its expiry in ms)/2^43, between -1 and 0), for
// the permits' TTL, at least 5 s and at most a minute (a minute for a
// permit without expiry), so that the acquisition's request, if it is
// still on its way (a retransmission, a stalled link) and reaches the
// server after the cleanup, takes nothing: no permit is re-created for
// nobody. A tombstone is no permit and costs no capacity: the permits in
// use, [Semaphore.State], [Semaphore.Holders] and [Semaphore.Adopt] leave
// it out, and every other acquisition goes on at once. Once expired it is
// absent, and the next acquisition prunes it. The key lives at least as
// long as its tombstones (the release of the last permit leaves it until
// they expire), also when the abandoned permit had no expiry. What
// remains: a request delayed longer than the tombstone's life can still
// take its permits, for at most their TTL. Costs: no command is added to
// the grant path; a release (or a shortening refresh) of the permit the
// key expires with, while other members are there, reads the latest
// tombstone (one more Redis call inside its script) only when the next
// permit expires within two minutes: a tombstone expiring later than two
// minutes from the server's time is outside the key's layout
// (coordination.ErrBadState from a verb that reads it), so a later permit
// outlives any.
//
// Release follows the one release semantics of every handle of the
// library: the permit counts as released from the moment [coordination.Lease.Release]
// is called (its context is cancelled with coordination.ErrReleased, its
// keep-alive stops, and a renewal in flight can no longer turn the release
// into a loss). When the release fails with a transient error or a
// cancelled context, the caller gets the error and the owner-checked
// release is retried in the background with jittered backoff, bounded by
// the permits' remaining TTL and a minute; when that gives up, the counter
// coordination.cleanup.abandoned (stage=release) is incremented, a warning
// is logged, and the permit ends at its expiry. A terminal error (NOPERM)
// is not retried: the permit ends at its expiry. A second Release answers
// AlreadyReleased without asking Redis.
//
// Per-call context deadlines bound network I/O only with go-redis'
// ContextTimeoutEnabled option.
//
// # Adopting, reading and forcing
//
// [Semaphore.Adopt] takes a held permit back by its owner token after a
// restart (with its N; its local deadline the permit's remaining TTL, not
// extended: Refresh, then KeepAlive). [Semaphore.Holders] lists the live
// holders ([coordination.Holder] with Permits), writing nothing.
// [Semaphore.ForceRelease] gives back a named token's permits, whoever
// calls, waking the waiters: two round trips (the holders' read finds the
// token's member, then its release, sent at most once). Hooks see
// SEMAPHORE ADOPT, SEMAPHORE READ (Holders, as State) and SEMAPHORE FORCE
// RELEASE; the script is semaphore_holders, whose cost grows with the live
// holders.
//
// # Scripts
//
// The scripts are semaphore_acquire, semaphore_refresh, semaphore_verify,
// semaphore_release, semaphore_read, semaphore_configure (SetCapacity,
// Drain, Resume), semaphore_holders (Holders, Adopt, ForceRelease) and
// semaphore_abandon (the cleanup of an ambiguous acquisition) in
// package lua; a Semaphore made [WithFIFO] acquires with
// semaphore_fifo_acquire, releases with semaphore_fifo_release and cleans
// up with semaphore_fifo_abandon (each also takes the queue's two keys). A permit's id in
// every script is its member "P:<n>:<token>"; acquire takes the member,
// the TTL in milliseconds and the capacity; refresh the member and the
// TTL; verify and release the member only. A release notifies on the
// key's release channel (sharded Pub/Sub where the server has it; see
// package coordination), best effort, when
// a blocked acquisition is waiting (its refused attempt, made after it
// subscribed, adds the "waiting" record). The scripts need Redis 7.0 or
// later (or Valkey): they use ZMSCORE, PEXPIRETIME and PEXPIREAT GT.
//
// # Hooks and metrics
//
// Operations are admitted through the coordinator's hooks as SEMAPHORE
// ACQUIRE (once per TryAcquire/Acquire call, however long it waits),
// SEMAPHORE RENEW, SEMAPHORE VERIFY, SEMAPHORE RELEASE, SEMAPHORE READ
// (State, Holders), SEMAPHORE UPDATE (SetCapacity, Resume), SEMAPHORE
// DRAIN (once per Drain call, however long it waits), SEMAPHORE ADOPT and
// SEMAPHORE FORCE RELEASE.
// A refused acquisition is Succeeded (the answer was no); a blocking one
// that gave up is Canceled. Keep-alive renewals and background cleanups are
// not admitted. The instruments are coordination.semaphore.acquire_wait
// (seconds blocked in Acquire, by result: acquired, gave_up),
// coordination.semaphore.contention (acquisitions that found too few free
// permits, once per call), coordination.semaphore.hold_time (from
// acquiring to releasing or losing), coordination.semaphore.renewal_failures
// (failed keep-alive renewals) and coordination.semaphore.lost (permits
// lost while held), besides coordination.operation.duration and
// coordination.cleanup.abandoned.
//
// # Size bounds
//
// Keys are at most 1 KiB; a longer one fails with
// coordination.ErrInvalidArgument naming "key", nothing sent.
package semaphore
