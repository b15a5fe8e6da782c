// Package hooks lets an application admit, reject and observe every public
// operation of the coordination primitives.
//
// A [Hook] is asked before any Redis work ([Hook.Admit]) and is told the
// outcome once ([Done]). A rejected admission fails the operation with the
// hook's error and sends nothing to Redis. A contended or unacquired result
// is [Succeeded]: the operation worked and the answer was no. Internal
// retries, queue pumping and background cleanup (keep-alive renewals,
// owner-checked cleanup of a lost reply) are not admitted again.
//
// Hooks are installed on a coordinator with coordination.WithHooks; several
// hooks run as a [Chain]. The coordinator itself records the OpenTelemetry
// histogram coordination.operation.duration (attributes operation and
// outcome) for every admitted operation.
//
// An [Operation] carries the operation name and the primitive kind. It never
// carries a key, owner token, identity or endpoint.
//
// # Operation names
//
//	Name                          Primitive     Admitted by
//	LOCK ACQUIRE                  lock          Mutex.TryAcquire, Mutex.Acquire (once, however long it waits)
//	LOCK RENEW                    lock          Lock.Refresh (keep-alive renewals are not admitted)
//	LOCK VERIFY                   lock          Lock.Verify
//	LOCK RELEASE                  lock          Lock.Release
//	LOCK ADOPT                    lock          Mutex.Adopt
//	LOCK READ                     lock          Mutex.Holder
//	LOCK FORCE RELEASE            lock          Mutex.ForceRelease
//	FENCED LOCK ACQUIRE           fencing       fencing.Mutex.TryAcquire, fencing.Mutex.Acquire (once, however long it waits)
//	FENCED LOCK RENEW             fencing       fencing.Lock.Refresh
//	FENCED LOCK VERIFY            fencing       fencing.Lock.Verify
//	FENCED LOCK RELEASE           fencing       fencing.Lock.Release
//	FENCED LOCK ADOPT             fencing       fencing.Mutex.Adopt
//	FENCED LOCK READ              fencing       fencing.Mutex.Holder
//	FENCED LOCK FORCE RELEASE     fencing       fencing.Mutex.ForceRelease
//	FENCED WRITE                  fencing       fencing.Guarded.Set
//	FENCED READ                   fencing       fencing.Guarded.Get
//	LEASE ACQUIRE                 lock          FieldSet.TryAcquire, FieldSet.Acquire (once, however long it waits)
//	LEASE RENEW                   lock          FieldLease.Refresh (keep-alive renewals are not admitted)
//	LEASE VERIFY                  lock          FieldLease.Verify
//	LEASE RELEASE                 lock          FieldLease.Release
//	LEASE ADOPT                   lock          FieldSet.Adopt
//	LEASE READ                    lock          FieldSet.Holder
//	LEASE FORCE RELEASE           lock          FieldSet.ForceRelease
//	RWLEASE READ ACQUIRE          rwlease       rwlease.RWMutex.TryRead, rwlease.RWMutex.Read (once, however long it waits)
//	RWLEASE WRITE ACQUIRE         rwlease       rwlease.RWMutex.TryWrite, rwlease.RWMutex.Write (once; removing a given-up writer's marker is not admitted)
//	RWLEASE RENEW                 rwlease       rwlease.Lease.Refresh (keep-alive renewals are not admitted)
//	RWLEASE VERIFY                rwlease       rwlease.Lease.Verify
//	RWLEASE RELEASE               rwlease       rwlease.Lease.Release
//	RWLEASE ADOPT                 rwlease       rwlease.RWMutex.Adopt
//	RWLEASE READ                  rwlease       rwlease.RWMutex.Holders
//	RWLEASE FORCE RELEASE         rwlease       rwlease.RWMutex.ForceRelease
//	SEMAPHORE ACQUIRE             semaphore     TryAcquire, TryAcquireN, Acquire, AcquireN
//	SEMAPHORE RENEW               semaphore     Permit.Refresh
//	SEMAPHORE VERIFY              semaphore     Permit.Verify
//	SEMAPHORE RELEASE             semaphore     Permit.Release
//	SEMAPHORE ADOPT               semaphore     Semaphore.Adopt
//	SEMAPHORE FORCE RELEASE       semaphore     Semaphore.ForceRelease
//	SEMAPHORE READ                semaphore     Semaphore.State, Semaphore.Holders
//	SEMAPHORE UPDATE              semaphore     Semaphore.SetCapacity, Semaphore.Resume
//	SEMAPHORE DRAIN               semaphore     Semaphore.Drain (once, however long it waits)
//	LATCH CREATE                  latch         Latch.Create
//	LATCH JOIN                    latch         Latch.Join
//	LATCH RESET                   latch         Latch.Reset
//	LATCH COUNT DOWN              latch         Generation.CountDown
//	LATCH WAIT                    latch         Generation.Wait (once, however long it waits)
//	LATCH READ                    latch         Generation.Count
//	LEADER CAMPAIGN               leader        each campaign attempt of Elector.Run (its renewals and release are not admitted)
//	LEADER READ                   leader        leader.Get, Elector.Leader, each read of leader.Observe
//	LEADER PROCLAIM               leader        Term.Proclaim (the announcement of a won term is not admitted)
//	IDEMPOTENCY BEGIN             idempotency   Store.Begin
//	IDEMPOTENCY COMPLETE          idempotency   Store.Complete
//	IDEMPOTENCY ABANDON           idempotency   Store.Abandon
//	IDEMPOTENCY FORGET            idempotency   Store.Forget
//	IDEMPOTENCY FAIL              idempotency   Store.Fail
//	RATE LIMIT ACQUIRE            rate_limit    Limiter.Allow, Limiter.Wait (once, covering queued retries), Limiter.Reserve, ConcurrencyLimiter.TryAcquire, ConcurrencyLimiter.Acquire
//	RATE LIMIT RELEASE            rate_limit    ConcurrencyLease.Release
//	RATE LIMIT RENEW              rate_limit    ConcurrencyLease.Refresh (keep-alive renewals are not admitted)
//	RATE LIMIT VERIFY             rate_limit    ConcurrencyLease.Verify
//	RATE LIMIT SETTLE             rate_limit    Reservation.Settle
//	RATE LIMIT UPDATE             rate_limit    Limiter.Update, ConcurrencyLimiter.Update (also an identical update)
//	RATE LIMIT DENY LIST READ     rate_limit    DenyList.Denied (a limiter's own checks are not admitted again)
//	RATE LIMIT DENY LIST WRITE    rate_limit    DenyList.Deny, DenyList.DenyFor, DenyList.Remove
//	RATE LIMIT RESET              rate_limit    Limiter.Reset
//	RATE LIMIT PEEK               rate_limit    Limiter.Peek, ConcurrencyLimiter.Holders
//	RATE LIMIT ADOPT              rate_limit    ConcurrencyLimiter.Adopt
//	RATE LIMIT FORCE RELEASE      rate_limit    ConcurrencyLimiter.ForceRelease
//	RATE LIMIT ADJUST             rate_limit    Limiter.Penalize, Limiter.Reward
//	RATE LIMIT ALLOW LIST READ    rate_limit    AllowList.Allowed (a limiter's own checks are not admitted again)
//	RATE LIMIT ALLOW LIST WRITE   rate_limit    AllowList.Allow, AllowList.Remove
//	REDLOCK ACQUIRE               redlock       Group.TryAcquire, Group.Acquire (once per group operation, however long it waits)
//	REDLOCK RENEW                 redlock       redlock.Lock.Refresh (keep-alive renewals are not admitted)
//	REDLOCK VERIFY                redlock       redlock.Lock.Verify
//	REDLOCK RELEASE               redlock       redlock.Lock.Release
//	REDLOCK ADOPT                 redlock       Group.Adopt
//	REDLOCK READ                  redlock       Group.Holder
//	REDLOCK FORCE RELEASE         redlock       Group.ForceRelease
//
// A Redlock group spans several coordinators: each group operation is
// admitted once through every node's coordinator hooks, in the group's
// order, before any node work; a rejection by any of them fails the
// operation (the hooks admitted before it learn Failed) and sends nothing.
// A hook installed on several of the group's coordinators sees the
// operation once per coordinator; coordination.operation.duration is
// recorded once, through the first coordinator's meter provider.
//
// The constants in this package ([LockAcquire], ...) hold these names.
package hooks
