package coordination_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/lock"
)

// commandHook is a go-redis hook that runs every command through itself:
// h(ctx, cmd, next) must call next.
type commandHook func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error

func (h commandHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h commandHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h commandHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { return h(ctx, cmd, next) }
}

// spanContexts records the span context of the context every command is
// processed with: what a go-redis instrumentation would start its span
// under.
type spanContexts struct {
	mu  sync.Mutex
	got []trace.SpanContext
}

func (s *spanContexts) hook(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
	s.mu.Lock()
	s.got = append(s.got, trace.SpanContextFromContext(ctx))
	s.mu.Unlock()
	return next(ctx, cmd)
}

func (s *spanContexts) take() []trace.SpanContext {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.got
	s.got = nil
	return g
}

func tracedClient(t *testing.T) (*miniredis.Miniredis, *redis.Client, *spanContexts) {
	t.Helper()
	srv := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	s := &spanContexts{}
	rdb.AddHook(commandHook(s.hook))
	return srv, rdb, s
}

func attrMap(kvs []attribute.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.Emit()
	}
	return m
}

// assertNoSecrets fails when any of secrets appears anywhere in a span:
// its name, attributes, events, links or status.
func assertNoSecrets(t *testing.T, spans tracetest.SpanStubs, secrets ...string) {
	t.Helper()
	for _, s := range spans {
		var texts []string
		texts = append(texts, s.Name, s.Status.Description)
		for _, kv := range s.Attributes {
			texts = append(texts, string(kv.Key), kv.Value.Emit())
		}
		for _, ev := range s.Events {
			texts = append(texts, ev.Name)
			for _, kv := range ev.Attributes {
				texts = append(texts, string(kv.Key), kv.Value.Emit())
			}
		}
		for _, l := range s.Links {
			for _, kv := range l.Attributes {
				texts = append(texts, string(kv.Key), kv.Value.Emit())
			}
		}
		for _, txt := range texts {
			for _, secret := range secrets {
				if secret != "" && strings.Contains(txt, secret) {
					t.Errorf("span %q records %q: %q", s.Name, secret, txt)
				}
			}
		}
	}
}

// Every admitted operation is one span, a child of the caller's, named
// after the operation, with operation, primitive, outcome and (when it
// blocked) wait time; a failure's status is its class; the commands run
// under the operation's span; no key, prefix or token is recorded.
func TestOperationSpans(t *testing.T) {
	srv, rdb, cmds := tracedClient(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	coord, err := coordination.New(rdb, coordination.WithTracerProvider(tp), coordination.WithKeyPrefix("tenant-7:"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, parent := tp.Tracer("test").Start(context.Background(), "request")

	mu, err := lock.New(coord, "secret-key")
	if err != nil {
		t.Fatal(err)
	}
	l, err := mu.TryAcquire(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range cmds.take() {
		if sc.TraceID() != parent.SpanContext().TraceID() || sc.SpanID() == parent.SpanContext().SpanID() {
			t.Errorf("a command ran under span %v, want the operation's span (trace %v, not the caller's span)", sc, parent.SpanContext().TraceID())
		}
	}
	if _, err := mu.TryAcquire(ctx, time.Minute); !errors.Is(err, coordination.ErrNotAcquired) {
		t.Fatalf("second TryAcquire: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = mu.Acquire(wctx, time.Minute)
	cancel()
	if err == nil {
		t.Fatal("a blocking Acquire of a held lock succeeded")
	}
	if _, err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	srv.HSet("tenant-7:secret-hash", "f", "v")
	bad, err := lock.New(coord, "secret-hash")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.TryAcquire(ctx, time.Minute); err == nil || !strings.Contains(err.Error(), "secret-hash") {
		t.Fatalf("TryAcquire of a hash: %v, want an error naming the key", err)
	}
	parent.End()

	spans := exp.GetSpans()
	type want struct {
		name, outcome string
		status        codes.Code
		desc          string
		waited        bool
	}
	wants := []want{
		{"LOCK ACQUIRE", "succeeded", codes.Unset, "", false},
		{"LOCK ACQUIRE", "succeeded", codes.Unset, "", false}, // ErrNotAcquired is an answer
		{"LOCK ACQUIRE", "canceled", codes.Unset, "", true},
		{"LOCK RELEASE", "succeeded", codes.Unset, "", false},
		{"LOCK ACQUIRE", "failed", codes.Error, "terminal", false},
	}
	if len(spans) != len(wants)+1 {
		t.Fatalf("%d spans, want %d operations and the request", len(spans), len(wants))
	}
	for i, w := range wants {
		s := spans[i]
		if s.Name != w.name || s.Parent.SpanID() != parent.SpanContext().SpanID() || s.SpanKind != trace.SpanKindInternal {
			t.Errorf("span %d: %q (kind %v) under %v, want %q under the request %v", i, s.Name, s.SpanKind, s.Parent.SpanID(), w.name, parent.SpanContext().SpanID())
		}
		if s.InstrumentationScope.Name != "github.com/coordkit/coordination" {
			t.Errorf("span %d: scope %q", i, s.InstrumentationScope.Name)
		}
		a := attrMap(s.Attributes)
		_, waited := a["coordination.wait_time"]
		delete(a, "coordination.wait_time")
		var wait float64
		for _, kv := range s.Attributes {
			if kv.Key == "coordination.wait_time" {
				wait = kv.Value.AsFloat64()
			}
		}
		wantAttrs := map[string]string{"coordination.operation": w.name, "coordination.primitive": "lock", "coordination.outcome": w.outcome}
		if len(a) != len(wantAttrs) {
			t.Errorf("span %d: attributes %v, want %v", i, a, wantAttrs)
		}
		for k, v := range wantAttrs {
			if a[k] != v {
				t.Errorf("span %d: %s = %q, want %q", i, k, a[k], v)
			}
		}
		if waited != w.waited {
			t.Errorf("span %d: wait time %v, want one: %v", i, wait, w.waited)
		}
		if w.waited && (wait < 0.04 || wait > 5) {
			t.Errorf("span %d: waited %v s, want about 0.05 (the context's timeout)", i, wait)
		}
		if s.Status.Code != w.status || s.Status.Description != w.desc || len(s.Events) != 0 {
			t.Errorf("span %d: status %v %q, events %v; want %v %q, none", i, s.Status.Code, s.Status.Description, s.Events, w.status, w.desc)
		}
	}
	assertNoSecrets(t, spans, "secret", "tenant-7", l.Token(), srv.Addr())
}

// With a no-op provider no span is started: the commands run under the
// caller's span.
func TestNoopTracerProviderStartsNoSpan(t *testing.T) {
	_, rdb, cmds := tracedClient(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	coord, err := coordination.New(rdb, coordination.WithTracerProvider(noop.NewTracerProvider()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, parent := tp.Tracer("test").Start(context.Background(), "request")
	mu, _ := lock.New(coord, "k")
	if _, err := mu.TryAcquire(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	parent.End()
	for _, sc := range cmds.take() {
		if !sc.Equal(parent.SpanContext()) {
			t.Errorf("a command ran under %v, want the caller's span %v", sc, parent.SpanContext())
		}
	}
	if n := len(exp.GetSpans()); n != 1 {
		t.Errorf("%d spans, want the request's alone", n)
	}
	if _, err := coordination.New(rdb, coordination.WithTracerProvider(nil)); !errors.Is(err, coordination.ErrInvalidArgument) || !strings.Contains(err.Error(), "tracerProvider") {
		t.Errorf("WithTracerProvider(nil): %v", err)
	}
}

// By default a coordinator follows the global provider: nothing while it
// is OpenTelemetry's initial no-op (the commands run under the caller's
// span), spans once an SDK is installed, for a coordinator made before.
// It sets the global provider for the rest of the test binary; no other
// test of the package reads it.
func TestDefaultFollowsTheGlobalTracerProvider(t *testing.T) {
	_, rdb, cmds := tracedClient(t)
	coord, err := coordination.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	mu, _ := lock.New(coord, "k")
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	if _, set := otel.GetTracerProvider().(noop.TracerProvider); set {
		t.Skip("the global provider was set by an earlier run (-count)")
	}
	// The later tests of this binary must not record into exp.
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })
	ctx, parent := tp.Tracer("test").Start(context.Background(), "request")
	if _, err := mu.TryAcquire(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, sc := range cmds.take() {
		if !sc.Equal(parent.SpanContext()) {
			t.Errorf("before an SDK: a command ran under %v, want the caller's span %v", sc, parent.SpanContext())
		}
	}
	if n := len(exp.GetSpans()); n != 0 {
		t.Errorf("before an SDK: %d spans", n)
	}
	otel.SetTracerProvider(tp)
	if _, err := mu.TryAcquire(ctx, time.Minute); !errors.Is(err, coordination.ErrNotAcquired) {
		t.Fatal(err)
	}
	parent.End()
	if s := exp.GetSpans(); len(s) != 2 || s[0].Name != "LOCK ACQUIRE" {
		t.Errorf("after otel.SetTracerProvider: spans %v, want LOCK ACQUIRE and the request", s)
	}
}
