package latch_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/latch"
)

// The package documentation's snippet: three workers count down, the batch
// waits for them.
func ExampleLatch_Create() {
	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer func() {
		if err := rdb.Close(); err != nil {
			log.Fatal(err)
		}
	}()
	coord, err := coordination.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	if err := snippetBatch(context.Background(), coord); err != nil {
		log.Fatal(err)
	}
	// Output: all 3 done: true
}

func snippetBatch(ctx context.Context, coord *coordination.Coordinator) error {
	l, err := latch.New(coord, "batch:42:done", latch.WithDeadline(10*time.Minute), latch.WithKeyTTL(time.Hour))
	if err != nil {
		return err
	}
	g, err := l.Create(ctx, 3)
	if err != nil {
		return err
	}
	for i := range 3 { // each worker, in any process
		go func() {
			w, err := l.Join(ctx)
			if err == nil {
				_, err = w.CountDown(ctx)
			}
			if err != nil {
				log.Printf("worker %d: %v", i, err)
			}
		}()
	}
	ok, err := g.Wait(ctx) // true once all 3 counted down
	if err != nil {
		return err // latch.ErrBroken past the deadline
	}
	fmt.Println("all 3 done:", ok)
	return nil
}
