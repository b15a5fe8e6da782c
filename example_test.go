package coordination_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/fencing"
	"github.com/coordkit/coordination/lock"
)

// One coordinator per client, shared by every primitive: it carries the key
// prefix, hooks, meter provider and logger.
func Example() {
	srv, err := miniredis.Run() // or any Redis: redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()

	coord, err := coordination.New(rdb, coordination.WithKeyPrefix("billing:"))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	mu, err := lock.New(coord, "nightly-report")
	if err != nil {
		log.Fatal(err)
	}
	l, err := mu.TryAcquire(ctx, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("stored under the prefix:", srv.Exists("billing:nightly-report"))

	_, err = mu.TryAcquire(ctx, 30*time.Second)
	fmt.Println("second acquire:", errors.Is(err, coordination.ErrNotAcquired))

	_, err = lock.New(coord, "")
	fmt.Println(err)

	out, err := l.Release(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out)
	// Output:
	// stored under the prefix: true
	// second acquire: true
	// coordination: invalid argument key: must not be empty
	// released
}

// The README's Quick start, run on an embedded server.
func Example_quickStart() {
	srv, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	if err := snippetQuickStart(context.Background(), srv.Addr()); err != nil {
		log.Fatal(err)
	}
	// Output:
	// holding fencing token 1
}

// snippetQuickStart is the body of README.md's Quick start program's run
// function (TestQuickStartInAFreshModule runs the whole program).
func snippetQuickStart(ctx context.Context, addr string) (err error) {
	rdb := redis.NewClient(&redis.Options{
		Addr:                  addr,
		ContextTimeoutEnabled: true, // without it a context's deadline does not bound a command
	})
	defer rdb.Close()
	coord, err := coordination.New(rdb, coordination.WithKeyPrefix("billing:"))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, coord.Shutdown(context.Background())) }()
	// A fencing-token lock: both keys share one {hash tag} (one Cluster slot).
	mu, err := fencing.New(coord, "{invoice:42}:lease", "{invoice:42}:fence")
	if err != nil {
		return err // bad keys (empty, too long, in two Cluster slots); nothing sent
	}
	lk, err := mu.TryAcquire(ctx, 30*time.Second)
	if errors.Is(err, coordination.ErrNotAcquired) {
		fmt.Println("another replica holds the lock")
		return nil
	}
	if err != nil {
		return err // Redis unreachable, bad input, a corrupt key ...
	}
	lk.KeepAlive() // renews every TTL/3; lk.Context() is cancelled if the lock is lost
	// Pass the fencing token with every write; the resource rejects older ones.
	fmt.Println("holding fencing token", lk.FencingToken())
	_, err = lk.Release(ctx) // a failed release is also retried in the background
	return err
}

// Retry loops ask IsTransient whether an error is worth another try.
func ExampleIsTransient() {
	for _, err := range []error{
		context.Canceled,
		coordination.ErrInvalidArgument,
		&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED},
		fmt.Errorf("acquire: %w", coordination.ErrBadState),
	} {
		fmt.Println(coordination.IsTransient(err))
	}
	// Output:
	// false
	// false
	// true
	// false
}

// WithReplicaAcks makes every operation wait, in the same round trip, until
// replicas have acknowledged its writes. Without replicas (miniredis' WAIT
// answers 0) every operation fails with ErrNotReplicated: transient and
// ambiguous, and an acquisition so failed is undone in the background.
func ExampleWithReplicaAcks() {
	srv, err := miniredis.Run() // or redis.NewFailoverClient over Sentinel, or a Cluster client
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()

	// One replica must acknowledge each write within 250 ms.
	coord, err := coordination.New(rdb, coordination.WithReplicaAcks(1, 250*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	mu, err := lock.New(coord, "report")
	if err != nil {
		log.Fatal(err)
	}
	_, err = mu.TryAcquire(context.Background(), 30*time.Second)
	fmt.Println("not replicated:", errors.Is(err, coordination.ErrNotReplicated))
	fmt.Println("ambiguous:", coordination.IsAmbiguous(err))
	// The undo runs in the background. It leaves a tombstone in the key
	// for a while (a free lock that the acquisition's request cannot take
	// if it reaches the server late).
	for v, _ := srv.Get("report"); !strings.HasSuffix(v, "!"); v, _ = srv.Get("report") {
		time.Sleep(time.Millisecond)
	}
	// Free: a coordinator without the replica setting (miniredis has no
	// replica) takes the lock over the tombstone.
	plain, err := coordination.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	other, err := lock.New(plain, "report")
	if err != nil {
		log.Fatal(err)
	}
	_, err = other.TryAcquire(context.Background(), 30*time.Second)
	fmt.Println("undone:", err == nil)
	// Output:
	// not replicated: true
	// ambiguous: true
	// undone: true
}
