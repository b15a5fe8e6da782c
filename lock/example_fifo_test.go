package lock_test

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/coordkit/coordination/lock"
)

// Hand a lock to its waiters in the order they arrived: only the queue's
// head is woken at each release, and TryAcquire does not jump the queue.
func ExampleWithFIFO() {
	coord, done := newCoordinator()
	defer done()
	ctx := context.Background()

	mu, err := lock.New(coord, "reports:nightly", lock.WithFIFO(true))
	if err != nil {
		log.Fatal(err)
	}
	holder, err := mu.TryAcquire(ctx, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mutex sync.Mutex
		order []int
	)
	for i := 1; i <= 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := mu.Acquire(ctx, time.Minute)
			if err != nil {
				log.Print(err)
				return
			}
			mutex.Lock()
			order = append(order, i)
			mutex.Unlock()
			if _, err := l.Release(ctx); err != nil {
				log.Print(err)
			}
		}()
		time.Sleep(100 * time.Millisecond) // waiter i queues before waiter i+1
	}
	if _, err := holder.Release(ctx); err != nil {
		log.Fatal(err)
	}
	wg.Wait()
	fmt.Println("granted in order:", order)
	// Output: granted in order: [1 2 3]
}
