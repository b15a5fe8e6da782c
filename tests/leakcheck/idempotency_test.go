package leakcheck_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/idempotency"
)

func TestMiddlewareStoreDown(t *testing.T) {
	// A server that refuses connections: nothing is run, 503 is answered.
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	coord, err := coordination.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	store, _ := idempotency.New(coord)
	mw, err := idempotency.NewMiddleware(store)
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { runs.Add(1) }))
	before := goleak.IgnoreCurrent()
	req := httptest.NewRequest("POST", "/p", strings.NewReader("{}"))
	req.Header.Set(idempotency.HeaderKey, "k")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	wantProblem(t, reply{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}, http.StatusServiceUnavailable, idempotency.ProblemUnavailable)
	if rec.Header().Get("Retry-After") != "1" || runs.Load() != 0 {
		t.Fatalf("Retry-After %q, runs %d", rec.Header().Get("Retry-After"), runs.Load())
	}
	// Nothing was sent, so no background cleanup may be left running.
	goleak.VerifyNone(t, before)
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

type problemBody struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
}

// wantProblem checks an RFC 9457 problem details answer.
func wantProblem(t *testing.T, r reply, status int, typ string) problemBody {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d, want %d (body %s)", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type = %q, want application/problem+json", ct)
	}
	if cc := r.header.Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("Cache-Control = %q, want no-store", cc)
	}
	var p problemBody
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("problem body %q: %v", r.body, err)
	}
	if p.Type != typ || p.Status != status || p.Title == "" || p.Detail == "" {
		t.Fatalf("problem = %+v, want type %s and status %d with a title and detail", p, typ, status)
	}
	return p
}
