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
	first, err := fencing.TryAcquire(ctx, coord, "{invoice:42}:lease", "{invoice:42}:fence", 30*time.Second)
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
	ok, newest, err := fencing.GuardedSet(ctx, coord, "{invoice:42}:pdf", first.FencingToken(), []byte("v1"), 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("first writes:", ok, "newest token:", newest)

	value, token, found, err := fencing.GuardedGet(ctx, coord, "{invoice:42}:pdf")
	if err != nil || !found {
		log.Fatal(err, found)
	}
	fmt.Printf("stored %q with token %d\n", value, token)
	// Output:
	// first token: 1
	// second holder wrote with token 2
	// first writes: false newest token: 2
	// stored "v2" with token 2
}

func snippetWrite(ctx context.Context, coord *coordination.Coordinator, pdf []byte) error {
	lk, err := fencing.TryAcquire(ctx, coord, "{invoice:42}:lease", "{invoice:42}:fence", 30*time.Second)
	if err != nil {
		return err // coordination.ErrNotAcquired when another holder has it
	}
	defer func() {
		if _, err := lk.Release(context.WithoutCancel(ctx)); err != nil {
			log.Printf("release: %v", err) // retried in the background
		}
	}()
	lk.KeepAlive()
	ok, newest, err := fencing.GuardedSet(ctx, coord, "{invoice:42}:pdf", lk.FencingToken(), pdf, 0)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("a newer holder (token %d) wrote first", newest)
	}
	fmt.Println("second holder wrote with token", lk.FencingToken())
	return nil
}

// A lock that another holder has is refused at once by TryAcquire.
func ExampleTryAcquire() {
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
	held, err := fencing.TryAcquire(ctx, coord, "{job}:lease", "{job}:fence", time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	_, err = fencing.TryAcquire(ctx, coord, "{job}:lease", "{job}:fence", time.Minute)
	fmt.Println(errors.Is(err, coordination.ErrNotAcquired))
	if _, err := held.Release(ctx); err != nil {
		log.Fatal(err)
	}
	// Output: true
}
