package ratelimit_test

import (
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/ratelimit"
)

// A tighter limit tried in shadow mode beside the one enforced: "next"
// (2 per minute, on its own key) decides and counts on real traffic but
// never refuses; what it would have refused is logged (once, then at
// most once a minute) and counted in coordination.rate_limit.policy.refused
// with mode=shadow. "current" (3 per minute) still answers.
func ExamplePolicy_shadow() {
	srv, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	defer rdb.Close()
	coord, err := coordination.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	current, err := ratelimit.New(coord, "limits:api:v1", ratelimit.FixedWindow{Limit: 3, Window: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	defer current.Close()
	next, err := ratelimit.New(coord, "limits:api:v2", ratelimit.FixedWindow{Limit: 2, Window: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	defer next.Close()
	// Log lines without their time, so the output is exact.
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))

	mw, err := ratelimit.NewMiddleware([]ratelimit.Policy{
		{Name: "current", Limiter: current},
		{Name: "next", Limiter: next, Shadow: true},
	}, ratelimit.WithLogger(logger))
	if err != nil {
		log.Fatal(err)
	}

	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") }))
	for i := 1; i <= 4; i++ {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/api", nil))
		fmt.Println("request", i, w.Code)
	}
	// Output:
	// request 1 200
	// request 2 200
	// level=INFO msg="ratelimit: a shadow policy would have refused a request; admitted" policy=next reason=capacity
	// request 3 200
	// request 4 429
}
