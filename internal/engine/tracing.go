package engine

import (
	"context"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/instrument"
)

// The attributes of an operation's span (docs/observability.md lists
// them). None names a key, an owner token, an identity or an endpoint.
const (
	// attrOperation is the operation's name, as the hooks see it ("LOCK
	// ACQUIRE"); the span's name too.
	attrOperation = "coordination.operation"
	// attrPrimitive is the primitive kind ("lock", "rate_limit").
	attrPrimitive = "coordination.primitive"
	// attrOutcome is the hooks' outcome: succeeded, canceled or failed.
	attrOutcome = "coordination.outcome"
	// attrWaitTime is the time in seconds (a double) the operation spent
	// in the wait loop ([Engine.Wait]), attempts included; only on an
	// operation that blocked.
	attrWaitTime = "coordination.wait_time"
)

// unsetGlobal is the global tracer provider OpenTelemetry starts with (a
// no-op forwarding to the SDK an application installs later with
// otel.SetTracerProvider), or nil when another was installed before this
// package initialised. While otel.GetTracerProvider() still returns it,
// no span work is done at all.
var unsetGlobal = func() trace.TracerProvider {
	tp := otel.GetTracerProvider()
	t := reflect.TypeOf(tp)
	if t.Kind() == reflect.Pointer && t.Elem().PkgPath() == "go.opentelemetry.io/otel/internal/global" && t.Elem().Name() == "tracerProvider" {
		return tp
	}
	return nil
}()

// tracing is an engine's tracer. The zero value traces nothing.
type tracing struct {
	tracer trace.Tracer // nil: a no-op provider, never traced
	// global: tracer is the global provider's, traced only once an
	// application installed a provider other than a no-op.
	global bool
	mu     sync.Mutex // serialises writers of attrs
	attrs  cowMap[spanKey, []attribute.KeyValue]
}

// spanKey is what the attributes of an ended span depend on, but for the
// wait time.
type spanKey struct {
	name, primitive string
	out             hooks.Outcome
}

// init sets the tracer of tp (nil: otel.GetTracerProvider()).
func (t *tracing) init(tp trace.TracerProvider) {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if noopTracer(tp) {
		return
	}
	t.tracer = tp.Tracer(instrument.Scope)
	t.global = unsetGlobal != nil && tp == unsetGlobal
}

// noopTracer reports whether tp is known to record nothing.
func noopTracer(tp trace.TracerProvider) bool {
	_, ok := tp.(noop.TracerProvider)
	return ok
}

// on reports whether an operation may be traced now: no span is started
// (no allocation, no ID generated) with a no-op provider or while the
// global provider is still OpenTelemetry's initial no-op.
func (t *tracing) on() bool {
	if t.tracer == nil {
		return false
	}
	if t.global {
		tp := otel.GetTracerProvider()
		return tp != unsetGlobal && !noopTracer(tp)
	}
	return true
}

// spanWait is the context of a recording operation: it carries the span
// (the context it wraps does) and accumulates the time the operation
// spends in [Engine.Wait]. One allocation, where context.WithValue and a
// counter would be two.
type spanWait struct {
	context.Context
	d atomic.Int64 // nanoseconds
}

type spanWaitKey struct{}

// Value returns w for spanWaitKey, and the wrapped context's value
// otherwise.
func (w *spanWait) Value(key any) any {
	if key == (spanWaitKey{}) {
		return w
	}
	return w.Context.Value(key)
}

// start starts the span of an operation, a child of ctx's span; the
// returned context carries it (so spans of the client's own
// instrumentation nest under it). Its attributes are set when it ends
// ([Op.endSpan]), and only when it records.
func (t *tracing) start(ctx context.Context, name string) (context.Context, trace.Span, *spanWait) {
	ctx, span := t.tracer.Start(ctx, name)
	if !span.IsRecording() {
		return ctx, span, nil
	}
	w := &spanWait{Context: ctx}
	return w, span, w
}

// attrsOf returns the operation, primitive and outcome attributes of k,
// built once: set in one call, they cost the span one slice.
func (t *tracing) attrsOf(k spanKey) []attribute.KeyValue {
	return t.attrs.load(&t.mu, k, func() []attribute.KeyValue {
		return []attribute.KeyValue{attribute.String(attrOperation, k.name), attribute.String(attrPrimitive, k.primitive),
			attribute.String(attrOutcome, k.out.String())}
	})
}

// waiting returns the function that adds the time since now to the wait
// time of ctx's recording operation, or nil when there is none.
func waiting(ctx context.Context) func() {
	w, _ := ctx.Value(spanWaitKey{}).(*spanWait)
	if w == nil {
		return nil
	}
	start := time.Now()
	return func() { w.d.Add(int64(time.Since(start))) }
}

// endSpan ends o's span with its attributes: operation, primitive, the
// outcome out of err, the wait time when the operation waited, and, when
// it failed, status Error described by the error's class alone
// ("transient", "terminal"): an error's message names the key, and is
// never recorded.
func (o Op) endSpan(out hooks.Outcome, err error) {
	if o.span.IsRecording() {
		o.span.SetAttributes(o.e.tracing.attrsOf(spanKey{o.name, o.primitive, out})...)
		if o.wait != nil {
			if d := time.Duration(o.wait.d.Load()); d > 0 {
				o.span.SetAttributes(attribute.Float64(attrWaitTime, d.Seconds()))
			}
		}
		if out == hooks.Failed {
			o.span.SetStatus(codes.Error, errorClassName(err))
		}
	}
	o.span.End()
}

// errorClassName names err's class for a span's status.
func errorClassName(err error) string {
	switch Classify(err) {
	case Transient:
		return "transient"
	case Canceled:
		return "canceled"
	case noError:
		return ""
	}
	return "terminal"
}
