package ratelimit

import (
	"context"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// sdkMetrics is a coordinator's metrics read through the OpenTelemetry
// SDK's manual reader.
type sdkMetrics struct {
	reader *sdkmetric.ManualReader
}

func newSDKMetrics(t testing.TB, b *testharness.Backend) (*coordination.Coordinator, *sdkMetrics) {
	t.Helper()
	mp, ms := newMeterProvider(t)
	return b.Coordinator(t, coordination.WithMeterProvider(mp)), ms
}

// newMeterProvider returns an SDK meter provider and its manual reader.
func newMeterProvider(t testing.TB) (*sdkmetric.MeterProvider, *sdkMetrics) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return mp, &sdkMetrics{reader: reader}
}

// collect returns every int64 sum's data points by "name{k=v,...}" (the
// attributes sorted; no braces without attributes).
func (m *sdkMetrics) collect(t testing.TB) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := m.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			sum, ok := mt.Data.(metricdata.Sum[int64])
			if !ok {
				continue
			}
			for _, dp := range sum.DataPoints {
				var kv []string
				for _, a := range dp.Attributes.ToSlice() {
					kv = append(kv, string(a.Key)+"="+a.Value.Emit())
				}
				sort.Strings(kv)
				k := mt.Name
				if len(kv) > 0 {
					k += "{" + strings.Join(kv, ",") + "}"
				}
				out[k] += dp.Value
			}
		}
	}
	return out
}

// wantMetrics checks the named values of got (a missing name is 0).
func wantMetrics(t testing.TB, got map[string]int64, want map[string]int64) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
}

// A shadow policy decides and consumes as usual but never refuses: every
// request reaches the handler, its RateLimit item never carries t, no
// Retry-After is sent, what it would have refused is counted by policy,
// mode and reason, and logged once at info (then at most once a minute).
func TestMiddlewareShadowPolicy(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		c, ms := newSDKMetrics(t, b)
		next := build(t, c, kGCRA, "shadow:next", 2, time.Minute)
		var buf lockedBuffer
		mw, err := NewMiddleware([]Policy{{Name: "next", Limiter: next.lim(), Shadow: true, RateLimitHeader: true, PublishQuota: true}},
			WithLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: noTime}))))
		if err != nil {
			t.Fatal(err)
		}
		h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
		wantR := []string{`"next";r=1`, `"next";r=0`, `"next";r=0`, `"next";r=0`}
		for i, r := range wantR {
			w := serve(t, h, "/work")
			if w.Code != http.StatusNoContent || w.Body.Len() != 0 {
				t.Fatalf("request %d: %d %q, want 204 and no body", i+1, w.Code, w.Body)
			}
			checkHeaderKeys(t, "shadow", w, "Ratelimit", "Ratelimit-Policy")
			if got := w.Header().Get("RateLimit"); got != r {
				t.Fatalf("request %d: RateLimit %q, want %q", i+1, got, r)
			}
			if got := w.Header().Get("RateLimit-Policy"); got != `"next";q=2;w=120` {
				t.Fatalf("request %d: RateLimit-Policy %q", i+1, got)
			}
		}
		got := ms.collect(t)
		if n := available(t, next); n != 0 {
			t.Fatalf("%d available after 2 grants and 2 shadow refusals of a burst of 2, want 0", n)
		}
		wantMetrics(t, got, map[string]int64{
			"coordination.rate_limit.allowed":                                                  2,
			"coordination.rate_limit.blocked{reason=capacity}":                                 2,
			"coordination.rate_limit.policy.refused{mode=shadow,policy=next,reason=capacity}":  2,
			"coordination.rate_limit.policy.refused{mode=enforce,policy=next,reason=capacity}": 0,
			"coordination.rate_limit.policy.near_limit{policy=next}":                           1,
			"coordination.rate_limit.near_limit":                                               1,
		})
		want := "level=INFO msg=\"ratelimit: a shadow policy would have refused a request; admitted\" policy=next reason=capacity\n"
		if buf.String() != want {
			t.Fatalf("log %q, want %q", buf.String(), want)
		}
	})
}

// Shadow policies mixed with enforced ones: a shadow refusal lets the
// request go on (it consumes nothing, as every refusal), and when a later
// enforced policy refuses, the grants of every earlier policy, shadow or
// not, are given back, exactly as without shadow mode.
func TestMiddlewareShadowMixedRefunds(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		c, ms := newSDKMetrics(t, b)
		for _, k := range consumptive {
			quota := build(t, c, k, "shmix:quota:"+string(k), 5, time.Minute)
			trial := build(t, c, k, "shmix:trial:"+string(k), 5, time.Minute)
			tight := build(t, c, kGCRA, "shmix:tight:"+string(k), 1, time.Minute)
			strict := build(t, c, kGCRA, "shmix:strict:"+string(k), 2, time.Minute)
			mw, err := NewMiddleware([]Policy{
				{Name: "quota", Limiter: quota.lim()},
				{Name: "trial", Limiter: trial.lim(), Shadow: true},
				{Name: "tight", Limiter: tight.lim(), Shadow: true},
				{Name: "strict", Limiter: strict.lim()},
			}, WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				t.Fatal(err)
			}
			h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
			// 1: all grant. 2: tight (shadow) would refuse: admitted, the
			// others grant. 3 and 4: strict refuses: quota's and trial's
			// grants are given back; tight's refusal consumed nothing.
			for i, want := range []int{204, 204, 429, 429} {
				w := serve(t, h, "/work")
				if w.Code != want {
					t.Fatalf("%s: request %d: %d, want %d", k, i+1, w.Code, want)
				}
				if want == 429 {
					checkProblem(t, w, http.StatusTooManyRequests, w.Header().Get("Retry-After"))
					if !strings.Contains(w.Body.String(), `"violated-policies":["strict"]`) {
						t.Fatalf("%s: body %s", k, w.Body)
					}
				}
			}
			if q, tr, ti := available(t, quota), available(t, trial), available(t, tight); q != 3 || tr != 3 || ti != 0 {
				t.Fatalf("%s: available quota %d, trial %d, tight %d; want 3, 3, 0", k, q, tr, ti)
			}
		}
		n := int64(len(consumptive))
		wantMetrics(t, ms.collect(t), map[string]int64{
			"coordination.rate_limit.policy.refused{mode=shadow,policy=tight,reason=capacity}":   3 * n,
			"coordination.rate_limit.policy.refused{mode=enforce,policy=strict,reason=capacity}": 2 * n,
			"coordination.rate_limit.policy.refused{mode=shadow,policy=trial,reason=capacity}":   0,
		})
	})
}

// A shadow policy with Wait never delays the request: it decides at once,
// and a request that would have waited is counted as a capacity refusal.
func TestMiddlewareShadowNeverWaits(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		c, ms := newSDKMetrics(t, b)
		slow := build(t, c, kGCRA, "shwait", 1, time.Minute)
		mw, err := NewMiddleware([]Policy{{Name: "slow", Limiter: slow.lim(), Wait: true, Shadow: true}},
			WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
		start := time.Now()
		for i := range 3 {
			if w := serve(t, h, "/work"); w.Code != http.StatusNoContent {
				t.Fatalf("request %d: %d", i+1, w.Code)
			}
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("3 requests took %v: the shadow waited", d)
		}
		if slow.lim().Statistics().QueuedPermits != 0 {
			t.Fatal("a shadow request queued")
		}
		wantMetrics(t, ms.collect(t), map[string]int64{
			"coordination.rate_limit.policy.refused{mode=shadow,policy=slow,reason=capacity}": 2,
		})
	})
}

// WithShadow makes every policy a shadow: a held concurrency guard, a
// denied identity, a cost above the capacity and a failing limiter all
// let the request through (the handler runs without a lease), without
// Retry-After or a problem body; each is counted by reason.
func TestMiddlewareWithShadow(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		c, ms := newSDKMetrics(t, b)
		guard := build(t, c, kConc, "wsh:guard", 1, 10*time.Second)
		held := acquire(t, guard, 1)
		defer func() { _ = held.Release(ctx) }()
		list, err := NewDenyList(c, "wsh:deny")
		if err != nil {
			t.Fatal(err)
		}
		if err := list.Deny(ctx, "203.0.113.9"); err != nil {
			t.Fatal(err)
		}
		perIP, err := NewPartitioned(func(ip string) (*Limiter, error) {
			return New(c, PartitionKey("wsh:ip", ip), GCRA{Burst: 5, Interval: time.Second}, WithDenyList(list, ip))
		})
		if err != nil {
			t.Fatal(err)
		}
		defer perIP.Close()
		costly := build(t, c, kFixed, "wsh:costly", 2, time.Minute)
		var handled atomic.Int32
		mw, err := NewMiddleware([]Policy{
			{Name: "guard", Concurrency: guard.cc(), Status: http.StatusServiceUnavailable},
			{Name: "ip", Partitioned: perIP, Partition: ClientIP},
			{Name: "costly", Limiter: costly.lim(), Permits: func(*http.Request) int { return 3 }},
		}, WithShadow(), WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if guard.cc().Statistics().AvailablePermits != 0 {
				t.Error("a lease was taken")
			}
			handled.Add(1)
			_, _ = w.Write([]byte("ok\n"))
		}))
		for range 2 {
			w := serve(t, h, "/work")
			if w.Code != http.StatusOK || w.Body.String() != "ok\n" {
				t.Fatalf("%d %q", w.Code, w.Body)
			}
			checkHeaderKeys(t, "WithShadow", w, "Content-Type")
		}
		// A limiter that fails (ReturnError) admits too, and the error
		// handler hears of it.
		dead := testharness.Get(t, "miniredis")
		dc, err := coordination.New(dead.Client(t, func(o *redis.Options) { o.DialerRetries, o.MaxRetries = 1, -1 }))
		if err != nil {
			t.Fatal(err)
		}
		failing := build(t, dc, kFixed, "wsh:failing", 1, time.Second)
		dead.Mini.Close()
		var failures atomic.Int32
		mwf, err := NewMiddleware([]Policy{{Name: "failing", Limiter: failing.lim()}}, WithShadow(),
			WithLogger(slog.New(slog.DiscardHandler)), WithErrorHandler(func(*http.Request, error) { failures.Add(1) }))
		if err != nil {
			t.Fatal(err)
		}
		if w := serve(t, mwf(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })), "/work"); w.Code != http.StatusNoContent {
			t.Fatalf("failing shadow limiter: %d %q", w.Code, w.Body)
		}
		if handled.Load() != 2 || failures.Load() != 1 {
			t.Fatalf("handled %d, failures %d; want 2, 1", handled.Load(), failures.Load())
		}
		wantMetrics(t, ms.collect(t), map[string]int64{
			"coordination.rate_limit.policy.refused{mode=shadow,policy=guard,reason=capacity}":   2,
			"coordination.rate_limit.policy.refused{mode=shadow,policy=ip,reason=deny_list}":     2,
			"coordination.rate_limit.policy.refused{mode=shadow,policy=costly,reason=too_large}": 2,
		})
	})
}

// The limiters' own instruments: near_limit on grants leaving at most a
// fifth of the capacity, canceled for a Wait whose context ended while
// queued (not blocked), the queue-depth and active-lease gauges.
func TestLimiterObservability(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		c, ms := newSDKMetrics(t, b)
		fw := build(t, c, kFixed, "obs:fw", 5, time.Minute)
		for range 5 { // available 4, 3, 2, 1, 0: the last two are near the limit
			if !acquire(t, fw, 1).Acquired() {
				t.Fatal("refused within the limit")
			}
		}
		wantMetrics(t, ms.collect(t), map[string]int64{
			"coordination.rate_limit.allowed":    5,
			"coordination.rate_limit.near_limit": 2,
		})

		// A Wait canceled while queued: canceled, neither allowed nor
		// blocked; the queue gauge is 1 while it waits, 0 after.
		g := build(t, c, kGCRA, "obs:gcra", 1, time.Minute)
		acquire(t, g, 1)
		before := ms.collect(t)
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { _, err := g.Wait(wctx, 1); done <- err }()
		deadline := time.Now().Add(5 * time.Second)
		for g.lim().Statistics().QueuedPermits != 1 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		wantMetrics(t, ms.collect(t), map[string]int64{"coordination.rate_limit.queued": 1})
		cancel()
		if err := <-done; !isErr(err, context.Canceled) {
			t.Fatalf("Wait: %v, want canceled", err)
		}
		if _, err := g.Wait(wctx, 0); !isErr(err, context.Canceled) { // Wait(ctx, 0) of an ended context: canceled too
			t.Fatalf("Wait(0): %v, want canceled", err)
		}
		after := ms.collect(t)
		wantMetrics(t, after, map[string]int64{
			"coordination.rate_limit.queued":                   0,
			"coordination.rate_limit.canceled":                 2,
			"coordination.rate_limit.blocked{reason=capacity}": before["coordination.rate_limit.blocked{reason=capacity}"],
			"coordination.rate_limit.allowed":                  before["coordination.rate_limit.allowed"],
		})

		// Active leases: 2 held, 1 after a release, 0 after Close (the
		// other is no longer renewed: lost).
		cl := build(t, c, kConc, "obs:conc", 3, 10*time.Second)
		l1, l2 := acquire(t, cl, 1), acquire(t, cl, 1)
		wantMetrics(t, ms.collect(t), map[string]int64{"coordination.rate_limit.concurrency.active": 2})
		_ = l1.Release(ctx)
		wantMetrics(t, ms.collect(t), map[string]int64{"coordination.rate_limit.concurrency.active": 1})
		_ = cl.Close()
		<-l2.Context().Done()
		wantMetrics(t, ms.collect(t), map[string]int64{"coordination.rate_limit.concurrency.active": 0})
	})
}
