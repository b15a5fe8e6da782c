package coordination_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/idempotency"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/latch"
	"github.com/coordkit/coordination/leader"
	"github.com/coordkit/coordination/lock"
	"github.com/coordkit/coordination/ratelimit"
	"github.com/coordkit/coordination/semaphore"
)

// A bad argument of a verb (not of a constructor) names the operation and
// the key as every other error of that operation does, `coordination:
// lock refresh "jobs": invalid argument ttl: ...`, so that a log line of a
// service with many locks says which; it still matches ErrInvalidArgument
// and names the argument (check.ArgumentName), and nothing is admitted or
// sent. A bad key names the operation only (the key is the bad argument);
// so does a nil receiver, which has none.
func TestVerbArgumentErrorsNameOperationAndKey(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		bg := context.Background()
		rec := &testharness.HookRecorder{}
		f := newEverything(t, b, rec)
		coord := f.coord

		const ttl0 = "invalid argument ttl: must be at least 1ms, got 0s"
		type verb struct {
			name, want string
			call       func() error
		}
		verbs := []verb{
			{"lock.Mutex.TryAcquire", `coordination: lock acquire "jobs": ` + ttl0,
				func() error { _, err := f.mu.TryAcquire(bg, 0); return err }},
			{"lock.Mutex.Acquire", `coordination: lock acquire "jobs": invalid argument ttl: must be at least 1ms, got -1s`,
				func() error { _, err := f.mu.Acquire(bg, -time.Second); return err }},
			{"lock.Mutex(nil).TryAcquire", `coordination: lock acquire: invalid argument mutex: must not be nil; use lock.New`,
				func() error { _, err := (*lock.Mutex)(nil).TryAcquire(bg, time.Second); return err }},
			{"lock.Lock.Refresh", `coordination: lock renew "jobs": ` + ttl0,
				func() error { _, err := f.lk.Refresh(bg, 0); return err }},
			{"coordination.Lease.Refresh", `coordination: lock renew "jobs": invalid argument ttl: must be at least 1ms, got 999µs`,
				func() error { _, err := f.lk.Lease.Refresh(bg, 999*time.Microsecond); return err }},
			{"lock.FieldSet.TryAcquire", `coordination: lease acquire "fs" field "b": ` + ttl0,
				func() error { _, err := f.fields.TryAcquire(bg, "b", 0); return err }},
			{"lock.FieldSet.Acquire", `coordination: lease acquire "fs": invalid argument field: must not be empty`,
				func() error { _, err := f.fields.Acquire(bg, "", time.Second); return err }},
			{"fencing.Mutex.TryAcquire", `coordination: fenced lock acquire "{inv}:lease": ` + ttl0,
				func() error { _, err := f.fm.TryAcquire(bg, 0); return err }},
			{"fencing.Lock.Refresh", `coordination: fenced lock renew "{inv}:lease": ` + ttl0,
				func() error { _, err := f.fl.Refresh(bg, 0); return err }},
			{"fencing.Guarded.Set", `coordination: fenced write "doc": invalid argument token: must be a positive fencing token, got 0`,
				func() error { _, _, err := f.guarded.Set(bg, 0, []byte("v"), 0); return err }},
			{"fencing.Guarded.Set ttl", `coordination: fenced write "doc": invalid argument ttl: must be 0 (no expiry) or at least 1ms, got -1ns`,
				func() error { _, _, err := f.guarded.Set(bg, 1, []byte("v"), -1); return err }},
			{"fencing.Guarded.Set sub-ms ttl", `coordination: fenced write "doc": invalid argument ttl: must be 0 (no expiry) or at least 1ms, got 500µs`,
				func() error { _, _, err := f.guarded.Set(bg, 1, []byte("v"), 500*time.Microsecond); return err }},
			{"rwlease.RWMutex.TryRead", `coordination: rwlease read acquire "rw": ` + ttl0,
				func() error { _, err := f.rwm.TryRead(bg, 0); return err }},
			{"rwlease.RWMutex.Write", `coordination: rwlease write acquire "rw": ` + ttl0,
				func() error { _, err := f.rwm.Write(bg, 0); return err }},
			{"rwlease.Lease.Refresh", `coordination: rwlease renew "rw": ` + ttl0,
				func() error { _, err := f.rw.Refresh(bg, 0); return err }},
			{"semaphore.Semaphore.TryAcquireN", `coordination: semaphore acquire "sem": invalid argument n: must be between 1 and the capacity 2, got 3`,
				func() error { _, err := f.sem.TryAcquireN(bg, 3, time.Second); return err }},
			{"semaphore.Semaphore.SetCapacity", `coordination: semaphore update "sem": invalid argument capacity: must be between 1 and 9007199254740991, got 0 (Drain grants none)`,
				func() error { return f.sem.SetCapacity(bg, 0) }},
			{"lock.Mutex.Adopt", "coordination: lock adopt \"jobs\": invalid argument token: must be an owner token (22 characters of base64url, as Lease.Token returns), got \"x\"",
				func() error { _, err := f.mu.Adopt(bg, "x"); return err }},
			{"lock.Mutex.ForceRelease", "coordination: lock force release \"jobs\": invalid argument token: must be an owner token (22 characters of base64url, as Lease.Token returns), got \"x\"",
				func() error { _, err := f.mu.ForceRelease(bg, "x"); return err }},
			{"lock.Mutex(nil).Holder", `coordination: lock read: invalid argument mutex: must not be nil; use lock.New`,
				func() error { _, err := (*lock.Mutex)(nil).Holder(bg); return err }},
			{"lock.FieldSet.Adopt", "coordination: lease adopt \"fs\" field \"b\": invalid argument token: must be an owner token (22 characters of base64url, as Lease.Token returns), got \"x\"",
				func() error { _, err := f.fields.Adopt(bg, "b", "x"); return err }},
			{"lock.FieldSet.Holder", `coordination: lease read "fs": invalid argument field: must not be empty`,
				func() error { _, err := f.fields.Holder(bg, ""); return err }},
			{"fencing.Mutex.ForceRelease", "coordination: fenced lock force release \"{inv}:lease\": invalid argument token: must be an owner token (22 characters of base64url, as Lease.Token returns), got \"x\"",
				func() error { _, err := f.fm.ForceRelease(bg, "x"); return err }},
			{"rwlease.RWMutex.Adopt", "coordination: rwlease adopt \"rw\": invalid argument token: must be an owner token (22 characters of base64url, as Lease.Token returns), got \"x\"",
				func() error { _, err := f.rwm.Adopt(bg, "x"); return err }},
			{"semaphore.Semaphore.ForceRelease", "coordination: semaphore force release \"sem\": invalid argument token: must be an owner token (22 characters of base64url, as Lease.Token returns), got \"x\"",
				func() error { _, err := f.sem.ForceRelease(bg, "x"); return err }},
			{"semaphore.Semaphore(nil).Drain", `coordination: semaphore drain: invalid argument semaphore: must not be nil; use semaphore.New`,
				func() error { return (*semaphore.Semaphore)(nil).Drain(bg) }},
			{"semaphore.Semaphore.Acquire", `coordination: semaphore acquire "sem": ` + ttl0,
				func() error { _, err := f.sem.Acquire(bg, 0); return err }},
			{"semaphore.Permit.Refresh", `coordination: semaphore renew "sem": ` + ttl0,
				func() error { _, err := f.permit.Refresh(bg, 0); return err }},
			{"latch.Latch.Create", `coordination: latch create "lt": invalid argument count: must be between 0 and 9007199254740991, got -1`,
				func() error { _, err := f.lt.Create(bg, -1); return err }},
			{"latch.Latch.Reset", `coordination: latch reset "lt": invalid argument count: must be between 0 and 9007199254740991, got -2`,
				func() error { _, err := f.lt.Reset(bg, -2); return err }},
			{"latch.Generation(nil).CountDown", `coordination: latch count down: invalid argument generation: must not be nil; use Latch.Create, Latch.Reset or Latch.Join`,
				func() error { _, err := (*latch.Generation)(nil).CountDown(bg); return err }},
			{"leader.Observe", `coordination: leader read "{l}:lease": invalid argument poll: must be at least 1ms, got 0s`,
				func() error { return leader.Observe(bg, coord, "{l}:lease", 0, func(leader.Info) {}) }},
			{"leader.Observe fn", `coordination: leader read "{l}:lease": invalid argument fn: must not be nil`,
				func() error { return leader.Observe(bg, coord, "{l}:lease", time.Second, nil) }},
			{"leader.Get", `coordination: leader read: invalid argument leaseKey: must not be empty`,
				func() error { _, err := leader.Get(bg, coord, ""); return err }},
			{"leader.Elector(nil).Run", `coordination: leader campaign: invalid argument elector: must not be nil; use leader.New`,
				func() error { return (*leader.Elector)(nil).Run(bg) }},
			{"leader.Elector.Leader", `coordination: leader read: invalid argument elector: must not be nil; use leader.New`,
				func() error { _, err := (*leader.Elector)(nil).Leader(bg); return err }},
			{"idempotency.Store.Begin", `coordination: idempotency begin "req": ` + ttl0,
				func() error { _, err := f.store.Begin(bg, "req", 0); return err }},
			{"idempotency.Store.Begin key", `coordination: idempotency begin: invalid argument key: must not be empty`,
				func() error { _, err := f.store.Begin(bg, "", time.Minute); return err }},
			{"idempotency.Store.Begin option", `coordination: idempotency begin "req": invalid argument wait: must not be negative, got -1s`,
				func() error {
					_, err := f.store.Begin(bg, "req", time.Minute, idempotency.WithWait(-time.Second))
					return err
				}},
			{"idempotency.Store.Complete", `coordination: idempotency complete "req": invalid argument owner: must not be empty; use the Owner of a Started claim`,
				func() error { _, err := f.store.Complete(bg, "req", "", nil); return err }},
			{"idempotency.Store.Abandon", `coordination: idempotency abandon "req": invalid argument owner: must not be empty; use the Owner of a Started claim`,
				func() error { _, err := f.store.Abandon(bg, "req", ""); return err }},
			{"idempotency.Store.Do", `coordination: idempotency begin "req": invalid argument fn: must not be nil`,
				func() error { _, _, err := f.store.Do(bg, "req", time.Minute, "", nil); return err }},
			{"idempotency.Store.KeepAlive", `coordination: idempotency keep alive "req": ` + ttl0,
				func() error { _, _, err := f.store.KeepAlive(bg, "req", f.claim, 0); return err }},
			{"ratelimit.Limiter.Allow", `coordination: rate limit acquire "rl": invalid argument permits: must be >= 0, got -1`,
				func() error { _, err := f.fixed.Allow(bg, -1); return err }},
			{"ratelimit.Limiter.Wait", `coordination: rate limit acquire "rl": invalid argument permits: 11 permits can never be granted: the limiter's capacity is 10`,
				func() error { _, err := f.fixed.Wait(bg, 11); return err }},
			// (Reserve on a fixed window was refused until every
			// consumptive algorithm supported it: a negative estimate is.)
			{"ratelimit.Limiter.Reserve", `coordination: rate limit acquire "rl": invalid argument permits: must be >= 0, got -1`,
				func() error { _, err := f.fixed.Reserve(bg, -1); return err }},
			{"ratelimit.Limiter.Update", `coordination: rate limit update "rl": invalid argument settings: the algorithm cannot change (nor a composite's components): use a new key`,
				func() error { return f.fixed.Update(bg, ratelimit.GCRA{Burst: 1, Interval: time.Second}) }},
			{"ratelimit.Reservation.Settle", `coordination: rate limit settle "tb": invalid argument actual: must be >= 0, got -1`,
				func() error { _, err := f.reserved.Settle(bg, -1); return err }},
			{"ratelimit.Reservation.Settle", `coordination: rate limit settle "tb": invalid argument actual: must be at most 11 (the estimate, 1, plus the limiter's capacity, 10), got 2147483648`,
				func() error { _, err := f.reserved.Settle(bg, 1<<31); return err }},
			{"ratelimit.ConcurrencyLimiter.TryAcquire", `coordination: rate limit acquire "conc": invalid argument permits: must be >= 1, got 0`,
				func() error { _, err := f.conc.TryAcquire(bg, 0); return err }},
			{"ratelimit.ConcurrencyLimiter.Update", `coordination: rate limit update "conc": invalid argument limit: must be between 1 and 2147483647, got 0`,
				func() error { return f.conc.Update(bg, 0) }},
			{"ratelimit.ConcurrencyLimiter.Adopt", "coordination: rate limit adopt \"conc\": invalid argument token: must be an owner token (22 characters of base64url, as Lease.Token returns), got \"x\"",
				func() error { _, err := f.conc.Adopt(bg, "x"); return err }},
			{"ratelimit.ConcurrencyLease.Refresh", `coordination: rate limit renew "conc": ` + ttl0,
				func() error { _, err := f.held.Refresh(bg, 0); return err }},
			{"ratelimit.DenyList.Deny", `coordination: rate limit deny list write "deny": invalid argument identity: must not be empty`,
				func() error { return f.deny.Deny(bg, "") }},
			{"ratelimit.DenyList.Denied", `coordination: rate limit deny list read "deny": invalid argument identity: is 257 bytes long; at most 256 are allowed`,
				func() error { _, err := f.deny.Denied(bg, strings.Repeat("i", 257)); return err }},
			{"ratelimit.AllowList.Allow", `coordination: rate limit allow list write "allow": invalid argument identity: must not be empty`,
				func() error { return f.allow.Allow(bg, "") }},
			{"ratelimit.AllowList.Allowed", `coordination: rate limit allow list read "allow": invalid argument identity: is 257 bytes long; at most 256 are allowed`,
				func() error { _, err := f.allow.Allowed(bg, strings.Repeat("i", 257)); return err }},
			{"ratelimit.Partitioned.Allow", `coordination: rate limit acquire "part:p": invalid argument permits: must be >= 0, got -3`,
				func() error { _, err := f.part.Allow(bg, "p", -3); return err }},
			{"redlock.Group.TryAcquire", `coordination: redlock acquire "rk": ` + ttl0,
				func() error { _, err := f.group.TryAcquire(bg, "rk", 0); return err }},
			{"redlock.Group.Acquire", `coordination: redlock acquire: invalid argument key: must not be empty`,
				func() error { _, err := f.group.Acquire(bg, "", time.Second); return err }},
			{"redlock.Lock.Refresh", `coordination: redlock renew "rk": invalid argument ttl: must be longer than the clock-drift allowance (2.02ms), got 2ms`,
				func() error { _, err := f.rl.Refresh(bg, 2*time.Millisecond); return err }},
			{"redlock.Group.Adopt", `coordination: redlock adopt "rk": invalid argument token: must be an owner token (22 characters of base64url, as Lease.Token returns), got "x"`,
				func() error { _, err := f.group.Adopt(bg, "rk", "x"); return err }},
			{"redlock.Group.Holder", `coordination: redlock read: invalid argument key: must not be empty`,
				func() error { _, err := f.group.Holder(bg, ""); return err }},
			{"redlock.Group.ForceRelease", `coordination: redlock force release "rk": invalid argument token: must be an owner token (22 characters of base64url, as Lease.Token returns), got "x"`,
				func() error { _, err := f.group.ForceRelease(bg, "rk", "x"); return err }},
		}
		if f.field != nil {
			verbs = append(verbs, verb{"lock.FieldLease.Refresh", `coordination: lease renew "fs" field "a": ` + ttl0,
				func() error { _, err := f.field.Refresh(bg, 0); return err }})
		}
		admitted := len(rec.Ops())
		counter := testharness.CountCommands(f.client)
		for _, v := range verbs {
			err := v.call()
			arg, named := check.ArgumentName(err)
			if err == nil || err.Error() != v.want || !errors.Is(err, coordination.ErrInvalidArgument) || !named || !strings.Contains(v.want, "invalid argument "+arg+": ") {
				t.Errorf("%s:\n got %v\nwant %s (matching ErrInvalidArgument, naming the argument)", v.name, err, v.want)
			}
		}
		if n := counter.Count(); n != 0 {
			t.Errorf("bad arguments sent %v", counter.Names())
		}
		if ops := rec.Ops(); len(ops) != admitted {
			t.Errorf("bad arguments were admitted: %v", ops[admitted:])
		}
		for _, h := range []interface {
			Release(context.Context) (coordination.ReleaseOutcome, error)
		}{f.lk, f.fl, f.rw, f.permit, f.held, f.rl} {
			_, _ = h.Release(bg)
		}
		if f.field != nil {
			_, _ = f.field.Release(bg)
		}
	})
}
