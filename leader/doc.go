// Package leader elects one leader among the processes that share a Redis
// (or Valkey, or Redis Cluster) deployment, on top of the fencing-token
// lock of package fencing.
//
//	e, err := leader.New(coord, "{billing}:leader", "{billing}:fence", "worker-7",
//		leader.WithLeaseDuration(15*time.Second),
//		leader.OnElected(func(ctx context.Context, term *leader.Term) error {
//			return runScheduler(ctx, term.FencingToken()) // returns when ctx ends
//		}))
//	if err != nil {
//		return err
//	}
//	return e.Run(ctx) // campaigns until ctx ends or a terminal error
//
// # Terms
//
// Each time an [Elector] wins the lease it starts a [Term]: the fencing
// token drawn for it, the elector's identity, the start time, and a context
// that is cancelled when the term ends. [OnElected] runs with that context;
// returning from it resigns (the lease is released at once, so a follower
// takes over after about one retry delay, or sooner: followers wake on the
// release notification). A term also ends when a renewal finds the lease
// gone or fails with a terminal error, when the local lease deadline passes
// without a successful renewal (the server may be unreachable), or when
// Run's context ends. When the term ends, [OnRevoked] runs exactly once,
// at once: it does not wait for OnElected, which may still be returning
// (a term that OnElected's return ended excepted). The lease is released
// after both have returned, and the elector campaigns again only after
// that (and one retry delay, so that a follower woken by the release wins
// first). One elector never has two terms at once. An OnElected that does
// not return within the drain timeout ([WithDrainTimeout], by default one
// lease duration) after its term ended is abandoned: renewal stops, the
// lease is left to expire at its TTL, and Run returns an error wrapping
// [ErrCallback] that names the timeout.
//
// While elected the lease is renewed every half lease duration, by the
// keep-alive of every held lease of the library (which renews other
// leases every third of their TTL): a leader's lease is usually longer,
// and renewing at half leaves it as many renewals before the deadline as
// a client-go leader's RenewDeadline does. The period counts from the
// campaign's request, not from the election: a term whose winning reply
// came late renews at once.
// A renewal that fails with a transient error (LOADING, BUSY, TRYAGAIN,
// CLUSTERDOWN, MASTERDOWN, READONLY, a timeout or a broken connection) is
// retried with backoff until the local deadline. A follower campaigns
// again when the leader releases (Pub/Sub notification), when the lease's
// TTL as the server reported it runs out, and at least every retry delay;
// after a transient error it waits between half and one retry delay,
// counting the errors in coordination.leader.acquire_failures. Authentication and
// permission errors (NOAUTH, WRONGPASS, NOPERM), a key of the wrong type, a
// corrupt fencing counter and a failing or panicking callback end Run with
// an error, after the lease is released.
//
// Followers and bystanders read the current leader's identity and fencing
// token with [Elector.Leader] or [Get], and follow changes with [Observe].
//
// # Keys
//
// Two keys in one Cluster slot (give them one {hash tag}): the lease key, a
// hash {owner, fence, holder} with a TTL whose holder field is the leader's
// identity, and the fencing counter key, which must never expire. They are
// the keys of a [fencing.Mutex].
//
// # What holds and what does not
//
// One elector's terms never overlap. Between electors, Redis hands the
// lease to at most one owner at a time, but an elector cannot know at every
// instant that it still leads: a leader whose process pauses (GC, VM
// migration, SIGSTOP) or loses the network keeps believing it leads until
// its local deadline, and may act after a successor was elected. The local
// deadline is measured from the instant before the acquire or renewal
// request was sent, minus a drift allowance of 1% of the lease plus 2 ms;
// it assumes the local clock's rate is within that allowance of the
// server's (wall-clock jumps do not matter: Go measures it on the monotonic
// clock), and it cannot account for a pause that has not ended yet.
//
// So leadership alone is not mutual exclusion. The safety net is the
// fencing token: pass [Term.FencingToken] with every write the leader makes
// and have the resource reject tokens older than the newest it accepted
// (fencing.Guarded.Set, or a SQL "WHERE fence <= $token" guard). Without
// that, two leaders can act at once. Tokens strictly increase only within
// one retained Redis history: an asynchronous-replication failover that
// loses the last increments, a restore from backup or a FLUSHALL can hand
// out a token twice, and a failover can also lose the lease itself and
// elect a second leader while the first still believes it leads. Where this
// matters, use a consensus-backed store (etcd, ZooKeeper) for the election.
//
// # Restarts, eviction and memory limits
//
// A server restart without persistence forgets the lease and the counter:
// the leader's next renewal finds the lease gone, its term ends
// (OnRevoked), and the next election's term has token 1 again. A
// coordinator that handed out a higher token from the counter counts it in
// coordination.fencing.counter_resets and logs a warning. Under a
// volatile-* eviction policy the lease may be evicted early (the term ends
// the same way) but not the counter, which has no TTL: tokens continue.
// Under maxmemory with noeviction a campaign fails with the server's OOM
// error, which is terminal: Run returns it. The fault matrix in docs/faults.md
// lists every fault with the test that shows it.
//
// # Observability
//
// Metrics: coordination.leader.changes (attribute state=elected|revoked)
// and coordination.leader.acquire_failures, plus the fencing lock's
// coordination.lock.* instruments (kind=fencing); never a key, identity or
// token as an attribute. Each campaign attempt is admitted through hooks
// once, as LEADER CAMPAIGN (the fencing lock underneath is not admitted
// again); renewals (the lease's keep-alive) and the release at the end of
// a term are part of Run and not admitted; reads are LEADER READ.
//
// Per-request context deadlines bound a request's I/O only with go-redis'
// ContextTimeoutEnabled: true; otherwise the client's read timeout (5 s by
// default) does. A renewal stuck that long cannot extend a term (its
// context is cancelled at the local deadline regardless), but it delays the
// release and the next campaign.
//
// # Size bounds
//
// Keys are at most 1 KiB and an identity at most 256 bytes; a longer one
// fails with coordination.ErrInvalidArgument naming "leaseKey",
// "fenceKey" or "identity", nothing sent.
package leader
