package coordination_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/leader"
	"github.com/coordkit/coordination/lock"
	"github.com/coordkit/coordination/ratelimit"
	"github.com/coordkit/coordination/redlock"
)

// The migration guides' snippets (docs/migrate-*.md), each the body of a
// snippet function run by an Example on embedded servers.

func Example_migrateFromRedsync() {
	a, stopA := exampleCoordinator()
	defer stopA()
	b, stopB := exampleCoordinator()
	defer stopB()
	c, stopC := exampleCoordinator()
	defer stopC()
	if err := snippetMigrateRedsync(context.Background(), a, b, c); err != nil {
		log.Fatal(err)
	}
	// Output:
	// holding for at most 30s
	// released
}

func snippetMigrateRedsync(ctx context.Context, a, b, c *coordination.Coordinator) error {
	// was: rs := redsync.New(goredis.NewPool(ra), goredis.NewPool(rb), goredis.NewPool(rc))
	//      m := rs.NewMutex("reports:nightly", redsync.WithExpiry(30*time.Second))
	g, err := redlock.New([]*coordination.Coordinator{a, b, c}, redlock.WithNodeTimeout(time.Second))
	if err != nil {
		return err
	}
	l, err := g.Acquire(ctx, "reports:nightly", 30*time.Second) // was: m.LockContext(ctx)
	if err != nil {
		return err // coordination.ErrNotAcquired once ctx ends; was: redsync.ErrFailed
	}
	l.KeepAlive() // was: a goroutine calling m.ExtendContext(ctx)
	fmt.Println("holding for at most", l.Validity().Round(time.Minute/2))
	out, err := l.Release(ctx) // was: ok, err := m.UnlockContext(ctx)
	if err != nil {
		return err
	}
	fmt.Println(out)
	return nil
}

func Example_migrateFromRedislock() {
	coord, stop := exampleCoordinator()
	defer stop()
	if err := snippetMigrateRedislock(context.Background(), coord); err != nil {
		log.Fatal(err)
	}
	// Output:
	// refreshed: true
	// released
}

func snippetMigrateRedislock(ctx context.Context, coord *coordination.Coordinator) error {
	mu, err := lock.New(coord, "reports:nightly") // was: locker := redislock.New(rdb)
	if err != nil {
		return err
	}
	// was: lk, err := locker.Obtain(ctx, "reports:nightly", 30*time.Second,
	//          &redislock.Options{RetryStrategy: redislock.LinearBackoff(10 * time.Millisecond)})
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second) // redislock's bound when ctx has none
	defer cancel()
	lk, err := mu.Acquire(waitCtx, 30*time.Second) // TryAcquire: Obtain without a RetryStrategy
	if errors.Is(err, coordination.ErrNotAcquired) {
		return nil // was: redislock.ErrNotObtained
	}
	if err != nil {
		return err
	}
	ok, err := lk.Refresh(ctx, time.Minute) // was: err := lk.Refresh(ctx, time.Minute, nil)
	if err != nil {
		return err
	}
	fmt.Println("refreshed:", ok) // false once lost; was: redislock.ErrNotObtained
	out, err := lk.Release(ctx)   // was: lk.Release(ctx), redislock.ErrLockNotHeld
	if err != nil {
		return err
	}
	fmt.Println(out) // released, already released or not owned
	return nil
}

func Example_migrateFromRedisRate() {
	coord, stop := exampleCoordinator()
	defer stop()
	if err := snippetMigrateRedisRate(context.Background(), coord); err != nil {
		log.Fatal(err)
	}
	// Output:
	// allowed: true remaining: 9 retry after: 0s
}

func snippetMigrateRedisRate(ctx context.Context, coord *coordination.Coordinator) error {
	// was: limiter := redis_rate.NewLimiter(rdb)
	//      res, err := limiter.Allow(ctx, "project:123", redis_rate.PerSecond(10))
	lim, err := ratelimit.New(coord, "project:123", ratelimit.GCRA{Burst: 10, Rate: 10, Period: time.Second})
	if err != nil {
		return err
	}
	defer lim.Close()
	dec, err := lim.Allow(ctx, 1) // AllowN: lim.Allow(ctx, n)
	if err != nil {
		return err
	}
	retry, _ := dec.RetryAfter() // was: res.RetryAfter (-1 when allowed)
	// was: res.Allowed > 0, res.Remaining
	fmt.Println("allowed:", dec.Allowed(), "remaining:", dec.Available(), "retry after:", retry)
	return nil
}

func Example_migrateFromUlule() {
	coord, stop := exampleCoordinator()
	defer stop()
	if err := snippetMigrateUlule(context.Background(), coord); err != nil {
		log.Fatal(err)
	}
	// Output:
	// allowed: true remaining: 999
}

func snippetMigrateUlule(ctx context.Context, coord *coordination.Coordinator) error {
	// was: rate, err := limiter.NewRateFromFormatted("1000-H")
	//      lim := limiter.New(store, rate)
	lim, err := ratelimit.New(coord, "client:42", ratelimit.FixedWindow{Limit: 1000, Window: time.Hour})
	if err != nil {
		return err
	}
	defer lim.Close()
	dec, err := lim.Allow(ctx, 1) // was: c, err := lim.Get(ctx, "client:42"); !c.Reached
	if err != nil {
		return err
	}
	peek, err := lim.Allow(ctx, 0) // was: c, err := lim.Peek(ctx, "client:42")
	if err != nil {
		return err
	}
	fmt.Println("allowed:", dec.Allowed(), "remaining:", peek.Available()) // was: c.Remaining
	return nil
}

func Example_migrateFromXTimeRate() {
	coord, stop := exampleCoordinator()
	defer stop()
	if err := snippetMigrateXTimeRate(context.Background(), coord); err != nil {
		log.Fatal(err)
	}
	// Output:
	// 5 more allowed: true
}

func snippetMigrateXTimeRate(ctx context.Context, coord *coordination.Coordinator) error {
	// was: lim := rate.NewLimiter(rate.Every(100*time.Millisecond), 20)
	lim, err := ratelimit.New(coord, "limits:api", ratelimit.GCRA{Burst: 20, Interval: 100 * time.Millisecond})
	if err != nil {
		return err
	}
	defer lim.Close()
	if _, err := lim.Wait(ctx, 1); err != nil { // was: if err := lim.Wait(ctx); err != nil
		return err
	}
	dec, err := lim.Allow(ctx, 5) // was: lim.AllowN(time.Now(), 5)
	if err != nil {
		return err
	}
	fmt.Println("5 more allowed:", dec.Allowed())
	// was: lim.SetLimit(rate.Every(50 * time.Millisecond))
	return lim.Update(ctx, ratelimit.GCRA{Burst: 20, Interval: 50 * time.Millisecond})
}

func reconcile(ctx context.Context, token int64) error {
	fmt.Println("reconciling with fencing token", token)
	<-ctx.Done() // a controller works until its term ends
	return nil
}

// The elector leads until the context ends; Run then returns nil.
func Example_migrateFromClientGoLeaderElection() {
	coord, stop := exampleCoordinator()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	fmt.Println("run:", snippetMigrateClientGo(ctx, coord, "pod-7"))
	// Output:
	// reconciling with fencing token 1
	// term 1 ended
	// run: <nil>
}

func snippetMigrateClientGo(ctx context.Context, coord *coordination.Coordinator, id string) error {
	// was: leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
	//          Lock: &resourcelock.LeaseLock{..., LockConfig: resourcelock.ResourceLockConfig{Identity: id}},
	//          LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
	//          ReleaseOnCancel: true,
	//          Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: ..., OnStoppedLeading: ...}})
	e, err := leader.New(coord, "{controller}:leader", "{controller}:fence", id,
		leader.WithLeaseDuration(15*time.Second),
		leader.WithRetryDelay(2*time.Second),
		leader.OnElected(func(ctx context.Context, term *leader.Term) error {
			return reconcile(ctx, term.FencingToken()) // was: OnStartedLeading(ctx)
		}),
		leader.OnRevoked(func(term *leader.Term) error {
			fmt.Printf("term %d ended\n", term.FencingToken()) // was: OnStoppedLeading()
			return nil
		}))
	if err != nil {
		return err
	}
	return e.Run(ctx) // campaigns again after a lost term; nil once ctx ends
}
