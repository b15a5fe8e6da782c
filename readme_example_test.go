package coordination_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/idempotency"
	"github.com/coordkit/coordination/latch"
	"github.com/coordkit/coordination/leader"
	"github.com/coordkit/coordination/lock"
	"github.com/coordkit/coordination/ratelimit"
	"github.com/coordkit/coordination/redlock"
	"github.com/coordkit/coordination/rwlease"
	"github.com/coordkit/coordination/semaphore"
)

// The README's snippets, one per primitive and per middleware, each the body
// of a snippet function run by an Example on an embedded server.

// exampleCoordinator returns a coordinator on a fresh miniredis and a
// function that stops both.
func exampleCoordinator() (*coordination.Coordinator, func()) {
	srv, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	coord, err := coordination.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	return coord, func() {
		if err := coord.Shutdown(context.Background()); err != nil {
			log.Fatal(err)
		}
		_ = rdb.Close()
		srv.Close()
	}
}

// The work the snippets protect.
func runReport(ctx context.Context) error {
	fmt.Println("report runs, lock held:", ctx.Err() == nil)
	return nil
}

func serveCatalog(ctx context.Context) error {
	fmt.Println("catalog read, lease held:", ctx.Err() == nil)
	return nil
}

func encode(ctx context.Context) error {
	fmt.Println("encoding, permit held:", ctx.Err() == nil)
	return nil
}

func runScheduler(ctx context.Context, token int64) error {
	fmt.Println("scheduler runs with fencing token", token)
	<-ctx.Done()
	return nil
}

func charge(context.Context) ([]byte, error) { return []byte("r-1001"), nil }

func Example_readmeLock() {
	coord, stop := exampleCoordinator()
	defer stop()
	if err := snippetReadmeLock(context.Background(), coord); err != nil {
		log.Fatal(err)
	}
	// Output:
	// report runs, lock held: true
}

func snippetReadmeLock(ctx context.Context, coord *coordination.Coordinator) error {
	mu, err := lock.New(coord, "reports:nightly")
	if err != nil {
		return err
	}
	lk, err := mu.Acquire(ctx, 30*time.Second) // waits; TryAcquire does not
	if err != nil {
		return err
	}
	lk.KeepAlive()
	err = runReport(lk.Context()) // cancelled if the lock is lost
	_, rerr := lk.Release(context.WithoutCancel(ctx))
	return errors.Join(err, rerr)
}

func Example_readmeRWLease() {
	coord, stop := exampleCoordinator()
	defer stop()
	if err := snippetReadmeRWLease(context.Background(), coord); err != nil {
		log.Fatal(err)
	}
	// Output:
	// catalog read, lease held: true
}

func snippetReadmeRWLease(ctx context.Context, coord *coordination.Coordinator) error {
	catalog, err := rwlease.New(coord, "catalog:rw")
	if err != nil {
		return err
	}
	rd, err := catalog.Read(ctx, 30*time.Second) // Write for the one writer
	if err != nil {
		return err
	}
	err = serveCatalog(rd.Context())
	_, rerr := rd.Release(context.WithoutCancel(ctx))
	return errors.Join(err, rerr)
}

func Example_readmeSemaphore() {
	coord, stop := exampleCoordinator()
	defer stop()
	if err := snippetReadmeSemaphore(context.Background(), coord); err != nil {
		log.Fatal(err)
	}
	// Output:
	// encoding, permit held: true
}

func snippetReadmeSemaphore(ctx context.Context, coord *coordination.Coordinator) error {
	sem, err := semaphore.New(coord, "encoders", 4)
	if err != nil {
		return err
	}
	p, err := sem.Acquire(ctx, time.Minute) // one of 4 permits (AcquireN: several)
	if err != nil {
		return err
	}
	err = encode(p.Context())
	_, rerr := p.Release(context.WithoutCancel(ctx))
	return errors.Join(err, rerr)
}

// Three workers join the latch once it exists and count down.
func Example_readmeLatch() {
	coord, stop := exampleCoordinator()
	defer stop()
	ctx := context.Background()
	// The workers end before the coordinator's client closes: Wait can
	// see the count reach zero before the last worker reads its reply.
	var workers sync.WaitGroup
	defer workers.Wait()
	for range 3 {
		workers.Add(1)
		go func() {
			defer workers.Done()
			l, err := latch.New(coord, "batch:42:done")
			if err != nil {
				log.Fatal(err)
			}
			for {
				w, err := l.Join(ctx)
				if errors.Is(err, latch.ErrNotFound) {
					time.Sleep(time.Millisecond) // not created yet
					continue
				}
				if err == nil {
					_, err = w.CountDown(ctx)
				}
				if err != nil {
					log.Fatal(err)
				}
				return
			}
		}()
	}
	if err := snippetReadmeLatch(ctx, coord); err != nil {
		log.Fatal(err)
	}
	// Output:
	// all done: true
}

func snippetReadmeLatch(ctx context.Context, coord *coordination.Coordinator) error {
	l, err := latch.New(coord, "batch:42:done", latch.WithKeyTTL(time.Hour))
	if err != nil {
		return err
	}
	g, err := l.Create(ctx, 3) // each of 3 workers: w, err := l.Join(ctx), then w.CountDown(ctx)
	if err != nil {
		return err
	}
	done, err := g.Wait(ctx) // true once all 3 counted down
	fmt.Println("all done:", done)
	return err
}

// The elector leads until the context ends; Run then returns nil.
func Example_readmeLeader() {
	coord, stop := exampleCoordinator()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	fmt.Println("run:", snippetReadmeLeader(ctx, coord))
	// Output:
	// scheduler runs with fencing token 1
	// run: <nil>
}

func snippetReadmeLeader(ctx context.Context, coord *coordination.Coordinator) error {
	e, err := leader.New(coord, "{billing}:leader", "{billing}:fence", "worker-7",
		leader.OnElected(func(ctx context.Context, term *leader.Term) error {
			return runScheduler(ctx, term.FencingToken()) // returns when ctx ends
		}))
	if err != nil {
		return err
	}
	return e.Run(ctx) // campaigns until ctx ends or a terminal error
}

// Redlock over three deployments, here three embedded servers.
func Example_readmeRedlock() {
	a, stopA := exampleCoordinator()
	defer stopA()
	b, stopB := exampleCoordinator()
	defer stopB()
	c, stopC := exampleCoordinator()
	defer stopC()
	fmt.Println("run:", snippetReadmeRedlock(context.Background(), a, b, c))
	// Output:
	// run: <nil>
}

func snippetReadmeRedlock(ctx context.Context, a, b, c *coordination.Coordinator) error {
	g, err := redlock.New([]*coordination.Coordinator{a, b, c}) // one per deployment
	if err != nil {
		return err
	}
	rl, err := g.TryAcquire(ctx, "reports:nightly", 30*time.Second)
	if err != nil {
		return err // coordination.ErrNotAcquired, or too few nodes answered
	}
	_, err = rl.Release(ctx)
	return err
}

// The second call with the same key replays the first one's result.
func Example_readmeIdempotency() {
	coord, stop := exampleCoordinator()
	defer stop()
	for range 2 {
		if err := snippetReadmeIdempotency(context.Background(), coord, "sha256:1f2e"); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// receipt r-1001 (replayed: false)
	// receipt r-1001 (replayed: true)
}

func snippetReadmeIdempotency(ctx context.Context, coord *coordination.Coordinator, digest string) error {
	store, err := idempotency.New(coord)
	if err != nil {
		return err
	}
	receipt, replayed, err := store.Do(ctx, "payment:8f14e45f", 10*time.Minute, digest,
		func(ctx context.Context) ([]byte, error) { return charge(ctx) })
	if err != nil {
		return err
	}
	fmt.Printf("receipt %s (replayed: %v)\n", receipt, replayed)
	return nil
}

func Example_readmeRateLimit() {
	coord, stop := exampleCoordinator()
	defer stop()
	fmt.Println(snippetReadmeRateLimit(context.Background(), coord))
	// Output:
	// <nil>
}

func snippetReadmeRateLimit(ctx context.Context, coord *coordination.Coordinator) error {
	lim, err := ratelimit.New(coord, "limits:api", ratelimit.GCRA{Burst: 20, Interval: 100 * time.Millisecond})
	if err != nil {
		return err
	}
	defer lim.Close()
	dec, err := lim.Allow(ctx, 1) // Wait waits for the permit instead
	if err != nil {
		return err
	}
	if !dec.Allowed() {
		retry, _ := dec.RetryAfter() // false when unknown (a denied identity)
		return fmt.Errorf("limited: retry after %v", retry)
	}
	return nil
}

// Both middlewares on one mux: the per-client limit, and a payment that a
// retry with the same Idempotency-Key gets replayed.
func Example_readmeMiddleware() {
	coord, stop := exampleCoordinator()
	defer stop()
	store, err := idempotency.New(coord)
	if err != nil {
		log.Fatal(err)
	}
	charges := 0
	catalog := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "catalog") })
	payments := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		charges++
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "charge %d", charges)
	})
	mux := http.NewServeMux()
	// serve stands for the program's http.Server: it sends the requests.
	serve = func(h http.Handler) error {
		for range 2 {
			r := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(`{"amount":100}`))
			r.Header.Set("Idempotency-Key", "pay-7")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			fmt.Println(w.Code, w.Body.String(), "replayed:", w.Header().Get("Idempotent-Replayed") == "true")
		}
		for range 9 { // the client's bucket holds 10; the two payments took 2
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/catalog", nil))
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/catalog", nil))
		fmt.Println(w.Code, "Retry-After:", w.Header().Get("Retry-After"))
		return nil
	}
	if err := snippetReadmeMiddleware(coord, store, mux, catalog, payments); err != nil {
		log.Fatal(err)
	}
	// Output:
	// 201 charge 1 replayed: false
	// 201 charge 1 replayed: true
	// 429 Retry-After: 1
}

// serve is the README middleware snippet's stand-in for the program's
// server (Example_readmeMiddleware sets it).
var serve func(http.Handler) error

func snippetReadmeMiddleware(coord *coordination.Coordinator, store *idempotency.Store, mux *http.ServeMux, catalogPage, payments http.Handler) error {
	perClient, err := ratelimit.NewPartitioned(func(client string) (*ratelimit.Limiter, error) {
		return ratelimit.New(coord, ratelimit.PartitionKey("limits:client", client),
			ratelimit.TokenBucket{Limit: 10, TokensPerPeriod: 1, Period: time.Second})
	})
	if err != nil {
		return err
	}
	defer perClient.Close()
	limited, err := ratelimit.NewMiddleware([]ratelimit.Policy{
		{Name: "client", Partitioned: perClient, Partition: ratelimit.ClientIP},
	})
	if err != nil {
		return err
	}
	once, err := idempotency.NewMiddleware(store, idempotency.WithKeyRequired(true))
	if err != nil {
		return err
	}
	mux.Handle("GET /catalog", limited(catalogPage))
	mux.Handle("POST /payments", limited(once(payments)))
	return serve(mux) // your http.Server's ListenAndServe
}
