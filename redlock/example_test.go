package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/redlock"
)

// threeNodes returns coordinators over three embedded servers (three
// independent deployments), closed by the returned function.
func threeNodes() ([]*coordination.Coordinator, func()) {
	var (
		coords []*coordination.Coordinator
		closes []func()
	)
	for range 3 {
		srv, err := miniredis.Run()
		if err != nil {
			log.Fatal(err)
		}
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		coord, err := coordination.New(rdb, coordination.WithKeyPrefix("app:"))
		if err != nil {
			log.Fatal(err)
		}
		coords = append(coords, coord)
		closes = append(closes, func() { rdb.Close(); srv.Close() })
	}
	return coords, func() {
		for _, c := range closes {
			c()
		}
	}
}

// Run a report on one process at a time across three independent Redis
// deployments.
func Example() {
	coords, done := threeNodes()
	defer done()
	ctx := context.Background()
	a, b, c := coords[0], coords[1], coords[2]
	if err := snippetReport(ctx, a, b, c); err != nil {
		log.Fatal(err)
	}

	// While one process holds it, another group is turned away.
	g, err := redlock.New(coords)
	if err != nil {
		log.Fatal(err)
	}
	l, err := g.TryAcquire(ctx, "reports:nightly", 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	other, err := redlock.New(coords)
	if err != nil {
		log.Fatal(err)
	}
	_, err = other.TryAcquire(ctx, "reports:nightly", 30*time.Second)
	fmt.Println("second process:", errors.Is(err, coordination.ErrNotAcquired))
	fmt.Println("validity above 29.6s:", l.Validity() > 29600*time.Millisecond)
	out, err := l.Release(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("release:", out, "/", context.Cause(l.Context()))
	// Output:
	// report done
	// second process: true
	// validity above 29.6s: true
	// release: released / coordination: released
}

func snippetReport(ctx context.Context, a, b, c *coordination.Coordinator) error {
	g, err := redlock.New([]*coordination.Coordinator{a, b, c}) // one per deployment
	if err != nil {
		return err
	}
	l, err := g.TryAcquire(ctx, "reports:nightly", 30*time.Second)
	if errors.Is(err, coordination.ErrNotAcquired) {
		return nil // another process holds it
	}
	if err != nil {
		return err // too few nodes answered (a *redlock.QuorumError), bad input ...
	}
	defer func() {
		if _, err := l.Release(context.WithoutCancel(ctx)); err != nil {
			log.Printf("release: %v", err) // failed nodes are retried in the background
		}
	}()
	l.KeepAlive()
	return runReport(l.Context()) // cancelled when the validity ends or the lock is lost
}

func runReport(ctx context.Context) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	fmt.Println("report done")
	return nil
}

// A fencing node hands each holder a strictly increasing token for the
// resource to check (the key has a {hash tag}: the lease and its counter
// share a Cluster slot).
func ExampleWithFencing() {
	coords, done := threeNodes()
	defer done()
	ctx := context.Background()
	g, err := redlock.New(coords, redlock.WithFencing(0))
	if err != nil {
		log.Fatal(err)
	}
	for range 2 {
		// Acquire waits while a node still holds the previous lock: a
		// release returns once a quorum confirmed it, and the others
		// follow.
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		l, err := g.Acquire(actx, "{invoice:42}", 10*time.Second)
		cancel()
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("fencing token", l.FencingToken())
		if _, err := l.Release(ctx); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// fencing token 1
	// fencing token 2
}

// A process that restarts adopts the Redlock it held by its owner token,
// saved before the restart; an administrator reads the holder and forces
// a hung holder out, waking a blocked acquirer at once.
func ExampleGroup_Adopt() {
	coords, done := threeNodes()
	defer done()
	ctx := context.Background()
	g, err := redlock.New(coords)
	if err != nil {
		log.Fatal(err)
	}
	l, err := g.TryAcquire(ctx, "reports:nightly", 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	saved := l.Token() // e.g. written to a local file before the process restarts

	// After the restart: a new group over the same deployments.
	if err := snippetAdopt(ctx, coords, saved); err != nil {
		log.Fatal(err)
	}

	// An administrator frees a lock whose holder hangs.
	if _, err := g.TryAcquire(ctx, "reports:nightly", time.Hour); err != nil {
		log.Fatal(err)
	}
	acquired := make(chan error)
	go func() {
		l, err := g.Acquire(ctx, "reports:nightly", time.Minute) // blocks
		if err == nil {
			_, err = l.Release(ctx)
		}
		acquired <- err
	}()
	h, err := g.Holder(ctx, "reports:nightly")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("held for about %v more\n", h.Remaining.Round(time.Hour))
	released, err := g.ForceRelease(ctx, "reports:nightly", h.Token)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("forced:", released, "waiter:", <-acquired)
	// Output:
	// adopted with 30s validity left
	// held for about 1h0m0s more
	// forced: true waiter: <nil>
}

func snippetAdopt(ctx context.Context, coords []*coordination.Coordinator, saved string) error {
	g, err := redlock.New(coords)
	if err != nil {
		return err
	}
	l, err := g.Adopt(ctx, "reports:nightly", saved)
	if errors.Is(err, coordination.ErrNotHeld) {
		return nil // expired or taken over meanwhile: acquire it again
	}
	if err != nil {
		return err
	}
	fmt.Printf("adopted with %v validity left\n", l.Remaining().Round(time.Second))
	if _, err := l.Refresh(ctx, 30*time.Second); err != nil { // Adopt does not extend the TTL
		return err
	}
	l.KeepAlive()
	_, err = l.Release(ctx) // when the work is done
	return err
}
