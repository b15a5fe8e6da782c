package idempotency_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/idempotency"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// A response over the bound is passed through, not stored, counted in
// coordination.idempotency.responses_too_large each time, and logged once
// (then at most once a minute): before, nothing said why a retry ran the
// handler again. The line carries the bound and the status, never the key.
func TestMiddlewareLargeResponseIsCountedAndLogged(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		reader := sdkmetric.NewManualReader()
		buf := &syncBuffer{}
		logger := slog.New(slog.NewTextHandler(buf, nil))
		coord := b.Coordinator(t, coordination.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))),
			coordination.WithLogger(logger))
		store, err := idempotency.New(coord)
		if err != nil {
			t.Fatal(err)
		}
		mw, err := idempotency.NewMiddleware(store, idempotency.WithMaxResponseBytes(16))
		if err != nil {
			t.Fatal(err)
		}
		runs := 0
		h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			runs++
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write(bytes.Repeat([]byte("x"), 17))
		}))
		for i := range 3 {
			req := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader("{}"))
			req.Header.Set(idempotency.HeaderKey, "secret-key-1")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusCreated || rec.Body.Len() != 17 {
				t.Fatalf("request %d: %d with %d bytes, want 201 with 17", i, rec.Code, rec.Body.Len())
			}
		}
		if runs != 3 {
			t.Fatalf("the handler ran %d times, want 3 (nothing stored)", runs)
		}
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		var got int64 = -1
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if m.Name == "coordination.idempotency.responses_too_large" {
					for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
						got = p.Value
					}
				}
			}
		}
		if got != 3 {
			t.Fatalf("responses_too_large = %d, want 3", got)
		}
		lines := strings.Count(buf.String(), "response larger than the bound not stored")
		if lines != 1 || !strings.Contains(buf.String(), "max_response_bytes=16") || !strings.Contains(buf.String(), "status=201") {
			t.Fatalf("log (%d lines about it, want 1 with the bound and the status):\n%s", lines, buf.String())
		}
		if strings.Contains(buf.String(), "secret-key-1") {
			t.Fatalf("the log names the key:\n%s", buf.String())
		}
	})
}
