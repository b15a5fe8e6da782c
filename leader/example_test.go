package leader_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/fencing"
	"github.com/coordkit/coordination/leader"
)

// A worker that runs a job only while it leads, writes the job's result
// with its term's fencing token so that a stale leader's late write is
// rejected, and resigns when the job is done; the next run of the job is
// a new term with a new token.
func Example() {
	// An embedded server keeps the example self-contained; use your Redis.
	// (miniredis expires keys only when its clock is moved; nothing here
	// waits for an expiry.)
	srv, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	coord, err := coordination.New(rdb, coordination.WithKeyPrefix("billing:"))
	if err != nil {
		log.Fatal(err)
	}

	// The store the job writes: only the newest token may write it.
	reports, err := fencing.NewGuarded(coord, "{invoices}:report")
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	e, err := leader.New(coord, "{invoices}:leader", "{invoices}:fence", "worker-1",
		leader.WithLeaseDuration(15*time.Second), leader.WithRetryDelay(10*time.Millisecond),
		leader.OnElected(func(ctx context.Context, term *leader.Term) error {
			fmt.Printf("%s leads, fencing token %d\n", term.Identity(), term.FencingToken())
			// Who leads, as any process sees it:
			info, err := leader.Get(ctx, coord, "{invoices}:leader")
			fmt.Println("others see:", info.Identity, info.FencingToken, err)
			// The job's write carries the token; the store rejects older ones.
			report := fmt.Sprintf("run %d: sent 42 invoices", term.FencingToken())
			ok, _, err := reports.Set(ctx, term.FencingToken(), []byte(report), 0)
			fmt.Println("report stored:", ok, err)
			return nil // done: resign
		}),
		leader.OnRevoked(func(term *leader.Term) error {
			fmt.Println("term ended, resigned:", errors.Is(context.Cause(term.Context()), leader.ErrResigned))
			if term.FencingToken() == 2 {
				stop() // two runs are enough for this example
			}
			return nil
		}))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("Run:", e.Run(ctx))

	_, err = leader.Get(context.Background(), coord, "{invoices}:leader")
	fmt.Println("afterwards:", err)
	// A late write from term 1 (a leader paused past its term) is refused.
	ok, current, err := reports.Set(context.Background(), 1, []byte("stale"), 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("stale write accepted:", ok, "- the store is at token", current)
	// Output:
	// worker-1 leads, fencing token 1
	// others see: worker-1 1 <nil>
	// report stored: true <nil>
	// term ended, resigned: true
	// worker-1 leads, fencing token 2
	// others see: worker-1 2 <nil>
	// report stored: true <nil>
	// term ended, resigned: true
	// Run: <nil>
	// afterwards: coordination: leader read "{invoices}:leader": no leader
	// stale write accepted: false - the store is at token 2
}

// The package documentation's snippet: campaign until ctx ends, running the
// scheduler only while elected.
func ExampleElector_Run() {
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
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := snippetRun(ctx, coord); err != nil {
		log.Fatal(err)
	}
	// Output:
	// scheduling with fencing token 1
	// scheduler stopped
}

func snippetRun(ctx context.Context, coord *coordination.Coordinator) error {
	e, err := leader.New(coord, "{billing}:leader", "{billing}:fence", "worker-7",
		leader.WithLeaseDuration(15*time.Second),
		leader.OnElected(func(ctx context.Context, term *leader.Term) error {
			return runScheduler(ctx, term.FencingToken()) // returns when ctx ends
		}))
	if err != nil {
		return err
	}
	return e.Run(ctx) // campaigns until ctx ends or a terminal error
}

func runScheduler(ctx context.Context, token int64) error {
	fmt.Println("scheduling with fencing token", token)
	<-ctx.Done()
	fmt.Println("scheduler stopped")
	return nil
}

// A liveness probe for a process that campaigns: /healthz answers 503
// until Run runs, then 200 while the elector follows or leads with its
// renewals on time.
func ExampleElector_HealthHandler() {
	srv, err := miniredis.Run() // use your Redis
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
	elected := make(chan struct{})
	e, err := leader.New(coord, "{jobs}:leader", "{jobs}:fence", "worker-1",
		leader.OnElected(func(ctx context.Context, term *leader.Term) error {
			close(elected)
			<-ctx.Done()
			return nil
		}))
	if err != nil {
		log.Fatal(err)
	}
	healthz, err := e.HealthHandler(2 * time.Second)
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", healthz)

	probe := func() {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		fmt.Printf("%d %s", rec.Code, rec.Body.String())
	}
	probe()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	<-elected
	probe()
	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	probe()
	// Output:
	// 503 not running
	// 200 ok
	// 503 not running
}

// A leader advertises the address it serves on, and proclaims the new one
// after moving its listener, without a new election.
func ExampleTerm_Proclaim() {
	srv, err := miniredis.Run() // use your Redis
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
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e, err := leader.New(coord, "{api}:leader", "{api}:fence", "10.0.0.7:8080",
		leader.OnElected(func(ctx context.Context, term *leader.Term) error {
			defer cancel() // end the example after one term
			if err := term.Proclaim(ctx, "10.0.0.7:9090"); err != nil {
				return err
			}
			info, err := leader.Get(ctx, coord, "{api}:leader")
			if err != nil {
				return err
			}
			fmt.Println("clients now reach the leader at", info.Identity, "token", info.FencingToken)
			return nil
		}))
	if err != nil {
		log.Fatal(err)
	}
	if err := e.Run(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// clients now reach the leader at 10.0.0.7:9090 token 1
}
