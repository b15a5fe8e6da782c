package coordination_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/lock"
	"github.com/coordkit/coordination/ratelimit"
)

// snippetObservabilityOptions is docs/observability.md's wiring with
// options: exporter and reader are OTLP ones in production, an in-memory
// exporter and a manual reader in ExampleWithTracerProvider.
func snippetObservabilityOptions(rdb redis.UniversalClient, exporter sdktrace.SpanExporter, reader sdkmetric.Reader) (*coordination.Coordinator, func(context.Context) error, error) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	coord, err := coordination.New(rdb,
		coordination.WithTracerProvider(tp),
		coordination.WithMeterProvider(mp),
	)
	if err != nil {
		return nil, nil, err
	}
	shutdown := func(ctx context.Context) error {
		// At the end of main: flushes the spans and metrics still buffered.
		return errors.Join(coord.Shutdown(ctx), tp.Shutdown(ctx), mp.Shutdown(ctx))
	}
	return coord, shutdown, nil
}

// snippetObservabilityGlobals is docs/observability.md's wiring through
// the global providers.
func snippetObservabilityGlobals(rdb redis.UniversalClient, tp *sdktrace.TracerProvider, mp *sdkmetric.MeterProvider) (*coordination.Coordinator, error) {
	otel.SetTracerProvider(tp)
	otel.SetMeterProvider(mp)
	coord, err := coordination.New(rdb) // no option: the global providers
	if err != nil {
		return nil, err
	}
	return coord, nil
}

// keptSpans is tracetest's in-memory exporter but for Shutdown, which
// would forget the spans: the provider's Shutdown flushes them into it.
type keptSpans struct{ *tracetest.InMemoryExporter }

func (keptSpans) Shutdown(context.Context) error { return nil }

// commandSpans starts a span per Redis command, named as the command, a
// child of the span of the command's context: what a go-redis
// instrumentation (redisotel) does.
func commandSpans(tracer trace.Tracer) commandHook {
	return func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		ctx, span := tracer.Start(ctx, cmd.Name(), trace.WithSpanKind(trace.SpanKindClient))
		defer span.End()
		return next(ctx, cmd)
	}
}

// Spans and instruments read back through the SDKs: one rate-limit
// decision called directly, then two HTTP requests through the rate-limit
// middleware, each under a span a server instrumentation (otelhttp) would
// start; the refused one's problem body names its trace.
func ExampleWithTracerProvider() {
	srv, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	exporter := keptSpans{tracetest.NewInMemoryExporter()}
	// The application's own tracer: HTTP server and Redis command spans.
	app := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()
	if err := rdb.Ping(context.Background()).Err(); err != nil { // dialled before: no HELLO in the tree
		log.Fatal(err)
	}
	rdb.AddHook(commandSpans(app.Tracer("redis")))

	reader := sdkmetric.NewManualReader()
	coord, shutdown, err := snippetObservabilityOptions(rdb, exporter, reader)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	lim, err := ratelimit.New(coord, "limits:api", ratelimit.FixedWindow{Limit: 2, Window: 60e9})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := lim.Allow(ctx, 1); err != nil {
		log.Fatal(err)
	}
	mw, err := ratelimit.NewMiddleware([]ratelimit.Policy{{Name: "api", Limiter: lim}})
	if err != nil {
		log.Fatal(err)
	}
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	for range 2 {
		rctx, span := app.Tracer("http").Start(ctx, "GET /work", trace.WithSpanKind(trace.SpanKindServer))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequestWithContext(rctx, "GET", "/work", nil))
		span.End()
		if w.Code != http.StatusTooManyRequests {
			fmt.Println(w.Code)
			continue
		}
		var p struct {
			TraceID string `json:"traceId"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%d, problem traceId is the request's trace id: %v\n", w.Code, p.TraceID == span.SpanContext().TraceID().String())
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		log.Fatal(err)
	}
	if err := shutdown(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Print(spanTree(exporter.GetSpans()))
	for _, line := range metricLines(rm) {
		fmt.Println(line)
	}
	// Output:
	// 204
	// 429, problem traceId is the request's trace id: true
	// RATE LIMIT ACQUIRE (internal) coordination.operation=RATE LIMIT ACQUIRE coordination.outcome=succeeded coordination.primitive=rate_limit
	//   evalsha (client)
	//   eval (client)
	// GET /work (server)
	//   RATE LIMIT ACQUIRE (internal) coordination.operation=RATE LIMIT ACQUIRE coordination.outcome=succeeded coordination.primitive=rate_limit
	//     evalsha (client)
	// GET /work (server)
	//   RATE LIMIT ACQUIRE (internal) coordination.operation=RATE LIMIT ACQUIRE coordination.outcome=succeeded coordination.primitive=rate_limit
	//     evalsha (client)
	// coordination.operation.duration operation=RATE LIMIT ACQUIRE outcome=succeeded: 3
	// coordination.rate_limit.allowed: 2
	// coordination.rate_limit.blocked reason=capacity: 1
	// coordination.rate_limit.near_limit: 1
	// coordination.rate_limit.policy.near_limit policy=api: 1
	// coordination.rate_limit.policy.refused mode=enforce policy=api reason=capacity: 1
}

// The global providers, set before the coordinator is made (an
// application's main), serve it as they serve every instrumented library.
func ExampleNew_globalProviders() {
	srv, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()
	exporter := tracetest.NewInMemoryExporter()
	reader := sdkmetric.NewManualReader()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	coord, err := snippetObservabilityGlobals(rdb, tp, mp)
	if err != nil {
		log.Fatal(err)
	}
	mu, err := lock.New(coord, "nightly-report")
	if err != nil {
		log.Fatal(err)
	}
	l, err := mu.TryAcquire(context.Background(), 60e9)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := l.Release(context.Background()); err != nil {
		log.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		log.Fatal(err)
	}
	fmt.Print(spanTree(exporter.GetSpans()))
	for _, line := range metricLines(rm) {
		if strings.HasPrefix(line, "coordination.operation.duration") {
			fmt.Println(line)
		}
	}
	// Output:
	// LOCK ACQUIRE (internal) coordination.operation=LOCK ACQUIRE coordination.outcome=succeeded coordination.primitive=lock
	// LOCK RELEASE (internal) coordination.operation=LOCK RELEASE coordination.outcome=succeeded coordination.primitive=lock
	// coordination.operation.duration operation=LOCK ACQUIRE outcome=succeeded: 1
	// coordination.operation.duration operation=LOCK RELEASE outcome=succeeded: 1
}

// spanTree prints spans as a tree: each under its parent, in the order
// they started, with kind and attributes (sorted; the wait time left out,
// it varies).
func spanTree(spans tracetest.SpanStubs) string {
	slices.SortStableFunc(spans, func(a, b tracetest.SpanStub) int { return a.StartTime.Compare(b.StartTime) })
	ids := map[trace.SpanID]bool{}
	for _, s := range spans {
		ids[s.SpanContext.SpanID()] = true
	}
	var b strings.Builder
	var walk func(parent trace.SpanID, depth int)
	walk = func(parent trace.SpanID, depth int) {
		for _, s := range spans {
			p := s.Parent.SpanID()
			if !ids[p] {
				p = trace.SpanID{}
			}
			if p != parent {
				continue
			}
			var attrs []string
			for _, kv := range s.Attributes {
				if kv.Key != "coordination.wait_time" {
					attrs = append(attrs, string(kv.Key)+"="+kv.Value.Emit())
				}
			}
			slices.Sort(attrs)
			line := strings.Repeat("  ", depth) + s.Name + " (" + s.SpanKind.String() + ")"
			if len(attrs) > 0 {
				line += " " + strings.Join(attrs, " ")
			}
			if s.Status.Description != "" {
				line += " status=" + s.Status.Code.String() + ":" + s.Status.Description
			}
			b.WriteString(line + "\n")
			walk(s.SpanContext.SpanID(), depth+1)
		}
	}
	walk(trace.SpanID{}, 0)
	return b.String()
}

// metricLines prints the library's instruments read back: a histogram's
// count, a sum's value, per attribute set, sorted.
func metricLines(rm metricdata.ResourceMetrics) []string {
	var out []string
	line := func(name string, set attribute.Set, v int64) {
		var attrs []string
		for _, kv := range set.ToSlice() {
			attrs = append(attrs, string(kv.Key)+"="+kv.Value.Emit())
		}
		s := name
		if len(attrs) > 0 {
			s += " " + strings.Join(attrs, " ")
		}
		out = append(out, fmt.Sprintf("%s: %d", s, v))
	}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != "github.com/coordkit/coordination" {
			continue
		}
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					line(m.Name, dp.Attributes, int64(dp.Count))
				}
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					line(m.Name, dp.Attributes, dp.Value)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}
