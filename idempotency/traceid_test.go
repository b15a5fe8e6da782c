package idempotency_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/idempotency"
)

// A problem body carries the trace id of the request's span context when
// it is valid, and no traceId member otherwise.
func TestProblemTraceID(t *testing.T) {
	srv := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()
	coord, err := coordination.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	store, err := idempotency.New(coord)
	if err != nil {
		t.Fatal(err)
	}
	mw, err := idempotency.NewMiddleware(store, idempotency.WithKeyRequired(true))
	if err != nil {
		t.Fatal(err)
	}
	h := mw(http.NotFoundHandler())
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
	})
	for name, tc := range map[string]struct {
		ctx  context.Context
		want string
	}{
		"span":    {trace.ContextWithSpanContext(context.Background(), sc), "4bf92f3577b34da6a3ce929d0e0e4736"},
		"no span": {context.Background(), ""},
		"invalid": {trace.ContextWithSpanContext(context.Background(), trace.SpanContext{}), ""},
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequestWithContext(tc.ctx, "POST", "/pay", strings.NewReader("{}")))
		var p map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || w.Code != http.StatusBadRequest || p["type"] != idempotency.ProblemKeyMissing {
			t.Fatalf("%s: %d %s (%v), want the missing-key problem", name, w.Code, w.Body, err)
		}
		got, has := p["traceId"]
		if tc.want == "" && has || tc.want != "" && got != tc.want {
			t.Errorf("%s: traceId %v (present %v), want %q", name, got, has, tc.want)
		}
	}
}
