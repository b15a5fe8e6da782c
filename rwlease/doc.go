// Package rwlease is a distributed read-write lease on one Redis key: any
// number of readers share it, or one writer holds it alone. Each holder is
// an entry with its own expiry in server time, renewed or released by its
// owner token only; expired entries are pruned by the next operation, so
// a crashed holder blocks nobody past its TTL.
//
//	catalog, err := rwlease.New(coord, "catalog:rw")
//	if err != nil {
//		return err
//	}
//	rd, err := catalog.Read(ctx, 30*time.Second)
//	if err != nil {
//		return err // coordination.ErrNotAcquired once ctx ends
//	}
//	defer func() {
//		if _, err := rd.Release(context.WithoutCancel(ctx)); err != nil {
//			log.Printf("release: %v", err) // retried in the background
//		}
//	}()
//	return readCatalog(rd.Context()) // cancelled if the lease is lost
//
// # Operations
//
// [New] returns an [RWMutex] on a key, without I/O; it is reusable and safe
// for concurrent use, and every acquisition returns a [Lease] of its own.
// [RWMutex.TryRead] and [RWMutex.TryWrite] return at once; [RWMutex.Read]
// and [RWMutex.Write] wait without polling: after a refused attempt they subscribe to the key's release
// channel (one Pub/Sub connection per coordinator, shared by every waiter),
// try again, then sleep until a release is announced, the entry in the way
// expires (as the server reported it), or the re-check period passes
// ([WithRecheck], 5 s by default). Every hot-path operation (acquire,
// refresh, verify, release) is one Lua script, one round trip. A [Lease]
// is the same handle as a lock's: Remaining, Refresh, Verify, Release
// (Released or AlreadyReleased; an entry belongs to its holder alone, so
// there is no NotOwned), KeepAlive at a third of the TTL, and a Context
// cancelled on release or loss.
//
// # Fairness: phase-fair by default
//
// A reader is admitted while no writer holds the key; a writer while no
// live reader or writer does. Without more, a steady stream of overlapping
// readers keeps a writer out for ever, and preferring writers instead lets
// a steady stream of writers keep readers out. The [Policy] (set with
// [WithPolicy]; the same in every process sharing a key) decides who waits:
//
//   - [PhaseFair] (the default): read phases and write phases alternate
//     (the phase-fair reader-writer lock of Brandenburg and Anderson, 2010).
//     A writer blocked in [RWMutex.Write] records itself as waiting, and
//     from then on new readers are refused ([RWMutex.TryRead] returns
//     coordination.ErrNotAcquired; [RWMutex.Read] waits, recording itself
//     as a waiting reader). Readers already holding keep their leases (and
//     may renew them); the writer gets in as soon as they release or
//     expire. When the write lease is released, every reader that waited
//     behind it is given its read lease by that release, ahead of the
//     writers still waiting, and the next writer gets in when they leave.
//     So a reader waits for at most the read phase in progress and one
//     write phase, and the writers, together, get every other phase.
//   - [WriterPreference]: as PhaseFair, except that waiting readers are not
//     handed the next phase: readers wait until no writer holds or waits,
//     so a steady stream of writers starves readers.
//   - [ReaderPreference]: readers ignore waiting writers and writers do not
//     record themselves, so a steady stream of overlapping readers starves
//     writers.
//
// Details that hold under every policy:
//
//   - TryRead and TryWrite never wait and never record themselves; a
//     TryWrite holds readers back only once it has the lease.
//   - Writers are not ordered among themselves: when the key becomes free
//     for a writer, whichever waiting writer tries first gets it.
//   - A waiting writer or reader renews its record at each attempt; the
//     record lives twice the re-check period (10 s by default), so a waiter
//     that crashes holds the other side back for at most that long (a
//     reader that crashed while waiting may be handed a read lease that
//     lives until its record would have expired). A Read or Write whose ctx
//     ends removes its record (and a read lease handed to it) at once.
//   - When a write lease expires instead of being released (its holder
//     crashed), no hand-off happens: the readers that waited behind it wait
//     for the next write phase too.
//   - Leases are not re-entrant, and a lease is never upgraded or
//     downgraded: each Read or Write is a lease of its own. A read holder
//     that calls Read again while a writer waits waits behind that writer
//     (under PhaseFair and WriterPreference), and a write holder that
//     calls Read or Write waits until its own write lease ends: release
//     the lease first, or pass it down the call chain.
//
// Measured (TestPhaseFairStarvesNobody: 50 readers and 10 writers
// acquiring in loops, each holding about 2 ms, for 1 s; Redis 8.0, -race,
// a loaded 2-core machine): phase-fair 767 reads and 16 writes, every
// reader and every writer in; writer preference 17 reads (33 of the 50
// readers never got in) and 59 writes; reader preference 1,221 reads and
// no write at all. TestWriterPreference: a reader arriving every 10 ms for
// 2 s, each holding 100 ms: a writer gets in about 100 ms after it starts
// waiting, when the readers present then have left; under reader
// preference it waits until the stream of readers ends.
//
// # Adopting, reading and forcing
//
// [RWMutex.Adopt] takes a held read or write lease back by its owner
// token after a restart (with its mode; its local deadline the entry's
// remaining TTL, not extended). [RWMutex.Holders] lists the live holders
// ([coordination.Holder], Shared for readers), writing nothing; waiting
// writers are not holders. [RWMutex.ForceRelease] removes a named token's
// lease, whoever calls, waking the waiters: two round trips (the holders'
// read finds the token's member, then its release, sent at most once).
// Hooks see RWLEASE ADOPT, RWLEASE READ and RWLEASE FORCE RELEASE; the
// script is rwlease_holders, whose cost grows with the live holders.
//
// # Storage
//
// One sorted set per key, so Redis Cluster needs no hash tag. Scores are
// expiries in server-time milliseconds:
//
//	member "R:<token>"  a read lease; score = its expiry (> 0)
//	member "W:<token>"  the write lease; score = its expiry (> 0); never
//	                    live together with a live read lease
//	member "Q:<token>"  a writer waiting in Write (phase-fair or writer
//	                    preference); score = -(its expiry) (< 0)
//	member "R:<token>"  scored -(its expiry) (< 0): a reader waiting in
//	                    Read (phase-fair); the release of a write lease
//	                    flips its score's sign: the reader's read lease,
//	                    expiring when the marker would have
//
// An entry is live while its expiry is after the server's now: live
// holders are the members scored above now, live waiting writers and
// readers those scored below -now. Expired entries are pruned by the next operation that
// writes, by score, not by name: a member someone else added with a score
// in the past is taken for an expired entry and removed with them, unread
// (a score out of the layout is refused: ErrBadState, nothing written);
// the key's own TTL follows the latest expiry, so an abandoned key
// disappears by itself, and it is deleted with its last entry. Inspect it
// with
//
//	ZRANGE <key> 0 -1 WITHSCORES
//
// Releases (and a waiting writer that gives up) notify on the key's
// release channel (sharded Pub/Sub where the server has it; see package
// coordination).
//
// # What holds, and what does not
//
// Within one Redis history (one primary, no failover), at every server
// instant either no writer is live or exactly one writer and no reader is
// live; a holder's refresh or release never touches another holder's
// entry, and an expired holder cannot revive its entry. Expiry uses only
// the server's clock; [coordination.Lease.Remaining] is a local estimate measured from
// before the request was sent, minus a drift allowance. Mutual exclusion
// does not survive a failover that loses recent writes (replication is
// asynchronous), and a holder paused past its TTL may act after its lease
// expired without knowing: stop work when [coordination.Lease.Context] is cancelled,
// and for writes that must never interleave use package fencing.
//
// # Restarts, eviction and memory limits
//
// A server restart without persistence, or eviction of the key (it has a
// TTL, so volatile-* policies evict it too), forgets every lease: holders'
// Verify reports false, their keep-alive reports the lease lost, and a
// second writer can get in at once. Under maxmemory with noeviction an
// acquisition still succeeds: its first write prunes expired holders, and
// the server then lets the script finish. A renewal is refused with the
// server's OOM error (it moves the holder's deadline with ZADD), so a
// keep-alive reports the lease lost; a release still works. The fault matrix in
// docs/faults.md lists every fault with the test that shows it.
//
// # Lost replies and re-sends
//
// go-redis re-sends a command after a read timeout or a broken connection
// (MaxRetries, 3 by default). An acquire re-sent with the same member
// finds its own live entry and reports acquired (one lease), a re-sent
// refresh sets the expiry again, and a re-sent release whose first send
// released reports Released, decided from the handle's own state with
// nothing left on the server (package coordination, "go-redis behaviour to
// know", says how, and its one edge).
// When an acquire's outcome is unknown to the caller (see
// coordination.IsAmbiguous) a background owner-checked cleanup removes
// what it may have left and leaves a tombstone of its member (the member
// scored minus its expiry minus one half, for the lease's TTL, at least
// 5 s and at most a minute), so that the acquire's request, if it reaches
// the server after the cleanup, takes nothing and records nothing: no
// lease, and for a phase-fair blocking Read no waiting record that a write
// release would turn into a read lease. A tombstone is no holder and no
// waiting writer to anyone else; Holders and Adopt do not see it. A
// request delayed longer than the tombstone lives can still take its
// lease, for at most its TTL. Per-call context deadlines bound network I/O only
// when the client has ContextTimeoutEnabled: true.
//
// All functions and methods are safe for concurrent use.
//
// # Size bounds
//
// Keys are at most 1 KiB; a longer one fails with
// coordination.ErrInvalidArgument naming "key", nothing sent.
package rwlease
