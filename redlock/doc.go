// Package redlock is a quorum lock over N independent Redis deployments:
// the Redlock algorithm as the Redis documentation on distributed locks
// states it ("Distributed Locks with Redis"), with go-redsync/redsync as
// the Go peer whose behaviour it improves on (parallel nodes with a
// decision as soon as a quorum answers, notification wake-ups, one owner
// token per round, an optional fencing counter).
//
//	g, err := redlock.New([]*coordination.Coordinator{a, b, c}) // one per deployment
//	if err != nil {
//		return err
//	}
//	l, err := g.TryAcquire(ctx, "reports:nightly", 30*time.Second)
//	if errors.Is(err, coordination.ErrNotAcquired) {
//		return nil // another process holds it
//	}
//	if err != nil {
//		return err // too few nodes answered (a *redlock.QuorumError), bad input ...
//	}
//	defer func() {
//		if _, err := l.Release(context.WithoutCancel(ctx)); err != nil {
//			log.Printf("release: %v", err) // failed nodes are retried in the background
//		}
//	}()
//	l.KeepAlive()
//	return runReport(l.Context()) // cancelled when the validity ends or the lock is lost
//
// # The algorithm
//
// A [Group] holds N coordinators (N odd, at least 3), each over a client of
// a different deployment: standalone servers, not replicas of one another.
// [Group.TryAcquire] sends the owner-token lock's acquire script (one round
// trip, a re-sent request recognises its own token) to every node in
// parallel, each bounded by the node timeout ([WithNodeTimeout], default
// 1 s), with one random token. The lock is held when a majority (N/2+1)
// granted it and the validity, ttl minus the time elapsed since before the
// first request minus the drift allowance ([WithDriftFactor] × ttl + 2 ms),
// is positive. Otherwise every node that may hold the token is released,
// owner-checked: the nodes that granted it at once, a node that failed or
// is late in the background, after its own answer. The round ends as soon
// as the outcome is known: slow nodes delay nothing once a
// quorum answered, and a node that gives no answer within the node timeout
// counts as failed, so one round takes at most the node timeout, never the
// sum of the nodes' latencies.
//
// A [Lock] is a coordination.Lease, the held lease of every primitive of
// the library (Context, Remaining, Refresh, Verify, Release,
// KeepAlive, Key, Token), whose server side is the quorum; it adds
// [Lock.FencingToken], [Lock.Validity] and [Lock.TTL]. Refresh (and
// KeepAlive, every TTL/3) renews on a quorum before the validity ends; a
// renewal that no quorum confirms ends the lock and removes its token from
// every node, best effort. Verify asks a quorum whether it still holds the
// token. Release removes the token everywhere and, once a quorum of nodes
// confirmed, returns a coordination.ReleaseOutcome as every held lease's
// Release does: Released when a quorum deleted the token, NotOwned when
// another owner holds a quorum, AlreadyReleased when the lock was gone (or
// released before by this handle); [Group.Acquire] waits, woken by a
// release on any node.
//
// Each group operation is admitted once through every node's hooks, in the
// order of the group's coordinators, before any node work (REDLOCK
// ACQUIRE, REDLOCK RENEW, REDLOCK VERIFY, REDLOCK RELEASE); a rejection by any hook sends
// nothing. Background cleanups and keep-alive renewals are not admitted.
// The group records coordination.redlock.acquire_latency and
// coordination.redlock.node_failures through its first coordinator's meter
// provider.
//
// # Adopting, reading and force-releasing
//
// [Group.Adopt] takes back, after a restart, the lock an owner token
// holds on a quorum, with a validity computed as an acquisition's from the
// TTLs the nodes report (the quorum-th longest remaining TTL of the nodes
// that hold it, less the read's time and the drift allowance);
// [Group.Holder] reads the token a quorum agrees on and its validity,
// writing nothing (a tombstone reads as free); [Group.ForceRelease] runs
// the holder's own owner-checked release on every node, waking blocked
// acquirers as a release does, for an administrator whose holder hangs.
// They are admitted as REDLOCK ADOPT, REDLOCK READ and REDLOCK FORCE
// RELEASE.
//
// # What it does not guarantee
//
// Redlock is not a consensus protocol, and Martin Kleppmann's analysis
// ("How to do distributed locking", 2016) shows what that costs; the Redis
// documentation's own algorithm page discusses the same limits:
//
//   - Timing assumptions. Safety rests on bounded network delay, bounded
//     process pauses and clocks that drift by less than the drift
//     allowance. A process paused (GC, VM suspension) past its validity, or
//     a node whose clock jumps forward (an administrator, NTP stepping the
//     clock), lets two holders believe they hold the lock at once. Local
//     time only ever shortens a holder's estimate here; it cannot prevent
//     a pause after the check.
//   - Persistence and restarts. A node that restarts without its data (or
//     fails over to a replica that missed the last writes) forgets the
//     token it granted, and another process can then gather a quorum while
//     the first still holds. Run the nodes with persistence (appendfsync
//     always for full safety) or keep a crashed node down for at least the
//     longest TTL before it rejoins (delayed restarts).
//   - Partitions. A node that granted the token and then became unreachable
//     keeps it until it expires, and a request slower than the node timeout
//     may still land after the round gave up (it is then released, after
//     its late answer). Both only reduce availability; fewer than a quorum
//     of reachable nodes means no lock.
//   - No fencing by default. The owner token identifies the holder but does
//     not order holders, so the protected resource cannot reject a stale
//     one.
//
// Where a stale holder's writes must be refused, use fencing tokens: with
// [WithFencing] one designated node draws a token from a counter at every
// acquisition, strictly increasing while that node keeps its data, and the
// resource refuses writes whose token is lower than the last it accepted
// (UPDATE ... WHERE fence <= $token). The fenced-sql example
// (examples/fenced-sql) shows it end to end with SQLite. Where the token
// must survive failover, use a consensus-backed store (etcd, ZooKeeper).
//
// # Restarts, eviction and memory limits
//
// A node that restarts without persistence (or evicts the key, or refuses
// with OOM) forgets its part of the lock; the others are still a quorum,
// so the lock holds and a second group is refused. A second group gets a
// quorum only when a majority of the nodes forgot the lock while it was
// valid: restart nodes one at a time, each after the longest TTL in use
// (Redlock's delayed restart), or run them with persistence. The fault matrix in
// docs/faults.md lists every fault with the test that shows it (one node of
// three under each fault).
//
// # Node failures and re-sends
//
// go-redis re-sends a command after a lost reply (MaxRetries): the acquire
// script treats the caller's own token as success, so a re-send on one node
// yields one token there, not a refusal. A node's call is bounded by the
// node timeout whatever the client's settings (go-redis bounds I/O by a
// context deadline only with ContextTimeoutEnabled); the call goes on in
// the background until go-redis' own timeouts end it, and what it may have
// left is released after its answer. Set the clients' ReadTimeout close to
// the node timeout so that such calls end soon.
//
// On a node whose acquisition failed ambiguously (a timeout, a lost
// reply), that background release leaves a tombstone of the round's token
// in the key (as lock.Mutex's cleanup does: the token followed by '!', for
// the TTL, at least 5 s and at most a minute; on the fencing node
// (WithFencing) the fencing lease's, as fencing.Mutex's cleanup does), so
// that the round's request, still on its way and reaching the node after
// the cleanup, takes nothing there (and draws no fencing token); any other
// acquisition takes a tombstone over. A request delayed longer than the
// tombstone lives can still take the node for at most the TTL.
//
// A node that refuses connections (a stopped server, a closed port) keeps
// go-redis dialing longer than the default node timeout: it retries the
// dial (DialerRetries, 5 attempts with a backoff) and then the command
// (MaxRetries), and returns only the context's error when the context ends
// meanwhile. The group records each node's dials (a go-redis hook that
// [New] adds to each client), so such a node fails with the dial error
// (a *net.OpError, e.g. "connection refused"), not [ErrNodeTimeout]: its
// [QuorumError] says why, and coordination.IsAmbiguous is false for it,
// since nothing was sent there.
//
// All functions and methods are safe for concurrent use.
//
// # Size bounds
//
// Keys are at most 1 KiB; a longer one fails with
// coordination.ErrInvalidArgument naming "key", nothing sent.
package redlock
