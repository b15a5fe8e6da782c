package lock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/lock"
)

// newCoordinator returns a coordinator over an embedded server, closed
// when the example ends.
func newCoordinator() (*coordination.Coordinator, func()) {
	srv, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	coord, err := coordination.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	return coord, func() { rdb.Close(); srv.Close() }
}

// Run a job on one replica at a time: the lock is kept alive while the job
// runs, and the job's context is cancelled if the lock is lost.
func Example() {
	coord, done := newCoordinator()
	defer done()
	ctx := context.Background()
	if err := snippetNightly(ctx, coord); err != nil {
		log.Fatal(err)
	}

	// A second replica meanwhile is turned away.
	mu, err := lock.New(coord, "jobs:nightly")
	if err != nil {
		log.Fatal(err)
	}
	l, err := mu.TryAcquire(ctx, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	_, err = mu.TryAcquire(ctx, 30*time.Second)
	fmt.Println("second replica:", err)
	out, err := l.Release(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out, "/", context.Cause(l.Context()))
	// Output:
	// job done
	// second replica: coordination: lock acquire "jobs:nightly": not acquired
	// released / coordination: released
}

func snippetNightly(ctx context.Context, coord *coordination.Coordinator) error {
	mu, err := lock.New(coord, "jobs:nightly") // no I/O; reuse it for every run
	if err != nil {
		return err
	}
	l, err := mu.TryAcquire(ctx, 30*time.Second)
	if errors.Is(err, coordination.ErrNotAcquired) {
		return nil // another replica runs it
	}
	if err != nil {
		return err
	}
	defer func() {
		if _, err := l.Release(context.WithoutCancel(ctx)); err != nil {
			log.Printf("release: %v", err) // retried in the background
		}
	}()
	l.KeepAlive()
	return runJob(l.Context()) // cancelled if the lock is lost
}

func runJob(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	default:
		fmt.Println("job done")
		return nil
	}
}

// Acquire waits for the holder to release (a Pub/Sub notification wakes it)
// or for the holder's TTL to run out. One Mutex serves both holders: each
// acquisition returns a handle of its own.
func ExampleMutex_Acquire() {
	coord, done := newCoordinator()
	defer done()
	ctx := context.Background()

	mu, err := lock.New(coord, "orders:42")
	if err != nil {
		log.Fatal(err)
	}
	first, err := mu.TryAcquire(ctx, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		if _, err := first.Release(ctx); err != nil {
			log.Print(err)
		}
	}()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	second, err := mu.Acquire(wctx, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("acquired after the release")
	if _, err := second.Release(ctx); err != nil {
		log.Fatal(err)
	}
	// Output: acquired after the release
}

// Named leases in one hash need hash-field expiration (Redis 7.4 or later,
// Valkey 9.0 or later). The embedded server of this example lacks it, so
// the first operation says so, having written nothing; on a server with it
// the snippet takes shard 7, keeps it alive while processing, and releases
// it.
func ExampleFieldSet_TryAcquire() {
	coord, done := newCoordinator()
	defer done()
	ctx := context.Background()
	err := snippetShard(ctx, coord)
	fmt.Println(errors.Is(err, coordination.ErrUnsupportedServer))
	fmt.Println(err)
	// Output:
	// true
	// coordination: lease acquire "workers:shards" field "shard:7": unsupported server: hash field expiration (HPEXPIRE, HPEXPIRETIME, HPTTL) needs Redis 7.4 or later, or Valkey 9.0 or later (COORD_UNSUPPORTED)
}

func snippetShard(ctx context.Context, coord *coordination.Coordinator) error {
	shards, err := lock.NewFieldSet(coord, "workers:shards") // no I/O
	if err != nil {
		return err
	}
	lease, err := shards.TryAcquire(ctx, "shard:7", 30*time.Second)
	if errors.Is(err, coordination.ErrNotAcquired) {
		return nil // another worker owns shard 7
	}
	if err != nil {
		return err // coordination.ErrUnsupportedServer before Redis 7.4 or Valkey 9.0
	}
	defer func() {
		if _, err := lease.Release(context.WithoutCancel(ctx)); err != nil {
			log.Printf("release: %v", err) // retried in the background
		}
	}()
	lease.KeepAlive()
	return processShard(lease.Context(), 7) // cancelled if the lease is lost
}

func processShard(ctx context.Context, shard int) error {
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	default:
		fmt.Println("processed shard", shard)
		return nil
	}
}
