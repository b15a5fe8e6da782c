package fencing_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/fencing"
)

// Each holder writes with its fencing token; the store refuses a write from
// a holder older than the newest writer.
func Example() {
	srv, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	coord, err := coordination.New(rdb, coordination.WithKeyPrefix("app:"))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	// Both keys share the {invoice:42} hash tag: one Cluster slot.
	mu, err := fencing.New(coord, "{invoice:42}:lease", "{invoice:42}:fence")
	if err != nil {
		log.Fatal(err)
	}
	first, err := mu.TryAcquire(ctx, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("first token:", first.FencingToken())
	if _, err := first.Release(ctx); err != nil {
		log.Fatal(err)
	}

	// The second holder runs the documented snippet and writes.
	if err := snippetWrite(ctx, coord, []byte("v2")); err != nil {
		log.Fatal(err)
	}

	// The first holder, paused all this time, finally writes.
	pdfs, err := fencing.NewGuarded(coord, "{invoice:42}:pdf")
	if err != nil {
		log.Fatal(err)
	}
	ok, newest, err := pdfs.Set(ctx, first.FencingToken(), []byte("v1"), 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("first writes:", ok, "newest token:", newest)

	value, token, found, err := pdfs.Get(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if !found {
		log.Fatal("the resource was not written")
	}
	fmt.Printf("stored %q with token %d\n", value, token)
	// Output:
	// first token: 1
	// second holder wrote with token 2
	// first writes: false newest token: 2
	// stored "v2" with token 2
}

func snippetWrite(ctx context.Context, coord *coordination.Coordinator, pdf []byte) error {
	mu, err := fencing.New(coord, "{invoice:42}:lease", "{invoice:42}:fence")
	if err != nil {
		return err
	}
	pdfs, err := fencing.NewGuarded(coord, "{invoice:42}:pdf")
	if err != nil {
		return err
	}
	lk, err := mu.TryAcquire(ctx, 30*time.Second)
	if err != nil {
		return err // coordination.ErrNotAcquired when another holder has it
	}
	defer func() {
		if _, err := lk.Release(context.WithoutCancel(ctx)); err != nil {
			log.Printf("release: %v", err) // retried in the background
		}
	}()
	lk.KeepAlive()
	ok, newest, err := pdfs.Set(ctx, lk.FencingToken(), pdf, 0)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("a newer holder (token %d) wrote first", newest)
	}
	fmt.Println("second holder wrote with token", lk.FencingToken())
	return nil
}

// A lock that another holder has is refused at once by TryAcquire, whether
// through the same Mutex or another one on the same keys.
func ExampleMutex_TryAcquire() {
	srv, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	coord, err := coordination.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	mu, err := fencing.New(coord, "{job}:lease", "{job}:fence", fencing.WithHolder("worker-1"))
	if err != nil {
		log.Fatal(err)
	}
	held, err := mu.TryAcquire(ctx, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	_, err = mu.TryAcquire(ctx, time.Minute)
	fmt.Println(errors.Is(err, coordination.ErrNotAcquired))
	if _, err := held.Release(ctx); err != nil {
		log.Fatal(err)
	}
	again, err := mu.TryAcquire(ctx, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("token after release:", again.FencingToken())
	if _, err := again.Release(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// true
	// token after release: 2
}
