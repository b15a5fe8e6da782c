package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/semaphore"
)

// The package documentation's snippet: at most 4 exports at once across
// every process.
func ExampleNew() {
	coord, stop := exampleCoordinator()
	defer stop()
	if err := snippetExport(context.Background(), coord); err != nil {
		log.Fatal(err)
	}
	// Output: exporting under a permit
}

func snippetExport(ctx context.Context, coord *coordination.Coordinator) error {
	sem, err := semaphore.New(coord, "batch:42:permits", 4)
	if err != nil {
		return err
	}
	p, err := sem.TryAcquire(ctx, 30*time.Second)
	if errors.Is(err, coordination.ErrNotAcquired) {
		return nil // all 4 are taken
	}
	if err != nil {
		return err
	}
	defer func() {
		if _, err := p.Release(context.WithoutCancel(ctx)); err != nil {
			log.Printf("release: %v", err) // retried in the background
		}
	}()
	p.KeepAlive()
	return export(p.Context()) // cancelled if the permit is lost
}

func export(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	fmt.Println("exporting under a permit")
	return nil
}

// docs/semaphore-latch.md's snippet: an operator sets the capacity for
// every worker, drains, and resumes.
func ExampleSemaphore_Drain() {
	coord, stop := exampleCoordinator()
	defer stop()
	sem, err := semaphore.New(coord, "encoders", 4)
	if err != nil {
		log.Fatal(err)
	}
	if err := snippetDrain(context.Background(), sem); err != nil {
		log.Fatal(err)
	}
	st, err := sem.State(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("capacity %d, draining %v\n", st.Capacity, st.Draining)
	// Output: capacity 8, draining false
}

func snippetDrain(ctx context.Context, sem *semaphore.Semaphore) error {
	if err := sem.SetCapacity(ctx, 8); err != nil { // every worker, at once
		return err
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := sem.Drain(dctx); err != nil { // nothing granted from here on
		// Some holders still working after 5 minutes: the drain stays until
		// Resume, so grant again before giving up.
		return errors.Join(err, sem.Resume(context.WithoutCancel(ctx)))
	}
	// ... maintenance with no permit held ...
	if err := sem.Resume(ctx); err != nil {
		return err
	}
	return nil
}
