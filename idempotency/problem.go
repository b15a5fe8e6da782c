package idempotency

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/coordkit/coordination/internal/instrument"
)

// Problem types: the "type" member of the RFC 9457 problem details the
// middleware ([NewMiddleware]) answers with. Each is the URL of its own
// documentation.
const (
	// ProblemKeyMissing (400 Bad Request): the route requires an
	// Idempotency-Key and the request has none ([WithKeyRequired]).
	ProblemKeyMissing = "https://pkg.go.dev/github.com/coordkit/coordination/idempotency#ProblemKeyMissing"
	// ProblemKeyInvalid (400 Bad Request): the Idempotency-Key field is
	// repeated, empty, not printable ASCII, a malformed quoted string, or
	// longer than the bound ([WithMaxKeyLength]). The detail says which.
	ProblemKeyInvalid = "https://pkg.go.dev/github.com/coordkit/coordination/idempotency#ProblemKeyInvalid"
	// ProblemKeyReused (422 Unprocessable Content): the key was used before
	// for a different request (another fingerprint). Use a new key.
	ProblemKeyReused = "https://pkg.go.dev/github.com/coordkit/coordination/idempotency#ProblemKeyReused"
	// ProblemInProgress (409 Conflict, with Retry-After): the first request
	// with this key is still being processed. Retry the same request later.
	ProblemInProgress = "https://pkg.go.dev/github.com/coordkit/coordination/idempotency#ProblemInProgress"
	// ProblemOutcomeUnknown (409 Conflict, with Retry-After): the first
	// request with this key failed while being processed (its handler
	// panicked) and may or may not have had its effects, so it is not run
	// again until the record expires ([WithClaimTTL] after the failure at
	// most; Retry-After says when) or an operator deletes it
	// ([Store.Forget] of [StoreKey]) after checking the outcome.
	ProblemOutcomeUnknown = "https://pkg.go.dev/github.com/coordkit/coordination/idempotency#ProblemOutcomeUnknown"
	// ProblemRequestTooLarge (413 Content Too Large): the body is larger
	// than the middleware reads to fingerprint it ([WithMaxRequestBytes]).
	ProblemRequestTooLarge = "https://pkg.go.dev/github.com/coordkit/coordination/idempotency#ProblemRequestTooLarge"
	// ProblemUnavailable (503 Service Unavailable, with Retry-After): the
	// key could not be checked (Redis unreachable, or a record this package
	// cannot read); the request was not processed.
	ProblemUnavailable = "https://pkg.go.dev/github.com/coordkit/coordination/idempotency#ProblemUnavailable"
)

// problem is an RFC 9457 problem details object; traceId is an extension
// member.
type problem struct {
	Type    string `json:"type"`
	Title   string `json:"title"`
	Status  int    `json:"status"`
	Detail  string `json:"detail,omitempty"`
	TraceID string `json:"traceId,omitempty"`
}

// writeProblem answers r with p as application/problem+json, with the
// trace id of r's span context when it is valid; a positive retryAfter
// adds Retry-After in whole seconds, rounded up.
func writeProblem(w http.ResponseWriter, r *http.Request, p problem, retryAfter time.Duration) {
	p.TraceID = instrument.TraceID(r.Context())
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(int64((retryAfter+time.Second-1)/time.Second), 10))
	}
	body, _ := json.Marshal(p) // cannot fail: strings and an int
	body = append(body, '\n')
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(p.Status)
	_, _ = w.Write(body)
}
