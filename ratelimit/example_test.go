package ratelimit_test

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/ratelimit"
)

// A GCRA limiter allowing a burst of 3, then one request every 100 ms,
// shared by every process using the key "limits:api".
func Example() {
	// An embedded server with a fixed clock, so the output is exact. Use
	// redis.NewClient(&redis.Options{Addr: ..., MaxRetries: -1}) in
	// production: a re-sent command would consume permits twice.
	srv, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	srv.SetTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	defer rdb.Close()

	coord, err := coordination.New(rdb, coordination.WithKeyPrefix("example:"))
	if err != nil {
		panic(err)
	}
	lim, err := ratelimit.NewGCRA(coord, "limits:api", ratelimit.GCRA{Burst: 3, Interval: 100 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	defer lim.Close()

	ctx := context.Background()
	for i := 1; i <= 4; i++ {
		lease, err := lim.Acquire(ctx, 1)
		if err != nil {
			panic(err)
		}
		if lease.Acquired() {
			fmt.Printf("request %d: allowed, %d left\n", i, lease.Available())
			continue
		}
		retry, _ := lease.RetryAfter()
		fmt.Printf("request %d: limited, retry after %v\n", i, retry)
	}
	// Output:
	// request 1: allowed, 2 left
	// request 2: allowed, 1 left
	// request 3: allowed, 0 left
	// request 4: limited, retry after 100ms
}

// Layered HTTP policies: a service-wide concurrency guard answering 503,
// then a token bucket per client address answering 429.
func ExampleNewMiddleware() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", MaxRetries: -1})
	coord, _ := coordination.New(rdb, coordination.WithKeyPrefix("svc:"))

	guard, _ := ratelimit.NewConcurrency(coord, "limits:instance-guard", ratelimit.Concurrency{Limit: 200})
	perClient, _ := ratelimit.NewPartitioned(func(client string) (ratelimit.Limiter, error) {
		return ratelimit.NewTokenBucket(coord, ratelimit.PartitionKey("limits:client", client),
			ratelimit.TokenBucket{Limit: 20, TokensPerPeriod: 10, Period: time.Second})
	})
	mw, _ := ratelimit.NewMiddleware(
		ratelimit.Policy{Name: "guard", Limiter: guard, Status: http.StatusServiceUnavailable},
		ratelimit.Policy{Name: "client", Partitioned: perClient, Partition: ratelimit.ClientIP},
	)
	mux := http.NewServeMux()
	mux.Handle("GET /catalog", mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "catalog")
	})))
	_ = http.ListenAndServe(":8080", mux)
}

// A local queue: Wait sleeps until the server-computed retry time instead
// of polling.
func ExampleLimiter_wait() {
	srv, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	coord, _ := coordination.New(rdb)
	lim, _ := ratelimit.NewFixedWindow(coord, "limits:jobs", ratelimit.FixedWindow{Limit: 10, Window: time.Minute},
		ratelimit.WithQueue(50, ratelimit.OldestFirst))
	defer lim.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lease, err := lim.Wait(ctx, 1)
	fmt.Println(lease.Acquired(), err)
	// Output: true <nil>
}
