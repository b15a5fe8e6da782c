package ratelimit_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/ratelimit"
)

// A login throttle: 5 failed attempts, then blocked until the caller has
// made no attempt for 15 minutes. Successful logins are not counted: each
// attempt reserves one permit and settles it at 0 when the password was
// right.
func ExampleThrottle() {
	srv, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	srv.SetTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	coord, err := coordination.New(rdb, coordination.WithKeyPrefix("example:"))
	if err != nil {
		log.Fatal(err)
	}
	for i, ok := range []bool{true, false, true, false, false, false, false, true} {
		fmt.Printf("attempt %d, password right: %v\n", i+1, ok)
		snippetThrottleLogin(ctx, coord, ok)
	}
	// Output:
	// attempt 1, password right: true
	// attempt 2, password right: false
	// attempt 3, password right: true
	// attempt 4, password right: false
	// attempt 5, password right: false
	// attempt 6, password right: false
	// attempt 7, password right: false
	// attempt 8, password right: true
	// too many attempts: try again in 15m0s
}

// snippetThrottleLogin is docs/ratelimit.md's throttle snippet.
func snippetThrottleLogin(ctx context.Context, coord *coordination.Coordinator, passwordOK bool) {
	logins, err := ratelimit.New(coord, "login:alice@example.com", ratelimit.Throttle{Limit: 5, Quiet: 15 * time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	defer logins.Close()
	attempt, err := logins.Reserve(ctx, 1)
	if err != nil {
		log.Fatal(err)
	}
	if !attempt.Allowed() {
		retry, _ := attempt.RetryAfter()
		fmt.Printf("too many attempts: try again in %v\n", retry)
		return
	}
	if passwordOK {
		if _, err := attempt.Settle(ctx, 0); err != nil { // a success is not counted
			log.Fatal(err)
		}
	}
}

// A sliding log: exactly 5 password resets in any 15 minutes, each grant
// leaving the window 15 minutes after it was made.
func ExampleSlidingLog() {
	srv, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	srv.SetTime(now)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	coord, err := coordination.New(rdb, coordination.WithKeyPrefix("example:"))
	if err != nil {
		log.Fatal(err)
	}
	resets, err := ratelimit.New(coord, "reset:alice@example.com", ratelimit.SlidingLog{Limit: 5, Window: 15 * time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	defer resets.Close()
	for i := 1; i <= 6; i++ {
		dec, err := resets.Allow(ctx, 1)
		if err != nil {
			log.Fatal(err)
		}
		if dec.Allowed() {
			fmt.Printf("minute %d: reset allowed, %d left\n", 2*(i-1), dec.Available())
		} else {
			retry, _ := dec.RetryAfter()
			fmt.Printf("minute %d: refused, retry after %v\n", 2*(i-1), retry)
		}
		now = now.Add(2 * time.Minute)
		srv.SetTime(now)
	}
	// Output:
	// minute 0: reset allowed, 4 left
	// minute 2: reset allowed, 3 left
	// minute 4: reset allowed, 2 left
	// minute 6: reset allowed, 1 left
	// minute 8: reset allowed, 0 left
	// minute 10: refused, retry after 5m0s
}
