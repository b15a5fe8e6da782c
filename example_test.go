package coordination_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/lock"
)

// One coordinator per client, shared by every primitive: it carries the key
// prefix, hooks, meter provider and logger.
func Example() {
	srv, err := miniredis.Run() // or any Redis: redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()

	coord, err := coordination.New(rdb, coordination.WithKeyPrefix("billing:"))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	l, err := lock.TryAcquire(ctx, coord, "nightly-report", 30e9)
	if err != nil {
		panic(err)
	}
	fmt.Println("stored under", coord.Key("nightly-report"), srv.Exists("billing:nightly-report"))

	_, err = lock.TryAcquire(ctx, coord, "nightly-report", 30e9)
	fmt.Println("second acquire:", errors.Is(err, coordination.ErrNotAcquired))

	_, err = lock.TryAcquire(ctx, coord, "", 30e9)
	fmt.Println(err)

	out, _ := l.Release(ctx)
	fmt.Println(out)
	// Output:
	// stored under billing:nightly-report true
	// second acquire: true
	// coordination: invalid argument key: must not be empty
	// released
}

// Retry loops ask Classify whether an error is worth another try.
func ExampleClassify() {
	for _, err := range []error{
		context.Canceled,
		coordination.ErrInvalidArgument,
		&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED},
		fmt.Errorf("acquire: %w", coordination.ErrWrongType),
	} {
		fmt.Println(coordination.Classify(err))
	}
	// Output:
	// canceled
	// terminal
	// transient
	// terminal
}
