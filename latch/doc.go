// Package latch is a distributed countdown latch on Redis: one party
// creates it with a count, workers in any process count it down, and
// waiters block until it reaches zero.
//
// [New] returns the [Latch] at a key, with its options, without I/O. Its
// verbs [Latch.Create], [Latch.Reset] and [Latch.Join] each return a
// [Generation], the handle that counts down ([Generation.CountDown]),
// reads ([Generation.Count]) and waits ([Generation.Wait]):
//
//	l, err := latch.New(coord, "batch:42:done", latch.WithDeadline(10*time.Minute), latch.WithKeyTTL(time.Hour))
//	if err != nil {
//		return err
//	}
//	g, err := l.Create(ctx, 3)
//	if err != nil {
//		return err
//	}
//	for i := range 3 { // each worker, in any process
//		go func() {
//			w, err := l.Join(ctx)
//			if err == nil {
//				_, err = w.CountDown(ctx)
//			}
//			if err != nil {
//				log.Printf("worker %d: %v", i, err)
//			}
//		}()
//	}
//	ok, err := g.Wait(ctx) // true once all 3 counted down
//	if err != nil {
//		return err // latch.ErrBroken past the deadline
//	}
//	fmt.Println("all 3 done:", ok)
//	return nil
//
// # Generations
//
// A latch at a key lives as a sequence of generations. [Latch.Create]
// makes the first one (or fails with [ErrExists]); [Latch.Reset] replaces
// the current one with a new generation (a new count, a new random id,
// [Generation.Number] one higher); [Latch.Join] returns the one current
// when it runs. A [Generation] belongs to that one generation for good:
// its waiters return false when the latch is replaced, its count-downs are
// refused with [ErrStaleGeneration] and never decrement a newer
// generation, and its reads report the generation as stale. To take part
// in the new generation, Join again. Deleting the key ends every
// generation: waiters return false and count-downs report [ErrNotFound].
// A latch created again after a deletion is a new generation too (its
// Number starts at 1 again), so a late count-down from before the
// deletion cannot touch it.
//
// # Deadlines
//
// A generation may be given a deadline ([WithDeadline], given to [New]
// and applied by [Latch.Create] and [Latch.Reset]): if its count has not
// reached zero by then, measured on the server's clock, it is broken.
// Waiters then return [ErrBroken] instead of waiting forever for a party
// that died, and late count-downs are refused with [ErrBroken]. A
// generation that reached zero before its deadline stays complete.
//
// # Storage
//
// One hash per latch (one key, no hash tag needed on Redis Cluster) with
// the fields id, gen, count, initial and deadline, plus one field per
// accepted count-down ("s:" and a random signal id) so that a count-down
// re-sent by go-redis after a lost reply is counted once. Those fields cost
// about 60 bytes per count-down and are dropped by Reset. You choose the
// key's lifetime: it stays until deleted, or until the TTL given with
// [WithKeyTTL]. Keep it until every participant is done; deleting it early
// makes waiters return false.
//
// Every operation is one Lua script on that one key, in one round trip,
// using the server's clock. Every script first reads and checks the hash
// (the fragment latch_state in package lua): a hash that is not a latch
// (id missing or empty; gen, count, initial or deadline missing or not a
// decimal integer in range: gen at least 1, count between 0 and initial,
// initial and deadline between 0 and [MaxCount]; a count-down's record
// outside count to initial) is refused by every verb with an error
// matching coordination.ErrBadState, and nothing is written. The scripts are latch_create (Create and
// Reset), latch_join, latch_count_down and latch_read (Count and Wait) in
// package lua; a new generation and a count-down that completes one
// notify on the key's release channel (sharded Pub/Sub where the server
// has it; see package coordination), best effort.
//
// # Waiting
//
// [Generation.Wait] reads the latch; when it has to wait, it subscribes to the
// key's Pub/Sub channel (one connection per coordinator, shared by every
// waiter) and reads again, then re-reads whenever a count-down completes
// the latch, a reset is announced, its deadline passes, and at least every
// re-check period ([WithRecheck], 5 s by default). A lost notification
// therefore delays a waiter by at most the re-check period; it never
// blocks it. Deleting the key announces nothing, so waiters notice it at
// their next re-read. Cancelling Wait's context stops the waiter (its
// error matches the context's cause, and coordination.ErrNotAcquired when
// Redis answered its last read: an outage is not a latch still counting);
// it changes nothing in Redis.
//
// # What holds, and what does not
//
// Within one Redis history, the count of a generation only decreases, by
// exactly one per accepted count-down, and a [Generation]'s count-down can only
// decrement its own generation. Deadlines use only the server's clock, so
// client clock jumps do not affect them.
//
// It is not consensus: asynchronous replication means a failover or a
// restore from a backup can lose recent count-downs and resets (a waiter
// that saw the latch complete may then see it incomplete, or stale), and a
// server clock jump moves deadlines. A count-down whose reply was lost for
// good (timeout, cancelled context, broken connection) may or may not
// have counted; retrying the call counts again if it had. Per-call context
// deadlines bound network I/O only with go-redis' ContextTimeoutEnabled
// option.
//
// # Restarts, eviction and memory limits
//
// A server restart without persistence deletes the latch: count-downs
// report ErrNotFound and waiters return false, as after a deletion. The
// key has no TTL unless WithKeyTTL gave it one, so volatile-* eviction
// policies keep it (allkeys-* ones may evict it, with the effect of a
// restart). Under maxmemory with noeviction a count-down fails with the
// server's OOM error (terminal) before writing anything. The fault matrix in
// docs/faults.md lists every fault with the test that shows it.
//
// # Hooks and metrics
//
// Operations are admitted through the coordinator's hooks as LATCH CREATE,
// LATCH JOIN, LATCH RESET, LATCH COUNT DOWN, LATCH WAIT (once, however long
// it waits) and LATCH READ ([Generation.Count]). A definite negative answer
// ([ErrExists], [ErrNotFound], [ErrStaleGeneration], [ErrCompleted],
// [ErrBroken]) is reported to the hooks as Succeeded, like contention: the
// operation worked and the answer was no. A Wait whose context ended
// first is Canceled.
//
// Besides coordination.operation.duration, the latch records
// coordination.latch.count_downs, a counter of the count-downs Redis
// answered, by result: counted (accepted), completed (refused: the
// generation had reached zero already), stale, not_found and broken; and
// coordination.latch.wait, a histogram of the seconds spent in Wait, by
// result: completed (true), replaced (false: reset or deleted), broken,
// gave_up (the context ended) and failed (an error).
//
// # Size bounds
//
// Keys are at most 1 KiB; [New] refuses a longer one with
// coordination.ErrInvalidArgument naming "key", and a count outside 0 to
// [MaxCount] is refused by Create and Reset naming "count", nothing sent.
package latch
