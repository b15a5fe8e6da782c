package idempotency_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
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
		fmt.Println(err)
		return
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	coord, err := coordination.New(rdb, coordination.WithKeyPrefix("billing:"))
	if err != nil {
		fmt.Println(err)
		return
	}
	store, err := idempotency.New(coord)
	if err != nil {
		fmt.Println(err)
		return
	}

	charge := func(ctx context.Context) ([]byte, error) {
		fmt.Println("charging the card")
		return []byte("receipt-7"), nil
	}
	for attempt := 1; attempt <= 2; attempt++ {
		receipt, replayed, err := store.Do(context.Background(), "charge:order-42", 10*time.Minute, "amount=100&currency=EUR", charge)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("attempt %d: %s (replayed: %v)\n", attempt, receipt, replayed)
	}
	// Output:
	// charging the card
	// attempt 1: receipt-7 (replayed: false)
	// attempt 2: receipt-7 (replayed: true)
}

// Begin, Complete and Abandon give full control over a claim.
func ExampleStore_Begin() {
	store, stop, err := exampleStore()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()
	ctx := context.Background()
	begin := func(fingerprint string) (idempotency.Claim, error) {
		return store.Begin(ctx, "invoice:req-123", time.Minute, idempotency.WithFingerprint(fingerprint))
	}

	claim, err := begin("digest-A")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("first:", claim.State)
	retry, err := begin("digest-A")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("retry while running:", retry.State)

	ok, err := store.Complete(ctx, "invoice:req-123", claim.Owner, []byte("invoice-456"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("completed:", ok)

	if retry, err = begin("digest-A"); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("retry afterwards: %s %q\n", retry.State, retry.Result)
	other, err := begin("digest-B")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("another request with the same key:", other.State)
	// Output:
	// first: started
	// retry while running: in progress
	// completed: true
	// retry afterwards: completed "invoice-456"
	// another request with the same key: fingerprint mismatch
}

// The middleware runs a POST handler once per Idempotency-Key and replays
// its response. NewMiddleware returns a func(http.Handler) http.Handler,
// the net/http convention, as ratelimit.NewMiddleware does.
func ExampleNewMiddleware() {
	store, stop, err := exampleStore()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()
	created := 0
	createPayment := func(w http.ResponseWriter, r *http.Request) {
		created++
		w.Header().Set("Location", fmt.Sprintf("/payments/%d", created))
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "payment %d\n", created)
	}
	mw, err := idempotency.NewMiddleware(store,
		idempotency.WithKeyRequired(true),
		idempotency.WithNamespace(func(r *http.Request) string { return r.Header.Get("X-Account") }))
	if err != nil {
		fmt.Println(err)
		return
	}
	h := mw(http.HandlerFunc(createPayment)) // an http.Handler

	send := func(key, body string) error {
		req := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(body))
		req.Header.Set("X-Account", "acct-1")
		if key != "" {
			req.Header.Set(idempotency.HeaderKey, key)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		b, err := io.ReadAll(rec.Body)
		if err != nil {
			return err
		}
		fmt.Printf("%d %s replayed=%q %s", rec.Code, rec.Header().Get("Location"),
			rec.Header().Get(idempotency.HeaderReplayed), strings.SplitN(string(b), ",", 2)[0])
		if rec.Code >= 400 {
			fmt.Println()
		}
		return nil
	}
	for _, r := range []struct{ key, body string }{
		{`"key-1"`, `{"amount":100}`},
		{`"key-1"`, `{"amount":100}`},
		{`"key-1"`, `{"amount":999}`},
		{"", `{"amount":100}`},
	} {
		if err := send(r.key, r.body); err != nil {
			fmt.Println(err)
			return
		}
	}
	// Output:
	// 201 /payments/1 replayed="" payment 1
	// 201 /payments/1 replayed="true" payment 1
	// 422  replayed="" {"type":"https://pkg.go.dev/github.com/coordkit/coordination/idempotency#ProblemKeyReused"
	// 400  replayed="" {"type":"https://pkg.go.dev/github.com/coordkit/coordination/idempotency#ProblemKeyMissing"
}

// When the store fails, the middleware answers 503 and logs the server's
// reply, without keys, addresses or passwords; an error handler gets the
// error itself. Here the client lacks the server's password.
func ExampleWithErrorHandler() {
	mr, err := miniredis.Run()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mr.Close()
	mr.RequireAuth("s3cret") // the client below does not send it
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{} // a stable example output
		}
		return a
	}}))
	coord, err := coordination.New(rdb, coordination.WithLogger(logger))
	if err != nil {
		fmt.Println(err)
		return
	}
	store, err := idempotency.New(coord)
	if err != nil {
		fmt.Println(err)
		return
	}
	mw, err := idempotency.NewMiddleware(store, idempotency.WithErrorHandler(func(r *http.Request, stage string, err error) {
		fmt.Printf("error handler: %s: %v\n", stage, err)
	}))
	if err != nil {
		fmt.Println(err)
		return
	}
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) }))
	req := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(`{"amount":100}`))
	req.Header.Set(idempotency.HeaderKey, "key-1")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	fmt.Println(rec.Code)
	// Output:
	// error handler: begin: coordination: idempotency begin "idempotency:0::key-1": NOAUTH Authentication required.
	// level=WARN msg="idempotency: store unavailable; request refused" stage=begin error="terminal: server replied NOAUTH Authentication required."
	// 503
}

// exampleStore returns a store on an in-process miniredis, as [Example]
// builds it, and a function that stops both.
func exampleStore() (*idempotency.Store, func(), error) {
	mr, err := miniredis.Run()
	if err != nil {
		return nil, nil, err
	}
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	stop := func() {
		_ = rdb.Close()
		mr.Close()
	}
	coord, err := coordination.New(rdb)
	if err != nil {
		stop()
		return nil, nil, err
	}
	store, err := idempotency.New(coord)
	if err != nil {
		stop()
		return nil, nil, err
	}
	return store, stop, nil
}
