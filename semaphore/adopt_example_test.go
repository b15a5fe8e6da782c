package semaphore_test

import (
	"context"
	"fmt"
	"log"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/semaphore"
)

// A process that restarts adopts its permits by their owner token; an
// administrator lists the holders and force-releases one.
func ExampleSemaphore_Adopt() {
	coord, done := exampleCoordinator()
	defer done()
	ctx := context.Background()
	sem, err := semaphore.New(coord, "batch:42", 4)
	if err != nil {
		log.Fatal(err)
	}
	p, err := sem.TryAcquireN(ctx, 3, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	saved := p.Token()

	// After the restart: a new coordinator (here on the same client).
	coord, err = coordination.New(coord.Client(), coordination.WithKeyPrefix("example:"))
	if err != nil {
		log.Fatal(err)
	}
	sem, err = semaphore.New(coord, "batch:42", 4)
	if err != nil {
		log.Fatal(err)
	}
	adopted, err := sem.Adopt(ctx, saved)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("adopted permits:", adopted.N(), adopted.Remaining().Round(time.Second))

	hs, err := sem.Holders(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("holders:", len(hs), "permits:", hs[0].Permits)
	ok, err := sem.ForceRelease(ctx, hs[0].Token)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("force released:", ok)
	// Output:
	// adopted permits: 3 30s
	// holders: 1 permits: 3
	// force released: true
}
