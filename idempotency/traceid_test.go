package idempotency_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/coordkit/coordination/idempotency"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// A problem body carries the trace id of the request's span context when
// it is valid, and no traceId member otherwise.
func TestProblemTraceID(t *testing.T) {
	store, err := idempotency.New(testharness.Get(t, "miniredis").Coordinator(t))
	if err != nil {
		t.Fatal(err)
	}
	mw, err := idempotency.NewMiddleware(store, idempotency.WithKeyRequired(true))
	if err != nil {
		t.Fatal(err)
	}
	h := mw(http.NotFoundHandler())
	for name, tc := range testharness.TraceCases() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequestWithContext(tc.Ctx, "POST", "/pay", strings.NewReader("{}")))
		var p map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || w.Code != http.StatusBadRequest || p["type"] != idempotency.ProblemKeyMissing {
			t.Fatalf("%s: %d %s (%v), want the missing-key problem", name, w.Code, w.Body, err)
		}
		if !tc.TraceIDIs(p) {
			t.Errorf("%s: body %s, want traceId %q", name, w.Body, tc.Want)
		}
	}
}
