package ratelimit

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// Charging by outcome (Policy.Charge, issue 23 item 7): only failed logins
// count (a 2xx gives its permit back), a handler-reported cost is charged
// instead of the estimate (less: given back; more: the excess charged),
// and a 5xx gives everything back. Exact statuses and bodies through
// httptest; the limiter's state read after each step.
func TestMiddlewareChargeByOutcome(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		c := b.Coordinator(t)
		newLim := func(key string, s Settings) *Limiter {
			l, err := New(c, key, s)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close() })
			return l
		}
		left := func(l *Limiter) int64 {
			d, err := l.Allow(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			return d.Available()
		}
		serve := func(h http.Handler, method, path string) *httptest.ResponseRecorder {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(method, path, nil))
			return w
		}

		// Logins: 3 failures a minute; a successful login costs nothing.
		logins := newLim("charge:login", FixedWindow{Limit: 3, Window: time.Minute})
		mw, err := NewMiddleware([]Policy{{Name: "login", Limiter: logins,
			Charge: func(_ *http.Request, status, _ int) int {
				if status >= 200 && status < 300 {
					return 0
				}
				return 1
			}}})
		if err != nil {
			t.Fatal(err)
		}
		login := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("password") != "right" {
				http.Error(w, "wrong password", http.StatusUnauthorized)
				return
			}
			_, _ = w.Write([]byte("welcome"))
		}))
		for i := range 5 {
			if w := serve(login, "POST", "/login?password=right"); w.Code != http.StatusOK || w.Body.String() != "welcome" {
				t.Fatalf("successful login %d: %d %q", i, w.Code, w.Body.String())
			}
		}
		if n := left(logins); n != 3 {
			t.Fatalf("after 5 successful logins: %d of 3 left, want 3", n)
		}
		for i := range 3 {
			if w := serve(login, "POST", "/login?password=wrong"); w.Code != http.StatusUnauthorized {
				t.Fatalf("failed login %d: %d", i, w.Code)
			}
		}
		w := serve(login, "POST", "/login?password=right")
		if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" ||
			!strings.Contains(w.Body.String(), `"violated-policies":["login"]`) {
			t.Fatalf("after 3 failed logins: %d %v %s, want 429 with Retry-After naming login", w.Code, w.Header(), w.Body)
		}

		// Tokens: the estimate is 10, the handler reports what it used.
		tokens := newLim("charge:tokens", TokenBucket{Limit: 100, TokensPerPeriod: 1, Period: time.Hour})
		var report int
		mw, err = NewMiddleware([]Policy{{Name: "tokens", Limiter: tokens,
			Permits: func(*http.Request) int { return 10 },
			Charge: func(_ *http.Request, _ int, reported int) int {
				if reported < 0 {
					return 10 // nothing reported: the estimate
				}
				return reported
			}}})
		if err != nil {
			t.Fatal(err)
		}
		complete := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if report >= 0 {
				if err := ReportCost(r.Context(), report); err != nil {
					t.Error(err)
				}
			}
			w.WriteHeader(http.StatusCreated)
		}))
		for _, step := range []struct{ report, left int64 }{
			{25, 75}, // 15 more than the estimate
			{2, 73},  // 8 given back (no refill period began)
			{-1, 63}, // nothing reported: the estimate
			{0, 63},  // free
		} {
			report = int(step.report)
			if w := serve(complete, "POST", "/complete"); w.Code != http.StatusCreated {
				t.Fatalf("report %d: %d", step.report, w.Code)
			}
			if n := left(tokens); n != step.left {
				t.Fatalf("after a request reporting %d: %d left, want %d", step.report, n, step.left)
			}
		}

		// An estimate of 0 (a probe before the handler) is charged the
		// reported cost after it (it was silently not charged).
		metered := newLim("charge:metered", TokenBucket{Limit: 100, TokensPerPeriod: 1, Period: time.Hour})
		mw, err = NewMiddleware([]Policy{{Name: "metered", Limiter: metered,
			Permits: func(*http.Request) int { return 0 },
			Charge:  func(_ *http.Request, _ int, reported int) int { return max(reported, 0) }}})
		if err != nil {
			t.Fatal(err)
		}
		meter := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := ReportCost(r.Context(), 7); err != nil {
				t.Error(err)
			}
		}))
		if w := serve(meter, "POST", "/complete"); w.Code != http.StatusOK {
			t.Fatalf("metered: %d", w.Code)
		}
		if n := left(metered); n != 93 {
			t.Fatalf("after a request of estimate 0 reporting 7: %d left, want 93", n)
		}

		// A 5xx gives everything back (GCRA: the whole charge, at once).
		api := newLim("charge:api", GCRA{Burst: 5, Interval: time.Minute})
		mw, err = NewMiddleware([]Policy{{Name: "api", Limiter: api,
			Charge: func(_ *http.Request, status, _ int) int {
				if status >= 500 {
					return 0
				}
				return 1
			}}})
		if err != nil {
			t.Fatal(err)
		}
		flaky := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/fail" {
				w.WriteHeader(http.StatusBadGateway)
			}
		}))
		if w := serve(flaky, "GET", "/fail"); w.Code != http.StatusBadGateway {
			t.Fatalf("/fail: %d", w.Code)
		}
		if n := left(api); n != 5 {
			t.Fatalf("after a 502: %d of 5 left, want 5", n)
		}
		if w := serve(flaky, "GET", "/ok"); w.Code != http.StatusOK {
			t.Fatalf("/ok: %d", w.Code)
		}
		if n := left(api); n != 4 {
			t.Fatalf("after a 200 (no WriteHeader): %d of 5 left, want 4", n)
		}
	})
}

// Charge with Wait or a concurrency limiter is refused, naming the
// policy; ReportCost refuses a negative cost and does nothing outside a
// charging middleware.
func TestChargeBadInput(t *testing.T) {
	b := testharness.Get(t, "miniredis")
	c := b.Coordinator(t)
	l, err := New(c, "charge:bad", GCRA{Burst: 1, Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	conc, err := NewConcurrency(c, "charge:conc", 1)
	if err != nil {
		t.Fatal(err)
	}
	one := func(*http.Request, int, int) int { return 1 }
	for name, p := range map[string]Policy{
		"wait":        {Name: "w", Limiter: l, Wait: true, Charge: one},
		"concurrency": {Name: "c", Concurrency: conc, Charge: one},
	} {
		_, err := NewMiddleware([]Policy{p})
		if arg, _ := check.ArgumentName(err); !errors.Is(err, coordination.ErrInvalidArgument) || !strings.HasPrefix(arg, "policy ") {
			t.Errorf("%s: %v, want ErrInvalidArgument naming the policy", name, err)
		}
	}
	err = ReportCost(context.Background(), -1)
	if arg, _ := check.ArgumentName(err); !errors.Is(err, coordination.ErrInvalidArgument) || arg != "permits" {
		t.Fatalf("ReportCost(-1) = %v, want ErrInvalidArgument naming permits", err)
	}
	if err := ReportCost(context.Background(), 3); err != nil {
		t.Fatalf("ReportCost outside a middleware = %v, want nil", err)
	}
}
