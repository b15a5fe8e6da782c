package testharness

import (
	"context"

	"go.opentelemetry.io/otel/trace"
)

// TraceCase is a request context for a problem body's traceId check and
// the traceId it must give ("": no traceId member).
type TraceCase struct {
	Ctx  context.Context
	Want string
}

// TraceCases returns, by name, a context with a valid span context (not
// sampled: still the request's trace), one without, and one with an
// invalid span context.
func TraceCases() map[string]TraceCase {
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:  trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
	})
	return map[string]TraceCase{
		"span":    {trace.ContextWithSpanContext(context.Background(), sc), "4bf92f3577b34da6a3ce929d0e0e4736"},
		"no span": {context.Background(), ""},
		"invalid": {trace.ContextWithSpanContext(context.Background(), trace.SpanContext{}), ""},
	}
}

// TraceIDIs reports whether a decoded problem body p carries tc's traceId
// (and none when tc wants none).
func (tc TraceCase) TraceIDIs(p map[string]any) bool {
	got, has := p["traceId"]
	if tc.Want == "" {
		return !has
	}
	return got == tc.Want
}
