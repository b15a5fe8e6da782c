package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/ratelimit"
)

// A GCRA limiter allowing a burst of 3, then one request every 100 ms,
// shared by every process using the key "limits:api".
func Example() {
	// An embedded server with a fixed clock, so the output is exact. Any
	// go-redis client works: a decision re-sent after a lost reply is
	// recognised and consumes once.
	srv, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	srv.SetTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	ctx := context.Background()

	coord, err := coordination.New(rdb, coordination.WithKeyPrefix("example:"))
	if err != nil {
		log.Fatal(err)
	}
	lim, err := ratelimit.New(coord, "limits:api", ratelimit.GCRA{Burst: 3, Interval: 100 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()

	for i := 1; i <= 4; i++ {
		dec, err := lim.Allow(ctx, 1)
		if err != nil {
			log.Fatal(err)
		}
		if dec.Allowed() {
			fmt.Printf("request %d: allowed, %d left\n", i, dec.Available())
			continue
		}
		retry, _ := dec.RetryAfter()
		fmt.Printf("request %d: limited, retry after %v\n", i, retry)
	}
	// Output:
	// request 1: allowed, 2 left
	// request 2: allowed, 1 left
	// request 3: allowed, 0 left
	// request 4: limited, retry after 100ms
}

// Wait waits for its permits: it sleeps until the server-computed retry
// time instead of polling, and fails at once when that time is past the
// context's deadline.
func ExampleLimiter_Wait() {
	srv, err := miniredis.Run() // its clock follows the wall clock
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	defer rdb.Close()
	coord, err := coordination.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	lim, err := ratelimit.New(coord, "limits:jobs", ratelimit.FixedWindow{Limit: 1, Window: 200 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	for i := 1; i <= 2; i++ {
		dec, err := lim.Wait(ctx, 1)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("job %d: acquired %v\n", i, dec.Allowed())
	}
	// Job 1's window (from the server's millisecond of its grant) holds
	// one job: job 2 waited for the next window.
	fmt.Printf("job 2 waited for the next window: %v\n", time.Since(start) > 199*time.Millisecond)

	// A retry time past the deadline fails at once with a *WaitError
	// carrying the server's RetryAfter: Wait never returns a nil error
	// without the permits.
	hourly, err := ratelimit.New(coord, "limits:reports", ratelimit.FixedWindow{Limit: 1, Window: time.Hour})
	if err != nil {
		log.Fatal(err)
	}
	defer hourly.Close()
	if _, err := hourly.Wait(ctx, 1); err != nil {
		log.Fatal(err)
	}
	_, err = hourly.Wait(ctx, 1) // ctx ends in 5 s; the window in an hour
	var we *ratelimit.WaitError
	if errors.As(err, &we) {
		fmt.Printf("report: not acquired %v, past the deadline %v, retry within the hour %v\n",
			errors.Is(err, coordination.ErrNotAcquired), we.PastDeadline, we.RetryAfter > 59*time.Minute && we.RetryAfter <= time.Hour)
	}
	// Output:
	// job 1: acquired true
	// job 2: acquired true
	// job 2 waited for the next window: true
	// report: not acquired true, past the deadline true, retry within the hour true
}

// A concurrency limiter: at most 2 leases held at once across every
// process; a lease renews itself while held and returns its permit on
// Release. TryAcquire never waits: a refusal is an error matching
// coordination.ErrNotAcquired.
func ExampleNewConcurrency() {
	srv, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	coord, err := coordination.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	lim, err := ratelimit.NewConcurrency(coord, "limits:exports", 2, ratelimit.WithLeaseDuration(30*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()

	ctx := context.Background()
	var held []*ratelimit.ConcurrencyLease
	for i := 1; i <= 3; i++ {
		lease, err := lim.TryAcquire(ctx, 1)
		switch {
		case errors.Is(err, coordination.ErrNotAcquired):
			fmt.Printf("export %d: acquired false\n", i)
		case err != nil:
			log.Fatal(err)
		default:
			fmt.Printf("export %d: acquired true (%d permit)\n", i, lease.N())
			held = append(held, lease)
		}
	}
	for _, lease := range held {
		// Run the export under lease.Context(): it ends if the lease is lost.
		if _, err := lease.Release(ctx); err != nil {
			log.Fatal(err)
		}
	}
	lease, err := lim.Acquire(ctx, 1) // waits until a permit is free
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("after the releases: acquired", lease.N())
	out, err := lease.Release(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("release:", out)
	// Output:
	// export 1: acquired true (1 permit)
	// export 2: acquired true (1 permit)
	// export 3: acquired false
	// after the releases: acquired 1
	// release: released
}

// Layered HTTP policies: a service-wide concurrency guard answering 503,
// then a token bucket per client address answering 429 with Retry-After.
// Only the client's policy publishes its state, in the RateLimit field;
// the guard's stays private.
func ExampleNewMiddleware() {
	srv, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	srv.SetTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	defer rdb.Close()
	coord, err := coordination.New(rdb, coordination.WithKeyPrefix("svc:"))
	if err != nil {
		log.Fatal(err)
	}

	guard, err := ratelimit.NewConcurrency(coord, "limits:instance-guard", 200)
	if err != nil {
		log.Fatal(err)
	}
	defer guard.Close()
	perClient, err := ratelimit.NewPartitioned(func(client string) (*ratelimit.Limiter, error) {
		return ratelimit.New(coord, ratelimit.PartitionKey("limits:client", client),
			ratelimit.TokenBucket{Limit: 2, TokensPerPeriod: 1, Period: time.Second})
	})
	if err != nil {
		log.Fatal(err)
	}
	defer perClient.Close()
	mw, err := ratelimit.NewMiddleware([]ratelimit.Policy{
		{Name: "guard", Concurrency: guard, Status: http.StatusServiceUnavailable},
		{Name: "client", Partitioned: perClient, Partition: ratelimit.ClientIP, RateLimitHeader: true},
	})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /catalog", mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "catalog")
	})))

	for range 3 {
		r := httptest.NewRequest("GET", "/catalog", nil)
		r.RemoteAddr = "203.0.113.7:4242"
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		fmt.Printf("%d RateLimit: %s Retry-After=%q\n", w.Code, w.Header().Get("RateLimit"), w.Header().Get("Retry-After"))
	}
	// Output:
	// 200 RateLimit: "client";r=1 Retry-After=""
	// 200 RateLimit: "client";r=0 Retry-After=""
	// 429 RateLimit: "client";r=0;t=1 Retry-After="1"
}

// A daily quota refused with its own problem type and title, a RateLimit
// field without quota or window, and a Retry-After spread by up to a
// minute and capped at an hour (the window ends in a day: clients come
// back within the hour, not all at midnight).
func ExampleWithRetryAfter() {
	srv, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	defer rdb.Close()
	coord, err := coordination.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	daily, err := ratelimit.New(coord, "limits:reports-daily", ratelimit.FixedWindow{Limit: 2, Window: 24 * time.Hour})
	if err != nil {
		log.Fatal(err)
	}
	defer daily.Close()

	mw, err := ratelimit.NewMiddleware([]ratelimit.Policy{{
		Name:            "daily",
		Limiter:         daily,
		RateLimitHeader: true,
		ProblemType:     "https://iana.org/assignments/http-problem-types#quota-exceeded",
		ProblemTitle:    "Daily quota exceeded",
	}}, ratelimit.WithRetryAfter(time.Minute, time.Hour))
	if err != nil {
		log.Fatal(err)
	}

	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "report") }))
	for range 3 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("POST", "/reports", nil))
		fmt.Printf("%d RateLimit: %s Retry-After=%q\n", w.Code, w.Header().Get("RateLimit"), w.Header().Get("Retry-After"))
		if w.Code != http.StatusOK {
			fmt.Print(w.Body)
		}
	}
	// Output:
	// 200 RateLimit: "daily";r=1 Retry-After=""
	// 200 RateLimit: "daily";r=0 Retry-After=""
	// 429 RateLimit: "daily";r=0;t=3600 Retry-After="3600"
	// {"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Daily quota exceeded","status":429,"detail":"The request exceeds the current rate limit.","instance":"/reports","violated-policies":["daily"]}
}

// Limiter failures are logged (without keys, addresses or passwords) and
// handed to an error handler, here for a server that is gone.
func ExampleWithErrorHandler() {
	srv, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	defer rdb.Close()
	coord, err := coordination.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	lim, err := ratelimit.New(coord, "limits:api", ratelimit.GCRA{Burst: 10, Interval: time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()
	logger := exampleLogger() // lines without their time, so the output is exact
	failures := 0
	mw, err := ratelimit.NewMiddleware([]ratelimit.Policy{{Name: "api", Limiter: lim}},
		ratelimit.WithLogger(logger),
		ratelimit.WithErrorHandler(func(r *http.Request, err error) { failures++ }))
	if err != nil {
		log.Fatal(err)
	}
	h := mw(http.NotFoundHandler())

	srv.Close() // Redis goes away
	for range 3 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		fmt.Println(w.Code)
	}
	fmt.Println("failures handled:", failures)
	// Output:
	// level=ERROR msg="ratelimit: a limiter could not decide" policy=api answer="503 Service Unavailable" error="transient: dial: connection refused"
	// 503
	// 503
	// 503
	// failures handled: 3
}

// exampleCoordinator returns a coordinator over an embedded server whose
// clock is frozen, so that outputs are exact.
func exampleCoordinator() (*coordination.Coordinator, func()) {
	srv, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	srv.SetTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	coord, err := coordination.New(rdb, coordination.WithKeyPrefix("example:"))
	if err != nil {
		log.Fatal(err)
	}
	return coord, func() { _ = rdb.Close(); srv.Close() }
}

// Three limits on one key, decided together: a burst of 10 refilled 2 per
// second, 100 per sliding minute and 1000 per hour. A request passes only
// when all three admit it; a refusal consumes from none.
func ExampleNew_composite() {
	coord, done := exampleCoordinator()
	defer done()

	lim, err := ratelimit.New(coord, "limits:tenant-42", ratelimit.Composite{Components: []ratelimit.Settings{
		ratelimit.TokenBucket{Limit: 10, TokensPerPeriod: 2, Period: time.Second},
		ratelimit.SlidingWindow{Limit: 100, Window: time.Minute, Segments: 10},
		ratelimit.FixedWindow{Limit: 1000, Window: time.Hour},
	}})
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()

	ctx := context.Background()
	granted := 0
	for range 11 {
		dec, err := lim.Allow(ctx, 1)
		if err != nil {
			log.Fatal(err)
		}
		if dec.Allowed() {
			granted++
			continue
		}
		retry, _ := dec.RetryAfter()
		fmt.Printf("granted %d, then limited: every limit admits again in %v\n", granted, retry)
	}
	// Output:
	// granted 10, then limited: every limit admits again in 1s
}

// A deny list refuses identities before they use any capacity.
func ExampleDenyList() {
	coord, done := exampleCoordinator()
	defer done()
	ctx := context.Background()

	denied, err := ratelimit.NewDenyList(coord, "limits:denied")
	if err != nil {
		log.Fatal(err)
	}
	if err := denied.Deny(ctx, "customer:42"); err != nil {
		log.Fatal(err)
	}
	lim, err := ratelimit.New(coord, "limits:customer:42", ratelimit.FixedWindow{Limit: 100, Window: time.Minute},
		ratelimit.WithDenyList(denied, "customer:42"))
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()

	dec, err := lim.Allow(ctx, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("acquired:", dec.Allowed(), "denied:", dec.Denied())

	if err := denied.Remove(ctx, "customer:42"); err != nil {
		log.Fatal(err)
	}
	dec, err = lim.Allow(ctx, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("acquired:", dec.Allowed(), "denied:", dec.Denied())
	// Output:
	// acquired: false denied: true
	// acquired: true denied: false
}

// A new limit on a live limiter: the usage so far is kept (here, a
// window's count), and processes still on the old limit keep deciding.
func ExampleLimiter_Update() {
	coord, done := exampleCoordinator()
	defer done()
	ctx := context.Background()

	lim, err := ratelimit.New(coord, "limits:plan", ratelimit.FixedWindow{Limit: 2, Window: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()
	for range 3 {
		dec, err := lim.Allow(ctx, 1)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("acquired:", dec.Allowed())
	}

	if err := lim.Update(ctx, ratelimit.FixedWindow{Limit: 5, Window: time.Minute}); err != nil {
		log.Fatal(err)
	}
	dec, err := lim.Allow(ctx, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("after the update: acquired:", dec.Allowed(), "left:", dec.Available())
	// Output:
	// acquired: true
	// acquired: true
	// acquired: false
	// after the update: acquired: true left: 2
}

// Reserve then Settle: hold an estimate of tokens while the work runs,
// then charge what it really cost.
func ExampleLimiter_Reserve() {
	coord, done := exampleCoordinator()
	defer done()
	ctx := context.Background()

	// 1000 model tokens per minute, at most 1000 at once.
	lim, err := ratelimit.New(coord, "limits:llm-tokens", ratelimit.GCRA{Burst: 1000, Rate: 1000, Period: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()

	res, err := lim.Reserve(ctx, 800) // the most the call may use
	if err != nil {
		log.Fatal(err)
	}
	if !res.Allowed() {
		log.Fatal("over the budget")
	}
	// ... the call runs and reports using 300 tokens ...
	back, err := res.Settle(ctx, 300)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("given back:", back)

	// A call that used more than reserved goes into debt: the limiter
	// admits again only once the excess has been paid for.
	res, err = lim.Reserve(ctx, 700)
	if err != nil {
		log.Fatal(err)
	}
	back, err = res.Settle(ctx, 900)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("given back:", back)
	probe, err := lim.Allow(ctx, 0)
	if err != nil {
		log.Fatal(err)
	}
	retry, _ := probe.RetryAfter()
	fmt.Println("next token in:", retry)
	// Output:
	// given back: 500
	// given back: -200
	// next token in: 12.06s
}

// A hot key shared by many processes: each process takes blocks of 10
// permits in one decision and serves them locally; a block not used up
// within 50 ms gives the rest back. With P processes, a window grants at
// most Limit + P × 10 permits.
func ExampleWithBatch() {
	srv, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	srv.SetTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	ctx := context.Background()

	coord, err := coordination.New(rdb, coordination.WithKeyPrefix("example:"))
	if err != nil {
		log.Fatal(err)
	}
	lim, err := ratelimit.New(coord, "limits:hot", ratelimit.FixedWindow{Limit: 1000, Window: time.Second},
		ratelimit.WithBatch(10, 50*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()

	for i := 1; i <= 12; i++ {
		dec, err := lim.Allow(ctx, 1)
		if err != nil {
			log.Fatal(err)
		}
		if i == 1 || i == 10 || i == 11 {
			fmt.Printf("request %d: allowed %v, %d left\n", i, dec.Allowed(), dec.Available())
		}
	}
	// Two blocks: the 1st and the 11th request asked Redis.
	fmt.Println("decisions granted:", lim.Statistics().Granted)
	// Output:
	// request 1: allowed true, 999 left
	// request 10: allowed true, 990 left
	// request 11: allowed true, 989 left
	// decisions granted: 12
}

// Behind a load balancer in 10.0.0.0/8, the client is the address the
// balancer appended to X-Forwarded-For, grouped by /64 for IPv6; a value a
// client wrote itself (the left-most) is not believed.
func ExampleNewClientIP() {
	client, err := ratelimit.NewClientIP(ratelimit.ClientIPConfig{
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, req := range []struct{ peer, xff string }{
		{"10.0.0.7:5000", "198.51.100.4"},
		{"10.0.0.7:5000", "1.2.3.4, 2001:db8:1:2::99"},
		{"203.0.113.9:443", "1.2.3.4"}, // not from the balancer: the header is ignored
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = req.peer
		r.Header.Set("X-Forwarded-For", req.xff)
		fmt.Println(client(r))
	}
	_, err = ratelimit.NewClientIP(ratelimit.ClientIPConfig{IPv6PrefixBits: 200})
	fmt.Println(err)
	// Output:
	// 198.51.100.4
	// 2001:db8:1:2::/64
	// 203.0.113.9
	// coordination: invalid argument IPv6PrefixBits: must be 1 to 128 (0: 64), got 200
}

// Quotas by the calendar: 3 exports a day, reset at midnight UTC for every
// replica at once; a refusal's RetryAfter runs to midnight. A day in a
// time zone (or a month) follows its daylight-saving changes.
func ExampleFixedWindow_calendar() {
	srv, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	srv.SetTime(time.Date(2026, 1, 1, 23, 59, 30, 0, time.UTC)) // 30 s before midnight
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	defer rdb.Close()
	ctx := context.Background()
	coord, err := coordination.New(rdb)
	if err != nil {
		log.Fatal(err)
	}

	daily, err := ratelimit.New(coord, "quota:exports", ratelimit.FixedWindow{Limit: 3, Align: ratelimit.AlignDay})
	if err != nil {
		log.Fatal(err)
	}
	defer daily.Close()
	for i := 1; i <= 4; i++ {
		dec, err := daily.Allow(ctx, 1)
		if err != nil {
			log.Fatal(err)
		}
		retry, _ := dec.RetryAfter()
		fmt.Printf("export %d: allowed %v, retry after %v\n", i, dec.Allowed(), retry)
	}

	// The same quota by the day of Berlin (23 or 25 hours around a
	// daylight-saving change); every process sharing the key must name the
	// same zone.
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		log.Fatal(err)
	}
	local, err := ratelimit.New(coord, "quota:exports:berlin", ratelimit.FixedWindow{Limit: 3, Align: ratelimit.AlignDay, Location: berlin})
	if err != nil {
		log.Fatal(err)
	}
	defer local.Close()
	// Output:
	// export 1: allowed true, retry after 0s
	// export 2: allowed true, retry after 0s
	// export 3: allowed true, retry after 0s
	// export 4: allowed false, retry after 30s
}

// The administrative operations: a penalty and a reward out of band, a
// read that consumes nothing, a reset, and a lockout that ends by itself.
func Example_admin() {
	srv, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	srv.SetTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	defer rdb.Close()
	ctx := context.Background()
	coord, err := coordination.New(rdb)
	if err != nil {
		log.Fatal(err)
	}

	lim, err := ratelimit.New(coord, "limits:login:alice", ratelimit.GCRA{Burst: 5, Rate: 5, Period: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()
	// A wrong password costs 2 more permits; a solved captcha gives 1 back.
	left, err := lim.Penalize(ctx, 2)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("after the penalty:", left)
	left, err = lim.Reward(ctx, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("after the reward:", left)
	dec, err := lim.Peek(ctx) // consumes nothing
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("peek:", dec.Allowed(), dec.Available())
	if err := lim.Reset(ctx); err != nil {
		log.Fatal(err)
	}

	lockouts, err := ratelimit.NewDenyList(coord, "limits:lockouts")
	if err != nil {
		log.Fatal(err)
	}
	if err := lockouts.DenyFor(ctx, "user:alice", 15*time.Minute); err != nil {
		log.Fatal(err)
	}
	locked, err := lockouts.Denied(ctx, "user:alice")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("locked out:", locked)

	dec, err = lim.Peek(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("after the reset:", dec.Available())
	// Output:
	// after the penalty: 3
	// after the reward: 4
	// peek: true 4
	// locked out: true
	// after the reset: 5
}

// A process that restarts adopts its concurrency lease by its token; an
// administrator lists the holders and force-releases one.
func ExampleConcurrencyLimiter_Adopt() {
	srv, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	coord, err := coordination.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	lim, err := ratelimit.NewConcurrency(coord, "limits:exports", 4, ratelimit.WithLeaseDuration(30*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	lease, err := lim.TryAcquire(ctx, 3)
	if err != nil {
		log.Fatal(err)
	}
	saved := lease.Token()
	lim.Close() // the process stops: its lease stays until its TTL

	// After the restart: a new coordinator (here on the same client).
	coord, err = coordination.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	lim, err = ratelimit.NewConcurrency(coord, "limits:exports", 4, ratelimit.WithLeaseDuration(30*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()
	adopted, err := lim.Adopt(ctx, saved)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("adopted permits:", adopted.N(), adopted.Remaining().Round(time.Second))
	if _, err := adopted.Refresh(ctx, 30*time.Second); err != nil { // then renew it
		log.Fatal(err)
	}
	adopted.KeepAlive()

	hs, err := lim.Holders(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("holders:", len(hs), "permits:", hs[0].Permits)
	ok, err := lim.ForceRelease(ctx, hs[0].Token)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("force released:", ok)
	// Output:
	// adopted permits: 3 30s
	// holders: 1 permits: 3
	// force released: true
}
