package rwlease_test

import (
	"context"
	"fmt"
	"log"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/rwlease"
)

// A process that restarts adopts its read lease by its owner token; the
// holders' read lists every reader.
func ExampleRWMutex_Adopt() {
	coord, done := newCoordinator()
	defer done()
	ctx := context.Background()
	m, err := rwlease.New(coord, "catalog")
	if err != nil {
		log.Fatal(err)
	}
	r, err := m.TryRead(ctx, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := m.TryRead(ctx, time.Minute); err != nil { // another reader
		log.Fatal(err)
	}
	saved := r.Token()

	// After the restart: a new coordinator (here on the same client).
	coord, err = coordination.New(coord.Client())
	if err != nil {
		log.Fatal(err)
	}
	m, err = rwlease.New(coord, "catalog")
	if err != nil {
		log.Fatal(err)
	}
	adopted, err := m.Adopt(ctx, saved)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("adopted:", adopted.Mode(), adopted.Remaining().Round(time.Second))
	hs, err := m.Holders(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, h := range hs {
		fmt.Println("holder: shared", h.Shared, h.Remaining.Round(time.Second))
	}
	// Output:
	// adopted: read 30s
	// holder: shared true 30s
	// holder: shared true 1m0s
}
