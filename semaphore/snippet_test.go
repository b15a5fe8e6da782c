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
