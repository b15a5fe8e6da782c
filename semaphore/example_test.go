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

// exampleCoordinator starts an in-memory stand-in for a Redis server and
// returns a coordinator on it, and a function that stops both.
func exampleCoordinator() (*coordination.Coordinator, func()) {
	mr, err := miniredis.Run() // stands in for a real Redis server
	if err != nil {
		panic(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	coord, err := coordination.New(rdb, coordination.WithKeyPrefix("example:"))
	if err != nil {
		panic(err)
	}
	return coord, func() {
		if err := rdb.Close(); err != nil {
			panic(err)
		}
		mr.Close()
	}
}

// Two permits shared by every process that uses the key: a third holder is
// refused until one is released.
func Example() {
	coord, stop := exampleCoordinator()
	defer stop()
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
	if err != nil {
		panic(err)
	}
	fmt.Println("third after a release: acquired")

	for _, p := range []*semaphore.Permit{second, third} {
		if _, err := p.Release(ctx); err != nil {
			panic(err)
		}
	}
	// Output:
	// third refused: true
	// 2 of 2 permits used by 2 holders
	// first: released
	// third after a release: acquired
}

// The package documentation's pattern: take a permit if one is free, keep
// it alive while the work runs under its context, and give it back when
// done.
func ExampleSemaphore_TryAcquire() {
	coord, stop := exampleCoordinator()
	defer stop()
	ctx := context.Background()

	sem, err := semaphore.New(coord, "batch:42:permits", 4)
	if err != nil {
		panic(err)
	}
	p, err := sem.TryAcquire(ctx, 30*time.Second)
	if errors.Is(err, coordination.ErrNotAcquired) {
		fmt.Println("all 4 are taken; try later")
		return
	}
	if err != nil {
		panic(err)
	}
	defer func() {
		out, err := p.Release(context.WithoutCancel(ctx))
		if err != nil {
			panic(err) // a real program logs it: the release is retried in the background
		}
		fmt.Println("permit:", out)
	}()
	p.KeepAlive()

	work(p.Context()) // cancelled if the permit is lost
	// Output:
	// work done with 1 permit held
	// permit: released
}

func work(ctx context.Context) {
	select {
	case <-ctx.Done():
		fmt.Println("work stopped:", context.Cause(ctx))
	default:
		fmt.Println("work done with 1 permit held")
	}
}

// A blocked Acquire wakes when a holder releases: it is notified over
// Pub/Sub, it does not poll.
func ExampleSemaphore_Acquire() {
	coord, stop := exampleCoordinator()
	defer stop()
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
	type result struct {
		p   *semaphore.Permit
		err error
	}
	done := make(chan result)
	go func() {
		waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		p, err := sem.Acquire(waitCtx, time.Minute)
		done <- result{p, err}
	}()
	time.Sleep(50 * time.Millisecond) // the waiter is blocked now
	if _, err := all.Release(ctx); err != nil {
		panic(err)
	}
	r := <-done
	if r.err != nil {
		panic(r.err)
	}
	fmt.Println("waiter holds", r.p.N(), "permit")
	if _, err := r.p.Release(ctx); err != nil {
		panic(err)
	}
	// Output:
	// waiter holds 1 permit
}

// An operator changes the capacity of a semaphore that every worker
// created with its own capacity, and drains it for maintenance: held
// permits are never revoked, Drain waits for them, Resume grants again.
func ExampleSemaphore_SetCapacity() {
	coord, stop := exampleCoordinator()
	defer stop()
	ctx := context.Background()

	worker, err := semaphore.New(coord, "encoders", 2) // every worker's own setting
	if err != nil {
		panic(err)
	}
	ops, err := semaphore.New(coord, "encoders", 2)
	if err != nil {
		panic(err)
	}
	held, err := worker.TryAcquire(ctx, time.Minute)
	if err != nil {
		panic(err)
	}

	// Raise it for every worker at once, whatever New was given.
	if err := ops.SetCapacity(ctx, 3); err != nil {
		panic(err)
	}
	more, err := worker.TryAcquireN(ctx, 2, time.Minute)
	if err != nil {
		panic(err)
	}
	st, err := ops.State(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Printf("capacity %d, used %d, set in the key: %v\n", st.Capacity, st.Used, st.CapacitySet)

	// Drain: nothing more is granted; wait (bounded) for the holders.
	go func() {
		time.Sleep(10 * time.Millisecond) // the holders finish their work
		for _, p := range []*semaphore.Permit{held, more} {
			if _, err := p.Release(ctx); err != nil {
				panic(err)
			}
		}
	}()
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := ops.Drain(dctx); err != nil {
		panic(err)
	}
	_, err = worker.TryAcquire(ctx, time.Minute)
	fmt.Println("drained, refused:", errors.Is(err, coordination.ErrNotAcquired))

	// Lower it and resume: at most 1 holder from now on.
	if err := ops.SetCapacity(ctx, 1); err != nil {
		panic(err)
	}
	if err := ops.Resume(ctx); err != nil {
		panic(err)
	}
	p, err := worker.TryAcquire(ctx, time.Minute)
	if err != nil {
		panic(err)
	}
	_, err = worker.TryAcquire(ctx, time.Minute)
	fmt.Println("resumed at capacity 1, second refused:", errors.Is(err, coordination.ErrNotAcquired))
	if _, err := p.Release(ctx); err != nil {
		panic(err)
	}
	// Output:
	// capacity 3, used 3, set in the key: true
	// drained, refused: true
	// resumed at capacity 1, second refused: true
}
