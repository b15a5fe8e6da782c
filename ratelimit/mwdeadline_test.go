package ratelimit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// withDeadline runs next with the request's context bounded by d, as a
// server-side timeout middleware does.
func withDeadline(d time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// A request whose own deadline passes while the limiter cannot decide (a
// frozen server) gets an answer, 503, in every failure mode: the client
// is still there. Before, the middleware took any context error for a
// client gone and returned without writing: an empty 200 without the
// handler having run.
func TestMiddlewareRequestDeadlineWhileRedisHangs(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		coord, out, _, _ := outageCoord(t, b)
		for _, mode := range []FailureMode{ReturnError, FailOpen, FailClosed} {
			l, err := New(coord, "{mwdl}:"+mode.String(), FixedWindow{Limit: 100, Window: time.Minute}, WithFailureMode(mode))
			if err != nil {
				t.Fatal(err)
			}
			mw, err := NewMiddleware([]Policy{{Name: "p", Limiter: l}})
			if err != nil {
				t.Fatal(err)
			}
			var ran atomic.Int64
			h := withDeadline(200*time.Millisecond, mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ran.Add(1)
				_, _ = w.Write([]byte("handler ran"))
			})))
			call := func() *httptest.ResponseRecorder {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
				return rec
			}
			// A first request with the server up (a Cluster's first call
			// discovers the slots), then the frozen server.
			if rec := call(); rec.Code != http.StatusOK || rec.Body.String() != "handler ran" {
				t.Fatalf("%v, server up: %d %q", mode, rec.Code, rec.Body.String())
			}
			out.hung.Store(true)
			rec := call()
			out.hung.Store(false)
			if rec.Code != http.StatusServiceUnavailable || rec.Body.Len() == 0 || ran.Load() != 1 {
				t.Fatalf("%v, request deadline passed while Redis hung: %d %q, handler ran %d times; want 503 with a body, the handler run once (before)",
					mode, rec.Code, rec.Body.String(), ran.Load())
			}
			_ = l.Close()
		}
	})
}

// A Wait policy on a concurrency limit whose permits stay taken until the
// request's deadline passes refuses the request as the limit's (the
// policy's status, 429), not an empty 200.
func TestMiddlewareWaitRequestDeadlineIsARefusal(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		c := b.Coordinator(t)
		conc, err := NewConcurrency(c, "{mwdl}:conc", 1)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conc.Close() })
		ctx := context.Background()
		lease, err := conc.TryAcquire(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _, _ = lease.Release(ctx) }()
		mw, err := NewMiddleware([]Policy{{Name: "conc", Concurrency: conc, Wait: true}})
		if err != nil {
			t.Fatal(err)
		}
		var ran atomic.Int64
		h := withDeadline(300*time.Millisecond, mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ran.Add(1)
		})))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		if rec.Code != http.StatusTooManyRequests || ran.Load() != 0 || !strings.Contains(rec.Body.String(), "conc") {
			t.Fatalf("waited until the request's deadline: %d %q, handler ran %d times; want 429 naming the policy, no handler",
				rec.Code, rec.Body.String(), ran.Load())
		}
	})
}
