package fencing_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/fencing"
)

// A process that restarts adopts the fencing lock it held by its owner
// token, with the fencing token it was acquired with; a forced release
// keeps the counter, so the next holder's token is larger.
func ExampleMutex_Adopt() {
	srv, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	newMutex := func() *fencing.Mutex { // one coordinator per process
		coord, err := coordination.New(rdb)
		if err != nil {
			log.Fatal(err)
		}
		m, err := fencing.New(coord, "{invoice:42}:lease", "{invoice:42}:fence")
		if err != nil {
			log.Fatal(err)
		}
		return m
	}
	l, err := newMutex().TryAcquire(ctx, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	saved := l.Token()

	// After the restart.
	m := newMutex()
	adopted, err := m.Adopt(ctx, saved)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("adopted fencing token:", adopted.FencingToken(), adopted.Remaining().Round(time.Second))

	// An administrator forces it out; the next holder's token is larger.
	h, err := m.Holder(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := m.ForceRelease(ctx, h.Token); err != nil {
		log.Fatal(err)
	}
	next, err := m.TryAcquire(ctx, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("next fencing token:", next.FencingToken())
	// Output:
	// adopted fencing token: 1 30s
	// next fencing token: 2
}
