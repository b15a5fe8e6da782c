package ratelimit

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// Every problem body carries the trace id of the request's span context
// when it is valid, and no traceId member otherwise.
func TestProblemTraceID(t *testing.T) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:  trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
	}) // not sampled: still the request's trace
	for name, tc := range map[string]struct {
		ctx  context.Context
		want string
	}{
		"span":    {trace.ContextWithSpanContext(context.Background(), sc), "4bf92f3577b34da6a3ce929d0e0e4736"},
		"no span": {context.Background(), ""},
		"invalid": {trace.ContextWithSpanContext(context.Background(), trace.SpanContext{}), ""},
	} {
		for _, status := range []int{http.StatusTooManyRequests, http.StatusForbidden, http.StatusInternalServerError, http.StatusServiceUnavailable} {
			w := httptest.NewRecorder()
			writeProblem(w, httptest.NewRequestWithContext(tc.ctx, "GET", "/work", nil), status, time.Second, true, "api", "")
			var p map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || w.Code != status {
				t.Fatalf("%s %d: %d %s (%v)", name, status, w.Code, w.Body, err)
			}
			got, has := p["traceId"]
			if tc.want == "" && has || tc.want != "" && got != tc.want {
				t.Errorf("%s %d: traceId %v (present %v), want %q", name, status, got, has, tc.want)
			}
		}
	}
}
