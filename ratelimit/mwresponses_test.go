package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// headerKeys returns w's header names, sorted.
func headerKeys(w *httptest.ResponseRecorder) []string {
	var ks []string
	for k := range w.Header() {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func checkHeaderKeys(t testing.TB, what string, w *httptest.ResponseRecorder, want ...string) {
	t.Helper()
	slices.Sort(want)
	if got := headerKeys(w); !slices.Equal(got, want) {
		t.Fatalf("%s: header fields %v, want exactly %v (%v)", what, got, want, w.Header())
	}
}

// A policy's state is private by default: a refusal carries Retry-After,
// Cache-Control and the problem body, and no RateLimit field; each field
// comes only when the policy asks for it, RateLimit-Policy's q and w only
// with PublishQuota.
func TestMiddlewarePrivateByDefault(t *testing.T) {
	const body429 = `{"type":"https://www.rfc-editor.org/rfc/rfc6585#section-4","title":"Too Many Requests","status":429,"detail":"The request exceeds the current rate limit.","instance":"/work","violated-policies":["client"]}` + "\n"
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		c := b.Coordinator(t)
		for _, tc := range []struct {
			name        string
			pol         Policy
			policy, lim string // the fields' values; "" none; lim "t=" gets Retry-After appended
		}{
			{"default", Policy{}, "", ""},
			{"RateLimitHeader", Policy{RateLimitHeader: true}, "", `"client";r=0;t=`},
			{"PublishQuota", Policy{PublishQuota: true}, `"client";q=1;w=60`, ""},
			{"both", Policy{RateLimitHeader: true, PublishQuota: true}, `"client";q=1;w=60`, `"client";r=0;t=`},
		} {
			perClient, err := NewPartitioned(func(part string) (*Limiter, error) {
				return New(c, PartitionKey("private:"+tc.name, part), GCRA{Burst: 1, Interval: time.Minute})
			})
			if err != nil {
				t.Fatal(err)
			}
			defer perClient.Close()
			p := tc.pol
			p.Name, p.Partitioned, p.Partition = "client", perClient, ClientIP
			mw, err := NewMiddleware([]Policy{p})
			if err != nil {
				t.Fatal(err)
			}
			h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
			start := time.Now()
			w := serve(t, h, "/work")
			if w.Code != http.StatusNoContent {
				t.Fatalf("%s: first request %d", tc.name, w.Code)
			}
			var allowed []string
			if tc.policy != "" {
				allowed = append(allowed, "Ratelimit-Policy")
			}
			if tc.lim != "" {
				allowed = append(allowed, "Ratelimit")
			}
			checkHeaderKeys(t, tc.name+" allowed", w, allowed...)
			if tc.lim != "" && w.Header().Get("RateLimit") != `"client";r=0` {
				t.Fatalf("%s: allowed RateLimit %q", tc.name, w.Header().Get("RateLimit"))
			}

			w = serve(t, h, "/work")
			retry := retrySeconds(t, w, time.Minute, start)
			checkProblem(t, w, http.StatusTooManyRequests, retry)
			checkHeaderKeys(t, tc.name+" refused", w, append(allowed, "Cache-Control", "Content-Type", "Retry-After")...)
			if got := w.Header().Get("RateLimit-Policy"); got != tc.policy {
				t.Fatalf("%s: RateLimit-Policy %q, want %q", tc.name, got, tc.policy)
			}
			if want := tc.lim; want != "" && w.Header().Get("RateLimit") != want+retry {
				t.Fatalf("%s: RateLimit %q, want %q", tc.name, w.Header().Get("RateLimit"), want+retry)
			}
			if w.Body.String() != body429 {
				t.Fatalf("%s: body %q, want %q", tc.name, w.Body, body429)
			}
		}
	})
}

// A policy's problem type, title and detail replace the defaults of its
// refusals (traceId kept); a policy's Reject writes every refusal of its
// own (spent budget, denied identity, cost over capacity) with the
// headers set before it; other policies keep the default answer.
func TestMiddlewarePolicyRejections(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		c := b.Coordinator(t)

		// Problem fields, on a 503 policy, with a span in the request.
		quota := build(t, c, kGCRA, "rej:quota", 1, time.Minute)
		mw, err := NewMiddleware([]Policy{{Name: "quota", Limiter: quota.lim(), Concurrency: quota.cc(), Status: http.StatusServiceUnavailable,
			ProblemType:   "https://iana.org/assignments/http-problem-types#quota-exceeded",
			ProblemTitle:  "Quota exceeded",
			ProblemDetail: "The daily quota of this API is spent."}})
		if err != nil {
			t.Fatal(err)
		}
		h := mw(http.NotFoundHandler())
		span := testharness.TraceCases()["span"]
		do := func(h http.Handler) *httptest.ResponseRecorder {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequestWithContext(span.Ctx, "GET", "/work", nil))
			return w
		}
		start := time.Now()
		if w := do(h); w.Code != http.StatusNotFound {
			t.Fatalf("first request %d", w.Code)
		}
		w := do(h)
		retry := retrySeconds(t, w, time.Minute, start)
		checkProblem(t, w, http.StatusServiceUnavailable, retry)
		checkHeaderKeys(t, "custom problem", w, "Cache-Control", "Content-Type", "Retry-After")
		want := `{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Quota exceeded","status":503,"detail":"The daily quota of this API is spent.","instance":"/work","violated-policies":["quota"],"traceId":"` + span.Want + `"}` + "\n"
		if w.Body.String() != want {
			t.Fatalf("custom problem body %q, want %q", w.Body, want)
		}

		// Reject, for a spent budget (RateLimit field set before it), a
		// cost over capacity and a denied identity.
		list, err := NewDenyList(c, "rej:denied")
		if err != nil {
			t.Fatal(err)
		}
		if err := list.Deny(ctx, "mallory"); err != nil {
			t.Fatal(err)
		}
		perUser, err := NewPartitioned(func(user string) (*Limiter, error) {
			return New(c, PartitionKey("rej:user", user), GCRA{Burst: 2, Interval: time.Minute}, WithDenyList(list, user))
		})
		if err != nil {
			t.Fatal(err)
		}
		defer perUser.Close()
		var got []Refusal
		reject := func(w http.ResponseWriter, r *http.Request, refusal Refusal) {
			got = append(got, refusal)
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(refusal.Status)
			fmt.Fprintf(w, "%s: slow down (%v)\n", refusal.Policy, refusal.RetryAfter)
		}
		other := build(t, c, kGCRA, "rej:other", 5, time.Minute)
		mw, err = NewMiddleware([]Policy{
			{Name: "other", Limiter: other.lim(), Concurrency: other.cc()},
			{Name: "user", Partitioned: perUser, RateLimitHeader: true, Reject: reject,
				Partition: func(r *http.Request) string { return r.Header.Get("User") },
				Permits: func(r *http.Request) int {
					n, _ := strconv.Atoi(r.Header.Get("Cost"))
					return max(n, 1)
				}},
		}, WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		h = mw(http.NotFoundHandler())
		req := func(user, cost string) *httptest.ResponseRecorder {
			r := httptest.NewRequest("GET", "/work", nil)
			r.Header.Set("User", user)
			r.Header.Set("Cost", cost)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			return w
		}
		start = time.Now()
		if w := req("alice", "2"); w.Code != http.StatusNotFound {
			t.Fatalf("alice's first request %d", w.Code)
		}
		w = req("alice", "1") // the burst is spent: a permit is back an interval after the grant
		retry = retrySeconds(t, w, time.Minute, start)
		secs, _ := strconv.Atoi(retry)
		if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != retry ||
			w.Body.String() != fmt.Sprintf("user: slow down (%v)\n", time.Duration(secs)*time.Second) ||
			w.Header().Get("RateLimit") != `"user";r=0;t=`+strconv.Itoa(secs) {
			t.Fatalf("Reject for a spent budget: %d %v %q", w.Code, w.Header(), w.Body)
		}
		checkHeaderKeys(t, "Reject, spent", w, "Cache-Control", "Content-Type", "Ratelimit", "Retry-After")
		if w.Header().Get("Cache-Control") != "no-store" {
			t.Fatalf("Cache-Control %q", w.Header().Get("Cache-Control"))
		}
		w = req("bob", "3")
		if w.Code != http.StatusTooManyRequests || w.Body.String() != "user: slow down (0s)\n" {
			t.Fatalf("Reject for a cost over capacity: %d %q", w.Code, w.Body)
		}
		checkHeaderKeys(t, "Reject, too large", w, "Cache-Control", "Content-Type")
		w = req("mallory", "1")
		if w.Code != http.StatusForbidden || w.Body.String() != "user: slow down (0s)\n" {
			t.Fatalf("Reject for a denied identity: %d %q", w.Code, w.Body)
		}
		checkHeaderKeys(t, "Reject, denied", w, "Cache-Control", "Content-Type")
		wantRefusals := []Refusal{
			{Policy: "user", Status: http.StatusTooManyRequests, RetryAfter: time.Duration(secs) * time.Second},
			{Policy: "user", Status: http.StatusTooManyRequests, TooLarge: true},
			{Policy: "user", Status: http.StatusForbidden, Denied: true},
		}
		if !slices.Equal(got, wantRefusals) {
			t.Fatalf("refusals %+v, want %+v", got, wantRefusals)
		}
		// The earlier policy's grants came back each time (1 kept by
		// alice's first request).
		if n := available(t, other); n != 4 {
			t.Fatalf("other: %d available, want 4", n)
		}
	})
}

// NewMiddleware refuses a Reject beside problem fields and a ProblemType
// that is no URI reference, naming the policy; WithRetryAfter refuses a
// negative spread or cap, naming it.
func TestMiddlewareRejectsBadResponseSettings(t *testing.T) {
	l := &Limiter{sp: &spec{alg: algGCRA, capacity: 1, window: time.Second}}
	reject := func(http.ResponseWriter, *http.Request, Refusal) {}
	for _, c := range []struct {
		p    Policy
		opts []MiddlewareOption
		name string
	}{
		{Policy{Name: "a", Limiter: l, Reject: reject, ProblemTitle: "x"}, nil, "policy a"},
		{Policy{Name: "a", Limiter: l, Reject: reject, ProblemDetail: "x"}, nil, "policy a"},
		{Policy{Name: "a", Limiter: l, Reject: reject, ProblemType: "about:blank"}, nil, "policy a"},
		{Policy{Name: "b", Limiter: l, ProblemType: "http://[::1"}, nil, "policy b"},
		{Policy{Limiter: l}, []MiddlewareOption{WithRetryAfter(-time.Second, 0)}, "spread"},
		{Policy{Limiter: l}, []MiddlewareOption{WithRetryAfter(0, -time.Nanosecond)}, "ceiling"},
	} {
		_, err := NewMiddleware([]Policy{c.p}, c.opts...)
		if name, _ := check.ArgumentName(err); !errors.Is(err, coordination.ErrInvalidArgument) || name != c.name {
			t.Errorf("%+v: %v (names %q), want ErrInvalidArgument naming %q", c.p, err, name, c.name)
		}
	}
	for _, p := range []Policy{
		{Limiter: l, Reject: reject},
		{Limiter: l, ProblemType: "https://example.com/probs/quota", ProblemTitle: "t", ProblemDetail: "d"},
		{Limiter: l, ProblemType: "/problems/quota"},
	} {
		if _, err := NewMiddleware([]Policy{p}, WithRetryAfter(time.Second, time.Hour)); err != nil {
			t.Errorf("%+v: %v", p, err)
		}
	}
}

// The advertised retry is min(d + j, cap) rounded up, j in [0, spread]
// drawn from the middleware's random source, without overflow.
func TestRetryAfterSpreadAndCapBounds(t *testing.T) {
	var asked int64
	fixed := func(v int64) func(int64) int64 {
		return func(n int64) int64 { asked = n; return min(v, n-1) }
	}
	for _, c := range []struct {
		spread, cap time.Duration
		rand        int64
		d           time.Duration
		want        int64
	}{
		{0, 0, 0, 2 * time.Second, 2},
		{0, 0, 0, 2100 * time.Millisecond, 3},
		{1500 * time.Millisecond, 0, 0, 2 * time.Second, 2},
		{1500 * time.Millisecond, 0, math.MaxInt64, 2 * time.Second, 4}, // 3.5 s
		{1500 * time.Millisecond, 3 * time.Second, math.MaxInt64, 2 * time.Second, 3},
		{0, 3 * time.Second, 0, time.Hour, 3},
		{0, 1500 * time.Millisecond, 0, time.Hour, 2}, // a cap is rounded up too
		{time.Hour, 0, math.MaxInt64, math.MaxInt64, RetryAfterSeconds(math.MaxInt64)},
	} {
		m := &middleware{cfg: middlewareConfig{spread: c.spread, retryCap: c.cap, randInt64N: fixed(c.rand)}}
		asked = 0
		if got := m.retryAfter(c.d); got != c.want {
			t.Errorf("spread %v cap %v rand %d, d %v: %d, want %d", c.spread, c.cap, c.rand, c.d, got, c.want)
		}
		if c.spread > 0 && asked != int64(c.spread)+1 {
			t.Errorf("spread %v: drew from [0, %d), want [0, %d]", c.spread, asked, c.spread)
		}
	}
	// The real source: every value in [ceil(d), ceil(d+spread)], spread
	// over more than one.
	mw := &middleware{cfg: middlewareConfig{spread: 10 * time.Second, randInt64N: rand.Int64N}}
	seen := map[int64]bool{}
	for range 1000 {
		s := mw.retryAfter(5 * time.Second)
		if s < 5 || s > 15 {
			t.Fatalf("Retry-After %d outside [5, 15]", s)
		}
		seen[s] = true
	}
	if len(seen) < 5 {
		t.Fatalf("1000 draws gave %d distinct values: %v", len(seen), seen)
	}
}

// Through the middleware, on every backend: the refusal's Retry-After
// (and the RateLimit t, equal to it) gets the drawn spread, and the cap.
func TestMiddlewareRetryAfterSpreadAndCap(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		c := b.Coordinator(t)
		for i, tc := range []struct {
			spread, cap time.Duration
			rand        int64         // what the source draws
			add         time.Duration // the spread it adds
			capped      string        // the expected value when capped
		}{
			{10 * time.Second, 0, math.MaxInt64, 10 * time.Second, ""},
			{10 * time.Second, 0, 0, 0, ""},
			{10 * time.Second, 0, int64(4 * time.Second), 4 * time.Second, ""},
			{0, 30 * time.Second, 0, 0, "30"},
			{10 * time.Second, 65 * time.Second, math.MaxInt64, 0, "65"},
		} {
			lim := build(t, c, kGCRA, "spread:"+strconv.Itoa(i), 1, time.Minute)
			var drew int64
			mw, err := NewMiddleware([]Policy{{Name: "api", Limiter: lim.lim(), Concurrency: lim.cc(), RateLimitHeader: true}},
				WithRetryAfter(tc.spread, tc.cap), withRand(func(n int64) int64 { drew = n; return min(tc.rand, n-1) }))
			if err != nil {
				t.Fatal(err)
			}
			h := mw(http.NotFoundHandler())
			start := time.Now()
			if w := serve(t, h, "/work"); w.Code != http.StatusNotFound || w.Header().Get("Retry-After") != "" || w.Header().Get("RateLimit") != `"api";r=0` {
				t.Fatalf("%d: first request %d %v", i, w.Code, w.Header())
			}
			w := serve(t, h, "/work")
			want := tc.capped
			if want == "" {
				want = retrySeconds(t, w, time.Minute+tc.add, start)
			}
			checkProblem(t, w, http.StatusTooManyRequests, want)
			if got := w.Header().Get("RateLimit"); got != `"api";r=0;t=`+want {
				t.Fatalf("%d: RateLimit %q, want t=%s", i, got, want)
			}
			if tc.spread > 0 && drew != int64(tc.spread)+1 {
				t.Fatalf("%d: drew from [0, %d), want [0, spread]", i, drew)
			}
		}
	})
}
