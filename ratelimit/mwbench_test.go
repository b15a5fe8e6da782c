package ratelimit

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// BenchmarkMiddlewareBatched measures the middleware's own per-request
// cost: one Partitioned GCRA policy on one hot client key, WithBatch so
// that almost every request is served from the block without Redis,
// beside the bare handler, with the default private answers and with both
// RateLimit fields asked for. allocs/op is deterministic; ns/op is what
// the middleware adds to a request on this machine.
//
//	go test -run '^$' -bench MiddlewareBatched -benchmem ./ratelimit/
func BenchmarkMiddlewareBatched(b *testing.B) {
	be := testharness.Get(b, "miniredis")
	coord, err := coordination.New(be.Client(b), coordination.WithKeyPrefix(be.Prefix()))
	if err != nil {
		b.Fatal(err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	part, err := NewPartitioned(func(client string) (*Limiter, error) {
		return New(coord, PartitionKey("mwbench", client), GCRA{Burst: 1 << 30, Rate: 1 << 30, Period: time.Second},
			WithBatch(100000, time.Second))
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = part.Close() })
	m, err := NewMiddleware([]Policy{{
		Name: "client", Partitioned: part,
		Partition: func(*http.Request) string { return "the-one-hot-client" },
	}})
	if err != nil {
		b.Fatal(err)
	}
	fields, err := NewMiddleware([]Policy{{
		Name: "client", Partitioned: part, RateLimitHeader: true, PublishQuota: true,
		Partition: func(*http.Request) string { return "the-one-hot-client" },
	}})
	if err != nil {
		b.Fatal(err)
	}
	for _, row := range []struct {
		name string
		h    http.Handler
	}{{"bare", ok}, {"batched", m(ok)}, {"batched+fields", fields(ok)}} {
		b.Run(row.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				row.h.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("status %d", w.Code)
				}
			}
		})
	}
}
