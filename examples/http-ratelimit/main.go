// Command http-ratelimit serves a small API behind layered distributed rate
// limits:
//
//  1. an instance guard: at most 64 requests in progress on this instance,
//     else 503 Service Unavailable (the service is saturated). It lives in
//     this process (ratelimit.NewLocalConcurrency), so it keeps protecting
//     the instance when Redis is down;
//  2. a per-client token bucket: bursts of 20, 10 requests per second
//     sustained, per authenticated tenant (or per client address when
//     anonymous, read through the trusted proxies given with
//     -trusted-proxies), else 429 Too Many Requests; clients on the deny
//     list (the Redis set http-ratelimit:limits:denied) get 403 Forbidden
//     before using any capacity;
//  3. a per-tenant quota: 600 requests per sliding minute and 20,000 per
//     UTC day (reset at midnight UTC on every replica alike), two limits
//     decided together on one key (a composite), else 429;
//  4. on POST /reports only, at most 2 reports in progress per tenant;
//  5. a trial: a stricter per-tenant limit (5 per second, bursts of 30) in
//     shadow mode: it decides and is counted and logged (what it would have
//     refused), but never refuses. Compare, then enforce it.
//
// The limits of layers 2 to 4 live in Redis, so all instances share the
// per-client and per-tenant budgets. While Redis cannot be reached, they
// decide in this process instead, each replica enforcing its share of the
// limits (-replicas, 2 by default: half of each burst and rate); the switch
// to and from local decisions is logged once each way. Layers are all or
// nothing: a request refused by a later layer gets back what earlier
// layers took. Responses
// carry the RateLimit header field of the client and tenant layers (what
// is left) and the RateLimit-Policy field of the client layer (its public
// burst and window); the instance guard's state stays private. Refusals
// carry Retry-After (when the limiter knows it), Cache-Control:
// no-store and an application/problem+json body naming the refusing
// policy. GET /health/limits says whether the limits are decided by Redis
// or locally, and counts the switches.
//
//	go run . -redis redis://127.0.0.1:6379/0 -addr 127.0.0.1:8080
//	go run . -redis redis://127.0.0.1:6379/0 -addr 127.0.0.1:8081   # a second replica
//	curl -i -H 'Authorization: Bearer demo-token-acme' localhost:8080/catalog
//	redis-cli SADD http-ratelimit:limits:denied tenant:globex   # deny a tenant
//
// It uses only the public API; README.md beside this file shows a session.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordination"
	"github.com/coordkit/coordination/ratelimit"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	redisURL := flag.String("redis", "", "server URL, e.g. redis://user:PASSWORD@127.0.0.1:6379/0 or rediss://... for TLS (default $COORD_REDIS_URL, else redis://127.0.0.1:6379/0)")
	replicas := flag.Int("replicas", 2, "how many replicas share the limits: while Redis is down each enforces 1/replicas of them")
	proxies := flag.String("trusted-proxies", "", "comma-separated networks of the reverse proxies in front (e.g. 10.0.0.0/8): X-Forwarded-For is read only from them; empty: the peer address is the client")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "http-ratelimit: unexpected argument %q (this program takes flags only; see -h)\n", flag.Arg(0))
		os.Exit(2)
	}
	if *replicas < 1 {
		fmt.Fprintf(os.Stderr, "http-ratelimit: -replicas must be at least 1, got %d\n", *replicas)
		os.Exit(2)
	}
	clientIP, err := clientAddress(*proxies)
	if err != nil {
		fmt.Fprintf(os.Stderr, "http-ratelimit: -trusted-proxies: %v\n", err)
		os.Exit(2)
	}

	redis.SetLogger(quiet{}) // connection errors are reported once, here
	rdb, err := connect(context.Background(), *redisURL)
	if err != nil {
		log.Printf("http-ratelimit: %v", err)
		os.Exit(exitCode(err)) // 2 a bad -redis URL, 1 no server
	}
	defer rdb.Close()
	log.Printf("using the server at %s", rdb.Options().Addr)
	// The coordinator's log (through slog.Default here) reports background
	// events: among them the switch to local decisions and back.
	coord, err := coordination.New(rdb, coordination.WithKeyPrefix("http-ratelimit:"), coordination.WithLogger(slog.Default()))
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		if err := coord.Shutdown(context.Background()); err != nil {
			log.Printf("shutdown: %v", err)
		}
	}()
	app, closeApp, err := newApp(coord, config{replicas: *replicas, clientIP: clientIP})
	if err != nil {
		log.Fatal(err)
	}
	defer closeApp()

	srv := &http.Server{Addr: *addr, Handler: app, ReadHeaderTimeout: 5 * time.Second}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	go func() {
		<-ctx.Done()
		shutdown, done := context.WithTimeout(context.Background(), 10*time.Second)
		defer done()
		_ = srv.Shutdown(shutdown)
	}()
	log.Printf("listening on http://%s (try: curl -i -H 'Authorization: Bearer demo-token-acme' http://%s/catalog)", *addr, *addr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}

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
	// While Redis is down, the limits decide locally, and once a second a
	// request tries Redis again: one dial attempt, not five with backoff,
	// so that request is not held for seconds.
	opt.DialerRetries = 1
	rdb := redis.NewClient(opt)
	ping, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := rdb.Ping(ping).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("cannot reach the server at %s: %w", opt.Addr, err)
	}
	return rdb, nil
}

// config is what newApp needs besides the coordinator.
type config struct {
	// replicas is the number of replicas sharing the limits: while Redis
	// is down, each enforces 1/replicas of every limit.
	replicas int
	// clientIP returns an anonymous client's partition: its address,
	// read through the trusted proxies (ratelimit.NewClientIP).
	clientIP func(*http.Request) string
}

// clientAddress returns the client-address function for the trusted
// proxies in list (comma-separated networks; empty: none, the peer
// address is the client).
func clientAddress(list string) (func(*http.Request) string, error) {
	var cfg ratelimit.ClientIPConfig
	for _, p := range strings.Split(list, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		prefix, err := netip.ParsePrefix(p)
		if err != nil {
			return nil, fmt.Errorf("%q is not a network such as 10.0.0.0/8", p)
		}
		cfg.TrustedProxies = append(cfg.TrustedProxies, prefix)
	}
	return ratelimit.NewClientIP(cfg)
}

// newApp builds the API with its rate-limit layers. The returned func
// closes the limiters.
func newApp(coord *coordination.Coordinator, cfg config) (http.Handler, func(), error) {
	var (
		local    atomic.Bool  // the Redis limits are decided locally now
		switches atomic.Int64 // switches between Redis and local decisions
	)
	// While Redis cannot be reached, the Redis limits below decide in this
	// process: each replica takes its share. One Option value: one switch
	// for every layer and partition (logged once each way).
	fallback := ratelimit.WithLocalFallback(cfg.replicas, func(isLocal bool) {
		local.Store(isLocal)
		switches.Add(1)
	})
	// 1. Instance guard: in this process, no Redis: it protects this
	// instance whatever the state of the store.
	guard, err := ratelimit.NewLocalConcurrency(64)
	if err != nil {
		return nil, nil, err
	}
	// 2. Per-client token bucket, behind the deny list (one shared list
	// and cache for every client's limiter).
	denied, err := ratelimit.NewDenyList(coord, "limits:denied")
	if err != nil {
		return nil, nil, err
	}
	perClient, err := ratelimit.NewPartitioned(func(client string) (*ratelimit.Limiter, error) {
		return ratelimit.New(coord, ratelimit.PartitionKey("limits:client", client),
			ratelimit.TokenBucket{Limit: 20, TokensPerPeriod: 10, Period: time.Second},
			fallback, ratelimit.WithDenyList(denied, client))
	})
	if err != nil {
		return nil, nil, err
	}
	// 3. Per-tenant quota: a sliding minute and a UTC day, decided
	// together.
	perTenant, err := ratelimit.NewPartitioned(func(tenant string) (*ratelimit.Limiter, error) {
		return ratelimit.New(coord, ratelimit.PartitionKey("limits:tenant", tenant),
			ratelimit.Composite{Components: []ratelimit.Settings{
				ratelimit.SlidingWindow{Limit: 600, Window: time.Minute, Segments: 12},
				dailyQuota,
			}},
			fallback)
	})
	if err != nil {
		return nil, nil, err
	}
	// 4. Expensive reports: 2 at a time per tenant.
	reports, err := ratelimit.NewPartitionedConcurrency(func(tenant string) (*ratelimit.ConcurrencyLimiter, error) {
		return ratelimit.NewConcurrency(coord, ratelimit.PartitionKey("limits:reports", tenant), 2, fallback)
	})
	if err != nil {
		return nil, nil, err
	}
	// 5. A stricter per-tenant limit on trial, on a key of its own, in
	// shadow mode (below): counted in coordination.rate_limit.policy.refused
	// with mode=shadow and logged, never refusing (a shadow policy never
	// turns a request away, whatever its limiter answers).
	trial, err := ratelimit.NewPartitioned(func(tenant string) (*ratelimit.Limiter, error) {
		return ratelimit.New(coord, ratelimit.PartitionKey("limits:trial", tenant),
			ratelimit.GCRA{Burst: 30, Rate: 5, Period: time.Second}, fallback)
	})
	if err != nil {
		return nil, nil, err
	}
	clientPartition := func(r *http.Request) string {
		if t, ok := r.Context().Value(tenantKey{}).(string); ok {
			return "tenant:" + t
		}
		return "anonymous:" + cfg.clientIP(r)
	}

	layers := []ratelimit.Policy{
		{Name: "instance", Concurrency: guard, Status: http.StatusServiceUnavailable},
		{Name: "client", Partitioned: perClient, Partition: clientPartition, RateLimitHeader: true, PublishQuota: true},
		{Name: "tenant", Partitioned: perTenant, Partition: clientPartition, RateLimitHeader: true},
		{Name: "tenant-trial", Partitioned: trial, Partition: clientPartition, Shadow: true},
	}
	standard, err := ratelimit.NewMiddleware(layers)
	if err != nil {
		return nil, nil, err
	}
	expensive, err := ratelimit.NewMiddleware(append(layers,
		ratelimit.Policy{Name: "reports", PartitionedConcurrency: reports, Partition: clientPartition}))
	if err != nil {
		return nil, nil, err
	}

	mux := http.NewServeMux()
	mux.Handle("GET /catalog", standard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "catalog for", clientPartition(r))
	})))
	mux.Handle("POST /reports", expensive(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // pretend to work
		case <-time.After(200 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintln(w, "report queued")
	})))
	// Liveness stays outside every limit; /health/limits says who decides
	// the shared limits now.
	mux.HandleFunc("GET /health/live", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("GET /health/limits", func(w http.ResponseWriter, r *http.Request) {
		decided := "redis"
		if local.Load() {
			decided = "local (Redis unreachable: this replica's share)"
		}
		fmt.Fprintf(w, "limits decided by: %s\nswitches: %d\n", decided, switches.Load())
	})

	closeAll := func() {
		_ = trial.Close()
		_ = reports.Close()
		_ = perTenant.Close()
		_ = perClient.Close()
		_ = guard.Close()
	}
	return authenticate(mux), closeAll, nil
}

// demoTokens stands in for real authentication (OAuth, API keys checked
// against a store): bearer token -> tenant.
var demoTokens = map[string]string{
	"demo-token-acme":   "acme",
	"demo-token-globex": "globex",
}

type tenantKey struct{}

// authenticate resolves the tenant before any rate limit runs, so that the
// partition comes from an authenticated identity, never from a raw header.
func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		const prefix = "Bearer "
		if h := r.Header.Get("Authorization"); len(h) > len(prefix) && h[:len(prefix)] == prefix {
			if tenant, ok := demoTokens[h[len(prefix):]]; ok {
				r = r.WithContext(context.WithValue(r.Context(), tenantKey{}, tenant))
			}
		}
		next.ServeHTTP(w, r)
	})
}

// quiet discards go-redis' own log lines.
type quiet struct{}

// Printf logs one formatted line (go-redis' internal logger interface).
func (quiet) Printf(context.Context, string, ...any) {}

// dailyQuota is 20,000 requests per UTC day: its window is the calendar
// day, so every replica's quota resets at midnight UTC.
var dailyQuota = ratelimit.FixedWindow{Limit: 20000, Align: ratelimit.AlignDay}
