package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/semaphore"
)

// Two permits shared by every process that uses the key: a third holder is
// refused until one is released.
func Example() {
	mr, err := miniredis.Run() // stands in for a real Redis server
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	coord, err := coordination.New(rdb, coordination.WithKeyPrefix("example:"))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()

	sem, err := semaphore.New(coord, "exports:permits", 2)
	if err != nil {
		panic(err)
	}
	first, err := sem.TryAcquire(ctx, 30*time.Second)
	if err != nil {
		panic(err)
	}
	second, err := sem.TryAcquire(ctx, 30*time.Second)
	if err != nil {
		panic(err)
	}
	_, err = sem.TryAcquire(ctx, 30*time.Second)
	fmt.Println("third refused:", errors.Is(err, coordination.ErrNotAcquired))

	st, err := sem.State(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%d of %d permits used by %d holders\n", st.Used, st.Capacity, st.Holders)

	out, err := first.Release(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("first:", out)
	third, err := sem.TryAcquire(ctx, 30*time.Second)
	fmt.Println("third after a release:", err == nil)

	_, _ = second.Release(ctx)
	_, _ = third.Release(ctx)
	// Output:
	// third refused: true
	// 2 of 2 permits used by 2 holders
	// first: released
	// third after a release: true
}

// A blocked Acquire wakes when a holder releases: it is notified over
// Pub/Sub, it does not poll.
func ExampleSemaphore_Acquire() {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	coord, err := coordination.New(rdb)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	sem, err := semaphore.New(coord, "reports:permits", 3)
	if err != nil {
		panic(err)
	}

	// A holder takes all three permits at once, for at most a minute.
	all, err := sem.TryAcquireN(ctx, 3, time.Minute)
	if err != nil {
		panic(err)
	}
	done := make(chan *semaphore.Permit)
	go func() {
		waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		p, err := sem.Acquire(waitCtx, time.Minute)
		if err != nil {
			panic(err)
		}
		done <- p
	}()
	time.Sleep(50 * time.Millisecond) // the waiter is blocked now
	_, _ = all.Release(ctx)
	p := <-done
	fmt.Println("waiter holds", p.N(), "permit")
	_, _ = p.Release(ctx)
	// Output:
	// waiter holds 1 permit
}
