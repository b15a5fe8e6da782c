package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/ratelimit"
)

// Without WithQueue, the local queue of Wait holds
// ratelimit.DefaultQueueWaiters requests: one more is refused at once with
// a *WaitError saying the queue is full.
func ExampleLimiter_Wait_defaultBound() {
	coord, done := exampleCoordinator()
	defer done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	lim, err := ratelimit.New(coord, "limits:export", ratelimit.FixedWindow{Limit: 1, Window: time.Hour})
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()
	if _, err := lim.Wait(ctx, 1); err != nil {
		log.Fatal(err)
	}
	for range ratelimit.DefaultQueueWaiters {
		go lim.Wait(ctx, 1) // each waits for the next window
	}
	for lim.Statistics().QueuedPermits < ratelimit.DefaultQueueWaiters {
		time.Sleep(time.Millisecond)
	}
	_, err = lim.Wait(ctx, 1)
	var we *ratelimit.WaitError
	fmt.Println("refused:", errors.As(err, &we), errors.Is(err, coordination.ErrNotAcquired))
	// Output:
	// refused: true true
}

// At most 2 partitions keep a live limiter: a third evicts the least
// recently used one, whose count stays in Redis for its next limiter.
func ExampleWithMaxPartitions() {
	coord, done := exampleCoordinator()
	defer done()
	ctx := context.Background()

	perClient, err := ratelimit.NewPartitioned(func(client string) (*ratelimit.Limiter, error) {
		return ratelimit.New(coord, ratelimit.PartitionKey("limits:client", client), ratelimit.FixedWindow{Limit: 1, Window: time.Minute})
	}, ratelimit.WithMaxPartitions(2))
	if err != nil {
		log.Fatal(err)
	}
	defer perClient.Close()
	for _, client := range []string{"alice", "bob", "carol", "alice"} {
		dec, err := perClient.Allow(ctx, client, 1)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: allowed %v, live partitions %d\n", client, dec.Allowed(), perClient.Len())
	}
	// Output:
	// alice: allowed true, live partitions 1
	// bob: allowed true, live partitions 2
	// carol: allowed true, live partitions 2
	// alice: allowed false, live partitions 2
}

// Raise every client's limit at once: live partitions and those created
// afterwards take the new settings.
func ExamplePartitioned_UpdateAll() {
	coord, done := exampleCoordinator()
	defer done()
	ctx := context.Background()

	perClient, err := ratelimit.NewPartitioned(func(client string) (*ratelimit.Limiter, error) {
		return ratelimit.New(coord, ratelimit.PartitionKey("limits:client", client), ratelimit.FixedWindow{Limit: 1, Window: time.Minute})
	})
	if err != nil {
		log.Fatal(err)
	}
	defer perClient.Close()
	if _, err := perClient.Allow(ctx, "alice", 1); err != nil {
		log.Fatal(err)
	}

	err = perClient.UpdateAll(ctx, ratelimit.FixedWindow{Limit: 3, Window: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	for _, client := range []string{"alice", "bob"} {
		dec, err := perClient.Allow(ctx, client, 1)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: allowed %v, %d left\n", client, dec.Allowed(), dec.Available())
	}
	// Output:
	// alice: allowed true, 1 left
	// bob: allowed true, 2 left
}

// Let every tenant run 2 reports at once instead of 1.
func ExamplePartitionedConcurrency_UpdateAll() {
	coord, done := exampleCoordinator()
	defer done()
	ctx := context.Background()

	perTenant, err := ratelimit.NewPartitionedConcurrency(func(tenant string) (*ratelimit.ConcurrencyLimiter, error) {
		return ratelimit.NewConcurrency(coord, ratelimit.PartitionKey("limits:reports", tenant), 1)
	})
	if err != nil {
		log.Fatal(err)
	}
	defer perTenant.Close()
	first, err := perTenant.TryAcquire(ctx, "acme", 1)
	if err != nil {
		log.Fatal(err)
	}
	defer first.Release(ctx)

	if err := perTenant.UpdateAll(ctx, 2); err != nil {
		log.Fatal(err)
	}
	second, err := perTenant.TryAcquire(ctx, "acme", 1)
	if err != nil {
		log.Fatal(err)
	}
	defer second.Release(ctx)
	fmt.Println("acme runs 2 reports:", second.N() == 1)
	// Output:
	// acme runs 2 reports: true
}
