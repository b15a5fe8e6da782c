package latch_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/latch"
)

// Three workers count a latch down; the final step waits for all of them.
func Example() {
	mr, err := miniredis.Run() // stands in for a real Redis server
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer func() {
		if err := rdb.Close(); err != nil {
			panic(err)
		}
	}()
	coord, err := coordination.New(rdb, coordination.WithKeyPrefix("example:"))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()

	// The coordinator of the batch creates the latch: 3 parts, and at most
	// a minute for all of them before the batch counts as broken.
	batch, err := latch.New(coord, "batch:42:done", latch.WithDeadline(time.Minute))
	if err != nil {
		panic(err)
	}
	done, err := batch.Create(ctx, 3)
	if err != nil {
		panic(err)
	}
	finished := make(chan bool)
	go func() {
		ok, err := done.Wait(ctx)
		switch {
		case errors.Is(err, latch.ErrBroken):
			fmt.Println("a worker did not finish in time")
		case err != nil:
			panic(err)
		}
		finished <- ok
	}()

	// Each worker, usually in another process, joins the current
	// generation and counts down once.
	for part := 1; part <= 3; part++ {
		l, err := latch.New(coord, "batch:42:done")
		if err != nil {
			panic(err)
		}
		w, err := l.Join(ctx)
		if err != nil {
			panic(err)
		}
		left, err := w.CountDown(ctx)
		if err != nil {
			panic(err)
		}
		fmt.Printf("part %d done, %d left\n", part, left)
	}
	fmt.Println("all parts done:", <-finished)

	// Another count-down on the complete latch is refused.
	_, err = done.CountDown(ctx)
	if err != nil && !errors.Is(err, latch.ErrCompleted) {
		panic(err)
	}
	fmt.Println("refused:", errors.Is(err, latch.ErrCompleted))
	// Output:
	// part 1 done, 2 left
	// part 2 done, 1 left
	// part 3 done, 0 left
	// all parts done: true
	// refused: true
}

// Reset starts a new generation: waiters of the old one return false, and
// its late count-downs are refused without touching the new one.
func ExampleLatch_Reset() {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer func() {
		if err := rdb.Close(); err != nil {
			panic(err)
		}
	}()
	coord, err := coordination.New(rdb)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()

	inputs, err := latch.New(coord, "nightly:inputs")
	if err != nil {
		panic(err)
	}
	old, err := inputs.Create(ctx, 2)
	if err != nil {
		panic(err)
	}
	fresh, err := inputs.Reset(ctx, 4)
	if err != nil {
		panic(err)
	}
	ok, err := old.Wait(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("old generation completed:", ok)
	_, err = old.CountDown(ctx)
	if err != nil && !errors.Is(err, latch.ErrStaleGeneration) {
		panic(err)
	}
	fmt.Println("late count-down refused:", errors.Is(err, latch.ErrStaleGeneration))
	n, err := fresh.Count(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Printf("generation %d still needs %d\n", fresh.Number(), n)
	// Output:
	// old generation completed: false
	// late count-down refused: true
	// generation 2 still needs 4
}
