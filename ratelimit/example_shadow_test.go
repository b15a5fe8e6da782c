package ratelimit_test

import (
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/coordkit/coordination/ratelimit"
)

// A tighter limit tried in shadow mode beside the one enforced: "next"
// (2 per minute, on its own key) decides and counts on real traffic but
// never refuses; what it would have refused is logged (once, then at
// most once a minute) and counted in coordination.rate_limit.policy.refused
// with mode=shadow. "current" (3 per minute) still answers.
func ExamplePolicy_shadow() {
	coord, done := exampleCoordinator()
	defer done()
	logger := exampleLogger()

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

// exampleLogger returns a logger to stdout whose lines have no time, so
// that an example's output is exact.
func exampleLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}
