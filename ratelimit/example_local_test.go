package ratelimit_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/ratelimit"
)

// An in-process limiter: the same algorithms and answers as [New]'s,
// decided in this process's memory, without Redis. Here an instance guard
// for the middleware: at most 2 requests in the handler at once and 100
// per second in this process, whatever Redis does; the requests then
// take the shared per-client budget in Redis.
func ExampleNewLocal() {
	instance, err := ratelimit.NewLocalConcurrency(2)
	if err != nil {
		log.Fatal(err)
	}
	defer instance.Close()
	perSecond, err := ratelimit.NewLocal(ratelimit.TokenBucket{Limit: 100, TokensPerPeriod: 100, Period: time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer perSecond.Close()
	mw, err := ratelimit.NewMiddleware([]ratelimit.Policy{
		{Name: "instance", Concurrency: instance, Status: http.StatusServiceUnavailable},
		{Name: "instance-rate", Limiter: perSecond, Status: http.StatusServiceUnavailable},
		// ... then the policies on Redis limiters ...
	})
	if err != nil {
		log.Fatal(err)
	}
	handler := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))

	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest("GET", "/work", nil))
	fmt.Println("status:", rec.Code)

	// The same calls as on a Redis limiter.
	dec, err := perSecond.Allow(context.Background(), 100)
	if err != nil {
		log.Fatal(err)
	}
	retry, _ := dec.RetryAfter()
	fmt.Println("100 more at once:", dec.Allowed(), "available:", dec.Available(), "retry after about 1s:", retry > 990*time.Millisecond && retry <= time.Second)
	// Output:
	// status: 204
	// 100 more at once: false available: 99 retry after about 1s: true
}

// A Redis limiter with a local fallback: while Redis cannot give
// decisions, each of the 4 replicas sharing the key decides locally with
// a quarter of the limit (here ceil(10/4) = 3 per minute) instead of
// failing, and returns to Redis when it answers again (tried at most once
// a second meanwhile).
func ExampleWithLocalFallback() {
	srv, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	defer rdb.Close()
	coord, err := coordination.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	lim, err := ratelimit.New(coord, "limits:api", ratelimit.FixedWindow{Limit: 10, Window: time.Minute},
		ratelimit.WithLocalFallback(4, func(local bool) {
			fmt.Println("deciding locally:", local)
		}))
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()

	dec, err := lim.Allow(ctx, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("Redis:", dec.Allowed(), dec.Available(), "left")
	srv.Close() // Redis goes away
	for range 4 {
		dec, err := lim.Allow(ctx, 1)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("local:", dec.Allowed(), dec.Available(), "left")
	}
	// Output:
	// Redis: true 9 left
	// deciding locally: true
	// local: true 2 left
	// local: true 1 left
	// local: true 0 left
	// local: false 0 left
}
