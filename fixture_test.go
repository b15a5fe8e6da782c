package coordination_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/fencing"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/idempotency"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/latch"
	"github.com/coordkit/coordination/leader"
	"github.com/coordkit/coordination/lock"
	"github.com/coordkit/coordination/ratelimit"
	"github.com/coordkit/coordination/redlock"
	"github.com/coordkit/coordination/rwlease"
	"github.com/coordkit/coordination/semaphore"
)

// everything is one object of each public type that has verbs, and one
// held handle of each lease, on one backend: the tests that call every
// public operation (bad arguments, nil contexts) start from it. The
// key names are those the tests' expected errors name.
type everything struct {
	client   redis.UniversalClient
	coord    *coordination.Coordinator
	mu       *lock.Mutex
	lk       *lock.Lock
	fields   *lock.FieldSet
	field    *lock.FieldLease // nil where the server has no hash-field TTLs
	fm       *fencing.Mutex
	fl       *fencing.Lock
	guarded  *fencing.Guarded
	rwm      *rwlease.RWMutex
	rw       *rwlease.Lease
	sem      *semaphore.Semaphore
	permit   *semaphore.Permit
	lt       *latch.Latch
	gen      *latch.Generation
	store    *idempotency.Store
	claim    idempotency.Claim
	el       *leader.Elector
	fixed    *ratelimit.Limiter
	bucket   *ratelimit.Limiter
	reserved *ratelimit.Reservation
	conc     *ratelimit.ConcurrencyLimiter
	held     *ratelimit.ConcurrencyLease
	pconc    *ratelimit.PartitionedConcurrency
	deny     *ratelimit.DenyList
	allow    *ratelimit.AllowList
	part     *ratelimit.Partitioned
	group    *redlock.Group
	rl       *redlock.Lock
}

// newEverything builds everything on b, its coordinators' operations
// seen by hooks; all of it is closed when the test ends.
func newEverything(t *testing.T, b *testharness.Backend, hooks ...hooks.Hook) *everything {
	t.Helper()
	bg := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	var (
		e   everything
		err error
	)
	e.client = b.Client(t)
	e.coord, err = coordination.New(e.client, coordination.WithKeyPrefix(b.Prefix()), coordination.WithHooks(hooks...))
	must(err)
	t.Cleanup(func() { _ = e.coord.Shutdown(context.Background()) })
	coord := e.coord
	e.mu, err = lock.New(coord, "jobs")
	must(err)
	e.lk, err = e.mu.TryAcquire(bg, time.Minute)
	must(err)
	e.fields, err = lock.NewFieldSet(coord, "fs")
	must(err)
	if b.HasHashFieldTTL() {
		e.field, err = e.fields.TryAcquire(bg, "a", time.Minute)
		must(err)
	}
	e.fm, err = fencing.New(coord, "{inv}:lease", "{inv}:fence")
	must(err)
	e.fl, err = e.fm.TryAcquire(bg, time.Minute)
	must(err)
	e.guarded, err = fencing.NewGuarded(coord, "doc")
	must(err)
	e.rwm, err = rwlease.New(coord, "rw")
	must(err)
	e.rw, err = e.rwm.TryRead(bg, time.Minute)
	must(err)
	e.sem, err = semaphore.New(coord, "sem", 2)
	must(err)
	e.permit, err = e.sem.TryAcquire(bg, time.Minute)
	must(err)
	e.lt, err = latch.New(coord, "lt")
	must(err)
	e.gen, err = e.lt.Create(bg, 2)
	must(err)
	e.store, err = idempotency.New(coord)
	must(err)
	e.claim, err = e.store.Begin(bg, "req", time.Minute)
	must(err)
	e.el, err = leader.New(coord, "{ld}:leader", "{ld}:fence", "me")
	must(err)
	e.fixed, err = ratelimit.New(coord, "rl", ratelimit.FixedWindow{Limit: 10, Window: time.Minute})
	must(err)
	t.Cleanup(func() { _ = e.fixed.Close() })
	e.bucket, err = ratelimit.New(coord, "tb", ratelimit.TokenBucket{Limit: 10, TokensPerPeriod: 10, Period: time.Minute})
	must(err)
	t.Cleanup(func() { _ = e.bucket.Close() })
	e.reserved, err = e.bucket.Reserve(bg, 1)
	must(err)
	e.conc, err = ratelimit.NewConcurrency(coord, "conc", 2)
	must(err)
	t.Cleanup(func() { _ = e.conc.Close() })
	e.held, err = e.conc.TryAcquire(bg, 1)
	must(err)
	e.pconc, err = ratelimit.NewPartitionedConcurrency(func(p string) (*ratelimit.ConcurrencyLimiter, error) {
		return ratelimit.NewConcurrency(coord, "pconc:"+p, 2)
	})
	must(err)
	t.Cleanup(func() { _ = e.pconc.Close() })
	e.deny, err = ratelimit.NewDenyList(coord, "deny")
	must(err)
	e.allow, err = ratelimit.NewAllowList(coord, "allow")
	must(err)
	e.part, err = ratelimit.NewPartitioned(func(p string) (*ratelimit.Limiter, error) {
		return ratelimit.New(coord, "part:"+p, ratelimit.FixedWindow{Limit: 10, Window: time.Minute})
	})
	must(err)
	t.Cleanup(func() { _ = e.part.Close() })
	// Redlock needs independent deployments: three embedded servers.
	var nodes []*coordination.Coordinator
	for range 3 {
		m := miniredis.RunT(t)
		c := redis.NewClient(&redis.Options{Addr: m.Addr()})
		t.Cleanup(func() { _ = c.Close() })
		n, err := coordination.New(c, coordination.WithHooks(hooks...))
		must(err)
		t.Cleanup(func() { _ = n.Shutdown(context.Background()) })
		nodes = append(nodes, n)
	}
	e.group, err = redlock.New(nodes)
	must(err)
	e.rl, err = e.group.TryAcquire(bg, "rk", time.Minute)
	must(err)
	return &e
}
