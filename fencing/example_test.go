package fencing_test

import (
	"context"
	"fmt"
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
		panic(err)
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	coord, _ := coordination.New(rdb, coordination.WithKeyPrefix("app:"))
	ctx := context.Background()

	// Both keys share the {invoice:42} hash tag: one Cluster slot.
	first, err := fencing.TryAcquire(ctx, coord, "{invoice:42}:lease", "{invoice:42}:fence", 30*time.Second)
	if err != nil {
		panic(err)
	}
	fmt.Println("first token:", first.FencingToken())
	first.Release(ctx)

	second, _ := fencing.TryAcquire(ctx, coord, "{invoice:42}:lease", "{invoice:42}:fence", 30*time.Second)
	fmt.Println("second token:", second.FencingToken())
	ok, _, _ := fencing.GuardedSet(ctx, coord, "{invoice:42}:pdf", second.FencingToken(), []byte("v2"), 0)
	fmt.Println("second writes:", ok)

	// The first holder, paused all this time, finally writes.
	ok, newest, _ := fencing.GuardedSet(ctx, coord, "{invoice:42}:pdf", first.FencingToken(), []byte("v1"), 0)
	fmt.Println("first writes:", ok, "newest token:", newest)

	value, token, _, _ := fencing.GuardedGet(ctx, coord, "{invoice:42}:pdf")
	fmt.Printf("stored %q with token %d\n", value, token)
	second.Release(ctx)
	// Output:
	// first token: 1
	// second token: 2
	// second writes: true
	// first writes: false newest token: 2
	// stored "v2" with token 2
}
