package ratelimit_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/coordkit/coordination/ratelimit"
)

// An allow list exempts identities from a limit (partners, internal
// clients): through the middleware, each partition's limiter is bound to
// the list with the partition as the identity. An allowed client is never
// refused and consumes nothing; others get one request a minute.
func ExampleAllowList() {
	coord, done := exampleCoordinator()
	defer done()
	ctx := context.Background()

	exempt, err := ratelimit.NewAllowList(coord, "limits:exempt")
	if err != nil {
		log.Fatal(err)
	}
	if err := exempt.Allow(ctx, "192.0.2.10"); err != nil {
		log.Fatal(err)
	}
	perClient, err := ratelimit.NewPartitioned(func(client string) (*ratelimit.Limiter, error) {
		return ratelimit.New(coord, ratelimit.PartitionKey("limits:client", client), ratelimit.FixedWindow{Limit: 1, Window: time.Minute},
			ratelimit.WithAllowList(exempt, client))
	})
	if err != nil {
		log.Fatal(err)
	}
	defer perClient.Close()
	mw, err := ratelimit.NewMiddleware([]ratelimit.Policy{{Name: "client", Partitioned: perClient, Partition: ratelimit.ClientIP}})
	if err != nil {
		log.Fatal(err)
	}

	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") }))
	for _, addr := range []string{"192.0.2.10:1000", "192.0.2.10:1000", "198.51.100.7:2000", "198.51.100.7:2000"} {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/api", nil)
		r.RemoteAddr = addr
		h.ServeHTTP(w, r)
		fmt.Println(addr, w.Code)
	}
	// Output:
	// 192.0.2.10:1000 200
	// 192.0.2.10:1000 200
	// 198.51.100.7:2000 200
	// 198.51.100.7:2000 429
}
