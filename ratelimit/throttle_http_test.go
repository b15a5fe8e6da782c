package ratelimit

import (
	"net/http"
	"testing"
	"time"

	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// A login endpoint behind a throttle that counts only failed logins
// (Charge returns 0 for a 2xx): successes never count, the third failure
// in a run is refused with 429 and Retry-After exactly the quiet period
// (90 s: the refused attempt moved the end of the block), and so is a
// request with the right password while blocked. A sliding log policy
// refuses the request past its limit with Retry-After the window (its
// oldest grant was just made). On every server.
func TestMiddlewareThrottleAndSlidingLog(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		c := b.Coordinator(t)
		th, err := New(c, "mw:login", Throttle{Limit: 2, Quiet: 90 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer th.Close()
		mw, err := NewMiddleware([]Policy{{Name: "login", Limiter: th, Charge: func(r *http.Request, status, reported int) int {
			if status < 300 {
				return 0
			}
			return 1
		}}})
		if err != nil {
			t.Fatal(err)
		}
		h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("pw") == "right" {
				w.WriteHeader(http.StatusNoContent)
				return
			}
			w.WriteHeader(http.StatusUnauthorized)
		}))
		for i, want := range []struct {
			path string
			code int
		}{{"/work?pw=right", 204}, {"/work?pw=wrong", 401}, {"/work?pw=right", 204}, {"/work?pw=right", 204}, {"/work?pw=wrong", 401}} {
			if w := serve(t, h, want.path); w.Code != want.code {
				t.Fatalf("request %d %s: %d, want %d", i, want.path, w.Code, want.code)
			}
		}
		w := serve(t, h, "/work")
		checkProblem(t, w, http.StatusTooManyRequests, "90")
		checkProblem(t, serve(t, h, "/work"), http.StatusTooManyRequests, "90")

		lg, err := New(c, "mw:log", SlidingLog{Limit: 2, Window: 45 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer lg.Close()
		mw, err = NewMiddleware([]Policy{{Name: "log", Limiter: lg}})
		if err != nil {
			t.Fatal(err)
		}
		h = mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
		start := time.Now()
		for i := range 2 {
			if w := serve(t, h, "/work"); w.Code != http.StatusNoContent {
				t.Fatalf("log request %d: %d", i, w.Code)
			}
		}
		w = serve(t, h, "/work")
		checkProblem(t, w, http.StatusTooManyRequests, retrySeconds(t, w, 45*time.Second, start))
	})
}
