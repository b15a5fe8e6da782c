package lock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/lock"
)

// Run a job on one replica at a time: the lock is kept alive while the job
// runs, and the job's context is cancelled if the lock is lost.
func Example() {
	srv, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	coord, _ := coordination.New(rdb)
	ctx := context.Background()

	l, err := lock.TryAcquire(ctx, coord, "jobs:nightly-report", 10*time.Second)
	if errors.Is(err, coordination.ErrNotAcquired) {
		fmt.Println("another replica runs the job")
		return
	}
	if err != nil {
		panic(err)
	}
	l.KeepAlive()
	fmt.Println("holding; remaining > 9s:", l.Remaining() > 9*time.Second)

	// A second replica is turned away.
	_, err = lock.TryAcquire(ctx, coord, "jobs:nightly-report", 10*time.Second)
	fmt.Println("second replica:", err)

	runJob(l.Context())

	out, err := l.Release(ctx)
	fmt.Println(out, err)
	fmt.Println("context:", context.Cause(l.Context()))
	// Output:
	// holding; remaining > 9s: true
	// second replica: coordination: not acquired
	// job done
	// released <nil>
	// context: coordination: released
}

func runJob(ctx context.Context) {
	select {
	case <-ctx.Done():
		fmt.Println("job stopped: lock lost")
	default:
		fmt.Println("job done")
	}
}

// Acquire waits for the holder to release (a Pub/Sub notification wakes it)
// or for the holder's TTL to run out.
func ExampleAcquire() {
	srv, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	coord, _ := coordination.New(rdb)
	ctx := context.Background()

	first, _ := lock.TryAcquire(ctx, coord, "orders:42", time.Minute)
	go func() {
		time.Sleep(50 * time.Millisecond)
		first.Release(ctx)
	}()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	second, err := lock.Acquire(wctx, coord, "orders:42", time.Minute)
	fmt.Println("acquired after release:", err == nil)
	second.Release(ctx)
	// Output: acquired after release: true
}
