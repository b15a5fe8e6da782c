package lock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/lock"
)

// A process that restarts adopts the lock it held by its owner token,
// saved before the restart, instead of waiting for the lock to expire.
func ExampleMutex_Adopt() {
	coord, done := newCoordinator()
	defer done()
	ctx := context.Background()
	mu, err := lock.New(coord, "jobs:nightly")
	if err != nil {
		log.Fatal(err)
	}
	l, err := mu.TryAcquire(ctx, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	saved := l.Token() // e.g. written to a local file before the process restarts

	// After the restart: a new coordinator (here on the same client).
	coord, err = coordination.New(coord.Client())
	if err != nil {
		log.Fatal(err)
	}
	if err := snippetAdopt(ctx, coord, saved); err != nil {
		log.Fatal(err)
	}
	// Output:
	// adopted with 30s left
}

func snippetAdopt(ctx context.Context, coord *coordination.Coordinator, saved string) error {
	mu, err := lock.New(coord, "jobs:nightly")
	if err != nil {
		return err
	}
	l, err := mu.Adopt(ctx, saved)
	if errors.Is(err, coordination.ErrNotHeld) {
		return nil // expired or taken over meanwhile: acquire it again
	}
	if err != nil {
		return err
	}
	fmt.Printf("adopted with %v left\n", l.Remaining().Round(time.Second))
	if _, err := l.Refresh(ctx, 30*time.Second); err != nil { // Adopt does not extend the TTL
		return err
	}
	l.KeepAlive()
	_, err = l.Release(ctx) // when the work is done
	return err
}

// An administrator reads who holds a lock and force-releases it: a blocked
// acquirer takes it at once.
func ExampleMutex_ForceRelease() {
	coord, done := newCoordinator()
	defer done()
	ctx := context.Background()
	mu, err := lock.New(coord, "jobs:nightly")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := mu.TryAcquire(ctx, time.Hour); err != nil { // a holder that hangs
		log.Fatal(err)
	}
	acquired := make(chan error)
	go func() {
		l, err := mu.Acquire(ctx, time.Minute)
		if err == nil {
			_, err = l.Release(ctx)
		}
		acquired <- err
	}()

	h, err := mu.Holder(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("held for", h.Remaining)
	ok, err := mu.ForceRelease(ctx, h.Token) // never removes a newer holder
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("force released:", ok)
	fmt.Println("waiter:", <-acquired)
	// Output:
	// held for 1h0m0s
	// force released: true
	// waiter: <nil>
}
