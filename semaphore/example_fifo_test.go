package semaphore_test

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/coordkit/coordination/semaphore"
)

// Grant permits to blocked waiters in the order they arrived: a waiter
// for both permits, queued first, is granted before a later waiter for
// one, although one permit alone was free before both were.
func ExampleWithFIFO() {
	coord, stop := exampleCoordinator()
	defer stop()
	ctx := context.Background()

	sem, err := semaphore.New(coord, "jobs:encode", 2, semaphore.WithFIFO(true))
	if err != nil {
		log.Fatal(err)
	}
	a, err := sem.TryAcquire(ctx, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	b, err := sem.TryAcquire(ctx, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		order []int64
	)
	for _, n := range []int64{2, 1} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := sem.AcquireN(ctx, n, time.Minute)
			if err != nil {
				log.Print(err)
				return
			}
			mu.Lock()
			order = append(order, p.N())
			mu.Unlock()
			if _, err := p.Release(ctx); err != nil {
				log.Print(err)
			}
		}()
		time.Sleep(100 * time.Millisecond) // the waiter for 2 queues first
	}
	for _, p := range []*semaphore.Permit{a, b} {
		if _, err := p.Release(ctx); err != nil {
			log.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond) // one permit free: nobody jumps the queue
	}
	wg.Wait()
	fmt.Println("permits granted in order:", order)
	// Output: permits granted in order: [2 1]
}
