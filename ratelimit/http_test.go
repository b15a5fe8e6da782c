package ratelimit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

func TestPartitionKey(t *testing.T) {
	a, b := PartitionKey("limits:api", "tenant:42"), PartitionKey("limits:api", "tenant:43")
	if a == b || a != PartitionKey("limits:api", "tenant:42") {
		t.Fatalf("keys %q %q", a, b)
	}
	if !strings.HasPrefix(a, "limits:api:") || len(a) != len("limits:api:")+32 || strings.Contains(a, "tenant") {
		t.Fatalf("key %q: want base, colon, 32 hex digits and no raw partition", a)
	}
}

func TestPartitionedOnDemandAndIdleEviction(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		c := b.Coordinator(t)
		var mu sync.Mutex
		made := map[string]int{}
		p, err := NewPartitioned(func(part string) (*Limiter, error) {
			mu.Lock()
			made[part]++
			mu.Unlock()
			return New(c, PartitionKey("pt", part), FixedWindow{Limit: 2, Window: 10 * time.Second})
		}, WithIdleTimeout(50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		ctx := context.Background()
		got := map[string]int{}
		start := time.Now()
		for _, part := range []string{"a", "a", "a", "b"} {
			le, err := p.Allow(ctx, part, 1)
			if err != nil {
				t.Fatal(err)
			}
			if le.Allowed() {
				got[part]++
			}
		}
		// Within the idle timeout, nothing was evicted: one limiter each.
		// A stall of the test longer than it may have evicted a between
		// two calls (made again, continuing its budget in Redis).
		quick := time.Since(start) < 50*time.Millisecond
		madeA := made["a"]
		if got["a"] != 2 || got["b"] != 1 || madeA < 1 || (quick && (madeA != 1 || p.Len() != 2)) {
			t.Fatalf("granted %v, made %v, len %d (the calls took %v)", got, made, p.Len(), time.Since(start))
		}
		// A held concurrency lease keeps its partition alive.
		pc, err := NewPartitionedConcurrency(func(part string) (*ConcurrencyLimiter, error) {
			return NewConcurrency(c, PartitionKey("pc", part), 1, WithLeaseDuration(10*time.Second))
		}, WithIdleTimeout(50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		h, err := pc.TryAcquire(ctx, "x", 1)
		if err != nil {
			t.Fatalf("acquire: %v", err)
		}
		time.Sleep(120 * time.Millisecond)
		if _, err := p.Allow(ctx, "c", 1); err != nil { // sweeps a and b
			t.Fatal(err)
		}
		if _, err := pc.TryAcquire(ctx, "y", 1); err != nil { // sweeps nothing: x holds a lease
			t.Fatal(err)
		}
		if p.Len() != 1 || pc.Len() != 2 {
			t.Fatalf("after idle: %d and %d partitions, want 1 and 2", p.Len(), pc.Len())
		}
		// The evicted limiter's budget is in Redis: a new one continues it.
		if le, _ := p.Allow(ctx, "a", 1); le.Allowed() || made["a"] != madeA+1 {
			t.Fatalf("recreated partition a: acquired=%v made=%d", le.Allowed(), made["a"])
		}
		_, _ = h.Release(ctx)
		p.Close()
		if _, err := p.Allow(ctx, "a", 1); !errors.Is(err, coordination.ErrClosed) {
			t.Fatalf("after Close: %v", err)
		}
	})
}

func TestRetryAfterSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int64{
		time.Millisecond: 1, 999 * time.Millisecond: 1, time.Second: 1,
		time.Second + time.Millisecond: 2, 59500 * time.Millisecond: 60,
	} {
		if got := RetryAfterSeconds(d); got != want {
			t.Errorf("RetryAfterSeconds(%v) = %d, want %d", d, got, want)
		}
	}
}

type problemBody struct {
	Type     string   `json:"type"`
	Title    string   `json:"title"`
	Status   int      `json:"status"`
	Detail   string   `json:"detail"`
	Instance string   `json:"instance"`
	Violated []string `json:"violated-policies"`
}

func serve(t testing.TB, h http.Handler, path string) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	r := httptest.NewRequest("GET", path, nil)
	r.RemoteAddr = "203.0.113.9:5555"
	h.ServeHTTP(w, r)
	return w
}

// retrySeconds returns the Retry-After to expect of a refusal whose
// permit comes back d after a grant made after start: d in whole seconds
// rounded up when nothing stalled; less by up to the time since start
// (rounded up as the middleware does) when a stall let the server's clock
// move on. It returns w's own value when that lies in this range, else d's.
func retrySeconds(t testing.TB, w *httptest.ResponseRecorder, d time.Duration, start time.Time) string {
	t.Helper()
	most := int(math.Ceil(d.Seconds()))
	since := time.Since(start)
	if got, err := strconv.Atoi(w.Header().Get("Retry-After")); err == nil && got <= most && float64(got) >= math.Ceil((d-since).Seconds()) {
		if got != most {
			t.Logf("Retry-After %d, not %d: the grant was %v ago", got, most, since)
		}
		return strconv.Itoa(got)
	}
	return strconv.Itoa(most)
}

func checkProblem(t testing.TB, w *httptest.ResponseRecorder, status int, retryAfter string) {
	t.Helper()
	if w.Code != status {
		t.Fatalf("status %d, want %d", w.Code, status)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q", ct)
	}
	if cc := w.Header().Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("Cache-Control %q", cc)
	}
	ra, has := w.Header()["Retry-After"]
	if retryAfter == "" && has {
		t.Fatalf("Retry-After %v present, want none", ra)
	}
	if retryAfter != "" && (len(ra) != 1 || ra[0] != retryAfter) {
		t.Fatalf("Retry-After %v, want %q", ra, retryAfter)
	}
	var p problemBody
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatalf("body %q: %v", w.Body.String(), err)
	}
	if p.Status != status || p.Type == "" || p.Title == "" || p.Detail == "" || p.Instance != "/work" {
		t.Fatalf("problem %+v", p)
	}
	if strings.Contains(w.Body.String(), "203.0.113.9") {
		t.Fatalf("body discloses the partition: %s", w.Body.String())
	}
}

func TestMiddleware(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		c := b.Coordinator(t)
		guard := build(t, c, kConc, "mw:guard", 1, 10*time.Second)
		perClient, err := NewPartitioned(func(part string) (*Limiter, error) {
			return New(c, PartitionKey("mw:client", part), GCRA{Burst: 2, Interval: 90 * time.Second})
		})
		if err != nil {
			t.Fatal(err)
		}
		defer perClient.Close()
		mw, err := NewMiddleware([]Policy{
			{Name: "guard", Limiter: guard.lim(), Concurrency: guard.cc(), Status: http.StatusServiceUnavailable},
			{Name: "client", Partitioned: perClient, Partition: ClientIP},
		})
		if err != nil {
			t.Fatal(err)
		}
		var inside chan struct{}
		release := make(chan struct{})
		h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if inside != nil {
				close(inside)
				<-release
			}
			w.WriteHeader(http.StatusNoContent)
		}))
		start := time.Now() // before the client's first grant
		if w := serve(t, h, "/work"); w.Code != http.StatusNoContent {
			t.Fatalf("first request: %d %s", w.Code, w.Body)
		}
		// While one request holds the guard, another gets 503 without
		// Retry-After.
		inside = make(chan struct{})
		done := make(chan *httptest.ResponseRecorder)
		go func() { done <- serve(t, h, "/work") }()
		<-inside
		checkProblem(t, serve(t, h, "/work"), http.StatusServiceUnavailable, "")
		close(release)
		if w := <-done; w.Code != http.StatusNoContent {
			t.Fatalf("second request: %d", w.Code)
		}
		inside = nil
		// The client's burst of 2 is spent: 429 with Retry-After rounded up
		// (90 s interval: a little under 90 s, so "90"; 90 s after the
		// first grant less the time since, had a stall made that a second
		// or more).
		w := serve(t, h, "/work")
		checkProblem(t, w, http.StatusTooManyRequests, retrySeconds(t, w, 90*time.Second, start))
		// The guard's lease was released after each request and after the
		// refusal by the later policy.
		if le := acquire(t, guard, 1); !le.Acquired() {
			t.Fatal("guard permit leaked")
		} else {
			_ = le.Release(context.Background())
		}

		// A policy refusing without RetryAfter (a concurrency limiter
		// answering 429) sends no Retry-After.
		conc := build(t, c, kConc, "mw:conc", 1, 10*time.Second)
		held := acquire(t, conc, 1)
		mw2, err := NewMiddleware([]Policy{{Limiter: conc.lim(), Concurrency: conc.cc()}})
		if err != nil {
			t.Fatal(err)
		}
		checkProblem(t, serve(t, mw2(http.NotFoundHandler()), "/work"), http.StatusTooManyRequests, "")
		_ = held.Release(context.Background())

		for _, bad := range [][]Policy{
			{{}},
			{{Limiter: guard.lim(), Concurrency: guard.cc(), Partitioned: perClient, Partition: ClientIP}},
			{{Partitioned: perClient}},
			{{Limiter: guard.lim(), Concurrency: guard.cc(), Status: 500}},
		} {
			if _, err := NewMiddleware(bad); !errors.Is(err, coordination.ErrInvalidArgument) {
				t.Fatalf("bad policy %+v: %v", bad, err)
			}
		}
	})
}

// TestMiddlewareLimiterFailure answers 503 without Retry-After when the
// limiter fails (ReturnError), and writes nothing when the client is gone.
func TestMiddlewareLimiterFailure(t *testing.T) {
	b := testharness.Get(t, "miniredis")
	c, err := coordination.New(b.Client(t, func(o *redis.Options) { o.DialerRetries, o.MaxRetries = 1, -1 }))
	if err != nil {
		t.Fatal(err)
	}
	l := build(t, c, kFixed, "mwf", 1, time.Second)
	b.Mini.Close()
	mw, err := NewMiddleware([]Policy{{Limiter: l.lim(), Concurrency: l.cc()}}, WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	h := mw(http.NotFoundHandler())
	checkProblem(t, serve(t, h, "/work"), http.StatusServiceUnavailable, "")
	w := httptest.NewRecorder()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/work", nil).WithContext(ctx))
	if w.Body.Len() != 0 || w.Header().Get("Content-Type") != "" {
		t.Fatalf("wrote %d %q for a gone client", w.Code, w.Body)
	}
}

func TestMiddlewareRejectsPoliciesThatCannotWork(t *testing.T) {
	coord, err := coordination.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}))
	if err != nil {
		t.Fatal(err)
	}
	defer coord.Client().Close()
	if _, err := NewMiddleware(nil); !errors.Is(err, coordination.ErrInvalidArgument) {
		t.Errorf("no policies: %v", err)
	}
	never, err := newT(coord, "k", GCRA{Burst: 1, Interval: time.Second}, WithQueue(0, OldestFirst))
	if err != nil {
		t.Fatal(err)
	}
	defer never.Close()
	if _, err := NewMiddleware([]Policy{{Name: "never", Limiter: never.lim(), Concurrency: never.cc(), Wait: true}}); !errors.Is(err, coordination.ErrInvalidArgument) {
		t.Errorf("Wait on a limiter that never queues: %v", err)
	} else if name, _ := check.ArgumentName(err); name != "policy never" {
		t.Errorf("Wait on a limiter that never queues names %q, want %q", name, "policy never")
	}
	for _, opts := range [][]Option{nil, {WithQueue(5, OldestFirst)}} {
		q, err := newT(coord, "k", GCRA{Burst: 1, Interval: time.Second}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		if _, err := NewMiddleware([]Policy{{Limiter: q.lim(), Concurrency: q.cc(), Wait: true}}); err != nil {
			t.Errorf("Wait on a limiter that queues: %v", err)
		}
	}
	l, err := newT(coord, "k", GCRA{Burst: 1, Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, o := range []MiddlewareOption{WithLogger(nil), WithErrorHandler(nil)} {
		if _, err := NewMiddleware([]Policy{{Limiter: l.lim(), Concurrency: l.cc()}}, o); !errors.Is(err, coordination.ErrInvalidArgument) {
			t.Errorf("nil middleware option: %v", err)
		}
	}
}

// The RateLimit header fields (IETF httpapi draft) on allowed and refused
// responses of policies that ask for them, for a burst that trips a limit;
// the problem body names the refusing policy; a policy that asks for
// nothing (the default) sends neither field.
func TestMiddlewareRateLimitHeaders(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		c := b.Coordinator(t)
		// A minute an interval: the 4 requests find the state they expect
		// however slow the machine is (with 1 s, a stall between them let a
		// permit come back).
		api := build(t, c, kGCRA, "hdr:api", 3, time.Minute)
		guard := build(t, c, kConc, "hdr:guard", 8, 10*time.Second)
		mw, err := NewMiddleware([]Policy{
			{Name: "guard", Limiter: guard.lim(), Concurrency: guard.cc(), Status: http.StatusServiceUnavailable, RateLimitHeader: true, PublishQuota: true},
			{Name: "api", Limiter: api.lim(), Concurrency: api.cc(), RateLimitHeader: true, PublishQuota: true},
		})
		if err != nil {
			t.Fatal(err)
		}
		h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
		policy := `"guard";q=8;qu="concurrent-requests", "api";q=3;w=180`
		start := time.Now() // before the first grant: the refusal's t is 60 s after it
		for i, want := range []string{`"guard";r=7, "api";r=2`, `"guard";r=7, "api";r=1`, `"guard";r=7, "api";r=0`, `"guard";r=7, "api";r=0;t=`} {
			w := serve(t, h, "/work")
			retry := ""
			if i == 3 {
				retry = retrySeconds(t, w, time.Minute, start)
				want += retry
			}
			t.Logf("request %d: %d RateLimit-Policy: %s | RateLimit: %s | Retry-After: %s", i+1, w.Code,
				w.Header().Get("RateLimit-Policy"), w.Header().Get("RateLimit"), w.Header().Get("Retry-After"))
			if got := w.Header().Get("RateLimit-Policy"); got != policy {
				t.Fatalf("request %d: RateLimit-Policy %q, want %q", i+1, got, policy)
			}
			if got := w.Header().Get("RateLimit"); got != want {
				t.Fatalf("request %d: RateLimit %q, want %q", i+1, got, want)
			}
			if i < 3 && w.Code != http.StatusNoContent {
				t.Fatalf("request %d: %d", i+1, w.Code)
			}
			if i == 3 {
				checkProblem(t, w, http.StatusTooManyRequests, retry)
				var p problemBody
				_ = json.Unmarshal(w.Body.Bytes(), &p)
				if len(p.Violated) != 1 || p.Violated[0] != "api" {
					t.Fatalf("violated-policies %v, want [api]", p.Violated)
				}
			}
		}
		quiet, err := NewMiddleware([]Policy{{Name: "api", Limiter: api.lim(), Concurrency: api.cc()}})
		if err != nil {
			t.Fatal(err)
		}
		w := serve(t, quiet(http.NotFoundHandler()), "/work")
		if _, has := w.Header()["Ratelimit"]; has || w.Header().Get("RateLimit-Policy") != "" || w.Header().Get("Retry-After") == "" {
			t.Fatalf("a policy asking for no field: %v, want Retry-After alone", w.Header())
		}
		if _, err := NewMiddleware([]Policy{{Name: "a \"quoted\" name", Limiter: api.lim(), Concurrency: api.cc()}}); err != nil {
			t.Fatalf("a printable name: %v", err)
		}
		if _, err := NewMiddleware([]Policy{{Name: "bad\x01", Limiter: api.lim(), Concurrency: api.cc()}}); !errors.Is(err, coordination.ErrInvalidArgument) {
			t.Fatalf("a name with a control character: %v", err)
		}
	})
}

// Layered policies are all or nothing: when a later policy refuses, the
// permits earlier window, bucket and GCRA policies took are given back.
func TestMiddlewareRefundsEarlierPolicies(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		c := b.Coordinator(t)
		for _, k := range []kind{kFixed, kSliding, kBucket, kGCRA, kComp} {
			quota := build(t, c, k, "refund:quota:"+string(k), 5, time.Minute)
			strict := build(t, c, kGCRA, "refund:strict:"+string(k), 1, time.Minute)
			mw, err := NewMiddleware([]Policy{{Name: "quota", Limiter: quota.lim(), Concurrency: quota.cc()}, {Name: "strict", Limiter: strict.lim(), Concurrency: strict.cc()}})
			if err != nil {
				t.Fatal(err)
			}
			h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
			start := time.Now() // before strict's grant: its refusals retry a minute after it
			if w := serve(t, h, "/work"); w.Code != http.StatusNoContent {
				t.Fatalf("%s: first request %d", k, w.Code)
			}
			for range 3 {
				w := serve(t, h, "/work")
				checkProblem(t, w, http.StatusTooManyRequests, retrySeconds(t, w, time.Minute, start))
			}
			if n := available(t, quota); n != 4 {
				t.Fatalf("%s: after 1 passed and 3 refused by the later policy: %d available, want 4", k, n)
			}
		}
	})
}

// A Permits function returning a negative number is answered 500, logged
// once (however often it happens) with the policy's name, handed to the
// error handler, and consumes nothing.
func TestMiddlewareNegativePermits(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		c := b.Coordinator(t)
		first := build(t, c, kGCRA, "neg:first", 5, time.Minute)
		bad := build(t, c, kGCRA, "neg:bad", 5, time.Minute)
		var buf lockedBuffer
		var handled atomic.Int32
		mw, err := NewMiddleware([]Policy{
			{Name: "first", Limiter: first.lim(), Concurrency: first.cc()},
			{Name: "weighted", Limiter: bad.lim(), Concurrency: bad.cc(), Permits: func(*http.Request) int { return -2 }},
		}, WithLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: noTime}))),
			WithErrorHandler(func(r *http.Request, err error) {
				if strings.Contains(err.Error(), "weighted") && strings.Contains(err.Error(), "-2") {
					handled.Add(1)
				}
			}))
		if err != nil {
			t.Fatal(err)
		}
		h := mw(http.NotFoundHandler())
		for range 3 {
			checkProblem(t, serve(t, h, "/work"), http.StatusInternalServerError, "")
		}
		if n := strings.Count(buf.String(), "\n"); n != 1 || !strings.Contains(buf.String(), "policy=weighted") || !strings.Contains(buf.String(), "level=ERROR") {
			t.Fatalf("log: %q, want one error line naming the policy", buf.String())
		}
		if handled.Load() != 3 {
			t.Fatalf("error handler saw %d requests, want 3", handled.Load())
		}
		if available(t, first) != 5 || available(t, bad) != 5 {
			t.Fatal("a refused request consumed permits")
		}
	})
}

// A request whose Permits exceed the policy's capacity can never pass:
// it is refused with the policy's status and a problem body saying so,
// without Retry-After (waiting never helps), the earlier policies' permits
// given back and nothing sent for it; the middleware logs it at warn once
// (then at most once a minute), naming the policy, the cost and the
// capacity, never a key or partition. Allow and Wait policies alike.
func TestMiddlewareCostOverCapacity(t *testing.T) {
	const detail = "The request costs more permits than the rate-limit policy ever grants at once: it cannot be admitted, and retrying it will not help."
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		c := b.Coordinator(t)
		for _, tc := range []struct {
			k      kind
			wait   bool
			status int
		}{{kGCRA, false, 0}, {kGCRA, true, 0}, {kConc, false, http.StatusServiceUnavailable}, {kConc, true, 0}} {
			name := fmt.Sprintf("%s/wait=%v", tc.k, tc.wait)
			first := build(t, c, kGCRA, "big:first:"+name, 5, time.Minute)
			big := build(t, c, tc.k, "big:"+name, 5, time.Minute)
			var buf lockedBuffer
			var handled, ran atomic.Int32
			mw, err := NewMiddleware([]Policy{
				{Name: "first", Limiter: first.lim(), Concurrency: first.cc()},
				{Name: "weighted", Limiter: big.lim(), Concurrency: big.cc(), Wait: tc.wait, Status: tc.status,
					Permits: func(*http.Request) int { return 7 }},
			}, WithLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: noTime}))),
				WithErrorHandler(func(*http.Request, error) { handled.Add(1) }))
			if err != nil {
				t.Fatal(err)
			}
			h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran.Add(1) }))
			want := tc.status
			if want == 0 {
				want = http.StatusTooManyRequests
			}
			for range 3 {
				w := serve(t, h, "/work")
				checkProblem(t, w, want, "")
				var p problemBody
				if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
					t.Fatal(err)
				}
				if p.Detail != detail || len(p.Violated) != 1 || p.Violated[0] != "weighted" {
					t.Fatalf("%s: problem %+v, want detail %q and violated-policies [weighted]", name, p, detail)
				}
			}
			const line = `level=WARN msg="ratelimit: a request costs more permits than the policy's capacity; refused" policy=weighted permits=7 capacity=5 answer=`
			if got := buf.String(); strings.Count(got, "\n") != 1 || !strings.HasPrefix(got, line) || strings.Contains(got, "big:") {
				t.Fatalf("%s: log %q, want one line beginning %q", name, got, line)
			}
			if ran.Load() != 0 || handled.Load() != 0 {
				t.Fatalf("%s: handler ran %d times, error handler %d times; want 0 and 0", name, ran.Load(), handled.Load())
			}
			if available(t, first) != 5 || available(t, big) != 5 {
				t.Fatalf("%s: permits were consumed: first %d, weighted %d available", name, available(t, first), available(t, big))
			}
		}

		// The refusal sends nothing to Redis.
		client := b.Client(t)
		cc := withClient(t, b, client)
		t.Cleanup(func() { _ = cc.Shutdown(context.Background()) })
		lone := build(t, cc, kGCRA, "big:lone", 5, time.Minute)
		mw, err := NewMiddleware([]Policy{{Limiter: lone.lim(), Permits: func(*http.Request) int { return 6 }}},
			WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		sent := testharness.CountCommands(client)
		checkProblem(t, serve(t, mw(http.NotFoundHandler()), "/work"), http.StatusTooManyRequests, "")
		if n := sent.Count(); n != 0 {
			t.Fatalf("an over-capacity request sent %v", sent.Names())
		}
	})
}

// A denied identity is answered 403 Forbidden, without Retry-After.
func TestMiddlewareDenied(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		c := b.Coordinator(t)
		list, err := NewDenyList(c, "mw-deny")
		if err != nil {
			t.Fatal(err)
		}
		if err := list.Deny(ctx, "203.0.113.9"); err != nil {
			t.Fatal(err)
		}
		p, err := NewPartitioned(func(ip string) (*Limiter, error) {
			return New(c, PartitionKey("mw-deny:ip", ip), GCRA{Burst: 5, Interval: time.Second}, WithDenyList(list, ip))
		})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		mw, err := NewMiddleware([]Policy{{Name: "ip", Partitioned: p, Partition: ClientIP}})
		if err != nil {
			t.Fatal(err)
		}
		w := serve(t, mw(http.NotFoundHandler()), "/work")
		checkProblem(t, w, http.StatusForbidden, "")
	})
}
