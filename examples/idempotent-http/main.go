// Command idempotent-http is a small payment service whose POST /payments
// is made idempotent with the idempotency middleware: a client that retries
// a payment with the same Idempotency-Key is charged once and gets the
// first response again (marked Idempotent-Replayed: true).
//
//	go run . -redis redis://127.0.0.1:6379/0 -addr 127.0.0.1:8080
//	go run . -redis redis://127.0.0.1:6379/0 -addr 127.0.0.1:8081   # a second replica
//
// Then, in another terminal:
//
//	curl -i -X POST localhost:8080/payments -H 'X-Account: acme' \
//	     -H 'Idempotency-Key: "order-42"' -d '{"amount":1999,"currency":"EUR"}'
//
// Send it again to see the replay; send it twice at once to see 409 while
// the first is being charged (the charge takes -charge-time); change the
// body under the same key to see 422; leave out the key to see 400.
//
// It uses only the public API; README.md beside this file shows a session.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordination"
	"github.com/coordkit/coordination/idempotency"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	redisURL := flag.String("redis", "", "server URL, e.g. redis://user:PASSWORD@127.0.0.1:6379/0 or rediss://... for TLS (default $COORD_REDIS_URL, else redis://127.0.0.1:6379/0)")
	chargeTime := flag.Duration("charge-time", 2*time.Second, "how long charging a card takes")
	wait := flag.Duration("wait", 0, "let a retry wait this long for the original instead of answering 409")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if flag.NArg() > 0 {
		log.Error("unexpected argument (this program takes flags only; see -h)", "arg", flag.Arg(0))
		os.Exit(2)
	}
	redis.SetLogger(quiet{}) // connection errors are reported once, below
	if err := run(*addr, *redisURL, *chargeTime, *wait, log); err != nil {
		log.Error("exiting", "error", err)
		os.Exit(exitCode(err)) // 2 a bad -redis URL, 1 otherwise
	}
}

// quiet discards go-redis' own log lines.
type quiet struct{}

// Printf logs one formatted line (go-redis' internal logger interface).
func (quiet) Printf(context.Context, string, ...any) {}

// usageError is a bad -redis URL (exit status 2).
type usageError struct{ error }

func exitCode(err error) int {
	var u usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &u):
		return 2
	}
	return 1
}

// connect opens a client for the server at rawURL (else
// $COORD_REDIS_URL, else a local server) and pings it, so that a wrong
// address is reported at once.
func connect(ctx context.Context, rawURL string) (*redis.Client, error) {
	if rawURL == "" {
		rawURL = os.Getenv("COORD_REDIS_URL")
	}
	if rawURL == "" {
		rawURL = "redis://127.0.0.1:6379/0"
	}
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL, password included
		}
		return nil, usageError{fmt.Errorf("-redis: %v; want a URL such as redis://user:PASSWORD@127.0.0.1:6379/0", err)}
	}
	// A context's deadline then bounds every command, not only the wait
	// for a connection.
	opt.ContextTimeoutEnabled = true
	rdb := redis.NewClient(opt)
	ping, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := rdb.Ping(ping).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("cannot reach the server at %s: %w", opt.Addr, err)
	}
	return rdb, nil
}

func run(addr, redisURL string, chargeTime, wait time.Duration, log *slog.Logger) error {
	rdb, err := connect(context.Background(), redisURL)
	if err != nil {
		return err
	}
	defer rdb.Close()
	log.Info("connected", "server", rdb.Options().Addr)
	h, shutdownCoord, err := newHandler(rdb, chargeTime, wait, log)
	if err != nil {
		return err
	}
	defer func() {
		if err := shutdownCoord(context.Background()); err != nil {
			log.Error("shutdown", "error", err)
		}
	}()
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 30 * time.Second}

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	log.Info("payment service listening", "addr", "http://"+addr)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, done := context.WithTimeout(context.Background(), 10*time.Second)
	defer done()
	return srv.Shutdown(shutdown)
}

// newHandler wires the service: authentication, then the idempotency
// middleware on POST /payments. shutdown ends its coordinator
// (coordination.Coordinator.Shutdown), once the server no longer serves.
func newHandler(rdb redis.UniversalClient, chargeTime, wait time.Duration, log *slog.Logger) (h http.Handler, shutdown func(context.Context) error, err error) {
	coord, err := coordination.New(rdb, coordination.WithKeyPrefix("payments-demo:"), coordination.WithLogger(log))
	if err != nil {
		return nil, nil, err
	}
	store, err := idempotency.New(coord)
	if err != nil {
		return nil, nil, err
	}
	mw, err := idempotency.NewMiddleware(store,
		idempotency.WithKeyRequired(true),
		// Keys are per account: one account never sees another's payments.
		idempotency.WithNamespace(accountOf),
		// A charge must finish well within the claim; responses are kept a day.
		idempotency.WithClaimTTL(time.Minute),
		idempotency.WithResponseTTL(24*time.Hour),
		idempotency.WithWaitForOriginal(wait),
	)
	if err != nil {
		return nil, nil, err
	}
	svc := &service{chargeTime: chargeTime, log: log, payments: map[int]payment{}}
	mux := http.NewServeMux()
	mux.Handle("POST /payments", authenticate(mw(http.HandlerFunc(svc.create))))
	mux.Handle("GET /payments/{id}", authenticate(http.HandlerFunc(svc.get)))
	return mux, coord.Shutdown, nil
}

// authenticate stands in for real authentication: the account is the
// X-Account header.
func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if accountOf(r) == "" {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintln(w, `{"type":"about:blank","title":"Unauthorized","status":401,"detail":"Send your account in X-Account."}`)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func accountOf(r *http.Request) string { return r.Header.Get("X-Account") }

type payment struct {
	ID       int    `json:"id"`
	Account  string `json:"-"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	Status   string `json:"status"`
}

type service struct {
	chargeTime time.Duration
	log        *slog.Logger

	mu       sync.Mutex
	next     int
	payments map[int]payment
}

func (s *service) create(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Amount   int64  `json:"amount"`
		Currency string `json:"currency"`
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || req.Amount <= 0 || len(req.Currency) != 3 {
		// A deterministic 4xx: stored and replayed like a success.
		writeJSON(w, http.StatusBadRequest, map[string]any{
			"type": "about:blank", "title": "Bad Request", "status": 400,
			"detail": `send {"amount": <positive integer>, "currency": "<ISO 4217 code>"}`,
		})
		return
	}
	s.log.Info("charging card", "account", accountOf(r), "amount", req.Amount, "currency", req.Currency)
	// The charge is not interrupted when the client goes away: its response
	// is stored for the client's retry.
	time.Sleep(s.chargeTime)
	s.mu.Lock()
	s.next++
	p := payment{ID: s.next, Account: accountOf(r), Amount: req.Amount, Currency: req.Currency, Status: "captured"}
	s.payments[p.ID] = p
	s.mu.Unlock()
	s.log.Info("card charged", "payment", p.ID)
	w.Header().Set("Location", "/payments/"+strconv.Itoa(p.ID))
	writeJSON(w, http.StatusCreated, p)
}

func (s *service) get(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.Atoi(r.PathValue("id"))
	s.mu.Lock()
	p, ok := s.payments[id]
	s.mu.Unlock()
	if err != nil || !ok || p.Account != accountOf(r) {
		writeJSON(w, http.StatusNotFound, map[string]any{"type": "about:blank", "title": "Not Found", "status": 404})
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	ct := "application/json"
	if status >= 400 {
		ct = "application/problem+json"
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
