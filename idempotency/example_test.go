package idempotency_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/idempotency"
)

// Run a charge once per order, and replay its receipt to every retry.
func Example() {
	mr, err := miniredis.Run() // a real deployment uses its Redis address
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	coord, err := coordination.New(rdb, coordination.WithKeyPrefix("billing:"))
	if err != nil {
		panic(err)
	}
	store, err := idempotency.New(coord)
	if err != nil {
		panic(err)
	}

	charge := func(ctx context.Context) ([]byte, error) {
		fmt.Println("charging the card")
		return []byte("receipt-7"), nil
	}
	for attempt := 1; attempt <= 2; attempt++ {
		receipt, replayed, err := store.Do(context.Background(), "charge:order-42", 10*time.Minute, "amount=100&currency=EUR", charge)
		fmt.Printf("attempt %d: %s (replayed: %v, err: %v)\n", attempt, receipt, replayed, err)
	}
	// Output:
	// charging the card
	// attempt 1: receipt-7 (replayed: false, err: <nil>)
	// attempt 2: receipt-7 (replayed: true, err: <nil>)
}

// Begin, Complete and Abandon give full control over a claim.
func ExampleStore_Begin() {
	store, stop := exampleStore()
	defer stop()
	ctx := context.Background()

	claim, err := store.Begin(ctx, "invoice:req-123", time.Minute, idempotency.WithFingerprint("digest-A"))
	if err != nil {
		panic(err)
	}
	fmt.Println("first:", claim.State)
	retry, _ := store.Begin(ctx, "invoice:req-123", time.Minute, idempotency.WithFingerprint("digest-A"))
	fmt.Println("retry while running:", retry.State)

	ok, _ := store.Complete(ctx, "invoice:req-123", claim.Owner, []byte("invoice-456"))
	fmt.Println("completed:", ok)

	retry, _ = store.Begin(ctx, "invoice:req-123", time.Minute, idempotency.WithFingerprint("digest-A"))
	fmt.Printf("retry afterwards: %s %q\n", retry.State, retry.Result)
	other, _ := store.Begin(ctx, "invoice:req-123", time.Minute, idempotency.WithFingerprint("digest-B"))
	fmt.Println("another request with the same key:", other.State)
	// Output:
	// first: started
	// retry while running: in progress
	// completed: true
	// retry afterwards: completed "invoice-456"
	// another request with the same key: fingerprint mismatch
}

// The middleware runs a POST handler once per Idempotency-Key and replays
// its response.
func ExampleMiddleware() {
	store, stop := exampleStore()
	defer stop()
	mw, err := idempotency.NewMiddleware(store,
		idempotency.WithKeyRequired(true),
		idempotency.WithNamespace(func(r *http.Request) string { return r.Header.Get("X-Account") }))
	if err != nil {
		panic(err)
	}
	created := 0
	h := mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		created++
		w.Header().Set("Location", fmt.Sprintf("/payments/%d", created))
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "payment %d\n", created)
	}))

	send := func(key, body string) {
		req := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(body))
		req.Header.Set("X-Account", "acct-1")
		if key != "" {
			req.Header.Set(idempotency.HeaderKey, key)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		b, _ := io.ReadAll(rec.Body)
		fmt.Printf("%d %s replayed=%q %s", rec.Code, rec.Header().Get("Location"),
			rec.Header().Get(idempotency.HeaderReplayed), strings.SplitN(string(b), ",", 2)[0])
		if rec.Code >= 400 {
			fmt.Println()
		}
	}
	send(`"key-1"`, `{"amount":100}`)
	send(`"key-1"`, `{"amount":100}`)
	send(`"key-1"`, `{"amount":999}`)
	send("", `{"amount":100}`)
	// Output:
	// 201 /payments/1 replayed="" payment 1
	// 201 /payments/1 replayed="true" payment 1
	// 422  replayed="" {"type":"https://pkg.go.dev/github.com/coordkit/coordination/idempotency#ProblemKeyReused"
	// 400  replayed="" {"type":"https://pkg.go.dev/github.com/coordkit/coordination/idempotency#ProblemKeyMissing"
}

// exampleStore returns a store on an in-process miniredis, as [Example]
// builds it, and a function that stops both.
func exampleStore() (*idempotency.Store, func()) {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	coord, err := coordination.New(rdb)
	if err != nil {
		panic(err)
	}
	store, err := idempotency.New(coord)
	if err != nil {
		panic(err)
	}
	return store, func() {
		_ = rdb.Close()
		mr.Close()
	}
}
