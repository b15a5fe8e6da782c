package rwlease_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/rwlease"
)

// newCoordinator returns a coordinator over an embedded server, closed
// when the example ends.
func newCoordinator() (*coordination.Coordinator, func()) {
	srv, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	coord, err := coordination.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	return coord, func() { rdb.Close(); srv.Close() }
}

// Readers share the key; a writer is kept out while any of them holds it,
// and readers are kept out while the writer holds it.
func Example() {
	coord, done := newCoordinator()
	defer done()
	ctx := context.Background()
	if err := snippetCatalog(ctx, coord); err != nil {
		log.Fatal(err)
	}

	// One RWMutex serves any number of acquisitions, in either mode.
	catalog, err := rwlease.New(coord, "catalog:rw")
	if err != nil {
		log.Fatal(err)
	}
	r1, err := catalog.TryRead(ctx, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	r2, err := catalog.TryRead(ctx, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	_, err = catalog.TryWrite(ctx, 30*time.Second)
	fmt.Println("writer while two readers hold:", err)
	for _, r := range []*rwlease.Lease{r1, r2} {
		if _, err := r.Release(ctx); err != nil {
			log.Fatal(err)
		}
	}
	w, err := catalog.TryWrite(ctx, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	_, err = catalog.TryRead(ctx, 30*time.Second)
	fmt.Println("reader while the writer holds:", err)
	out, err := w.Release(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(w.Mode(), out)
	// Output:
	// catalog read
	// writer while two readers hold: coordination: rwlease write acquire "catalog:rw": not acquired
	// reader while the writer holds: coordination: rwlease read acquire "catalog:rw": not acquired
	// write released
}

func snippetCatalog(ctx context.Context, coord *coordination.Coordinator) error {
	catalog, err := rwlease.New(coord, "catalog:rw")
	if err != nil {
		return err
	}
	rd, err := catalog.Read(ctx, 30*time.Second)
	if err != nil {
		return err // coordination.ErrNotAcquired once ctx ends
	}
	defer func() {
		if _, err := rd.Release(context.WithoutCancel(ctx)); err != nil {
			log.Printf("release: %v", err) // retried in the background
		}
	}()
	return readCatalog(rd.Context()) // cancelled if the lease is lost
}

func readCatalog(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	fmt.Println("catalog read")
	return nil
}

// Write waits for the readers to leave; while it waits, new readers queue
// behind it (phase-fair, the default), so a stream of readers cannot starve it.
func ExampleRWMutex_Write() {
	coord, done := newCoordinator()
	defer done()
	ctx := context.Background()

	catalog, err := rwlease.New(coord, "catalog:rw")
	if err != nil {
		log.Fatal(err)
	}
	reader, err := catalog.TryRead(ctx, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	writerDone := make(chan error, 1)
	go func() { writerDone <- snippetRebuild(ctx, coord) }()
	time.Sleep(100 * time.Millisecond) // the writer is waiting now

	_, err = catalog.TryRead(ctx, time.Minute)
	fmt.Println("new reader while a writer waits:", errors.Is(err, coordination.ErrNotAcquired))
	if _, err := reader.Release(ctx); err != nil { // the writer gets in
		log.Fatal(err)
	}
	if err := <-writerDone; err != nil {
		log.Fatal(err)
	}
	// Output:
	// new reader while a writer waits: true
	// catalog rebuilt
}

func snippetRebuild(ctx context.Context, coord *coordination.Coordinator) error {
	catalog, err := rwlease.New(coord, "catalog:rw")
	if err != nil {
		return err
	}
	wr, err := catalog.Write(ctx, 30*time.Second)
	if err != nil {
		return err // coordination.ErrNotAcquired once ctx ends
	}
	defer func() {
		if _, err := wr.Release(context.WithoutCancel(ctx)); err != nil {
			log.Printf("release: %v", err) // retried in the background
		}
	}()
	wr.KeepAlive()
	return rebuildCatalog(wr.Context()) // new readers queue behind this writer
}

func rebuildCatalog(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	fmt.Println("catalog rebuilt")
	return nil
}

// Under the default policy, PhaseFair, a reader that waited behind a
// writer is handed the next read phase when that writer releases, before
// a second writer that was waiting too; WithPolicy(rwlease.WriterPreference)
// would let the second writer go first.
func ExampleWithPolicy() {
	coord, done := newCoordinator()
	defer done()
	ctx := context.Background()

	catalog, err := rwlease.New(coord, "catalog:rw", rwlease.WithPolicy(rwlease.PhaseFair))
	if err != nil {
		log.Fatal(err)
	}
	first, err := catalog.TryWrite(ctx, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	order := make(chan string, 2)
	acquire := func(mode string, take func(context.Context, time.Duration) (*rwlease.Lease, error)) {
		l, err := take(ctx, time.Minute)
		if err != nil {
			log.Print(err)
			order <- mode + " failed"
			return
		}
		order <- mode
		time.Sleep(50 * time.Millisecond) // work
		if _, err := l.Release(ctx); err != nil {
			log.Print(err)
		}
	}
	go acquire("reader", catalog.Read)
	time.Sleep(500 * time.Millisecond) // the reader waits behind the writer
	go acquire("second writer", catalog.Write)
	time.Sleep(500 * time.Millisecond) // and so does a second writer

	if _, err := first.Release(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println(<-order)
	fmt.Println(<-order)
	// Output:
	// reader
	// second writer
}
