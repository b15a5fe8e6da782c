package ratelimit

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// Every problem body, a policy's own problem type included, carries the
// trace id of the request's span context when it is valid, and no traceId
// member otherwise.
func TestProblemTraceID(t *testing.T) {
	for name, tc := range testharness.TraceCases() {
		for _, status := range []int{http.StatusTooManyRequests, http.StatusForbidden, http.StatusInternalServerError, http.StatusServiceUnavailable} {
			w := httptest.NewRecorder()
			pol := &policy{name: "api", Policy: Policy{Status: http.StatusTooManyRequests, ProblemType: "https://example.com/problems/quota"}}
			writeProblem(w, httptest.NewRequestWithContext(tc.Ctx, "GET", "/work", nil), status, 1, pol, "")
			var p map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || w.Code != status {
				t.Fatalf("%s %d: %d %s (%v)", name, status, w.Code, w.Body, err)
			}
			if !tc.TraceIDIs(p) {
				t.Errorf("%s %d: body %s, want traceId %q", name, status, w.Body, tc.Want)
			}
		}
	}
}
