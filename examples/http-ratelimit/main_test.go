package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordination"
)

func TestLayeredPolicy(t *testing.T) {
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	coord, err := coordination.New(rdb, coordination.WithKeyPrefix("test:"))
	if err != nil {
		t.Fatal(err)
	}
	app, closeApp, err := newApp(coord, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer closeApp()

	get := func(token string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/catalog", nil)
		r.RemoteAddr = "198.51.100.7:1234"
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		app.ServeHTTP(w, r)
		return w
	}
	// The per-client bucket holds 20 and gets 10 tokens back per second: a
	// loop runs until the first 429 and gets 20 answers plus what came back
	// while it ran (on a loaded machine each request takes longer, so the
	// bound follows the loop's own duration, not a guess).
	ok, limited := 0, 0
	start := time.Now()
	for ok < 200 && limited == 0 {
		w := get("demo-token-acme")
		switch w.Code {
		case http.StatusOK:
			ok++
		case http.StatusTooManyRequests:
			limited++
			if w.Header().Get("Retry-After") != "1" || w.Header().Get("Content-Type") != "application/problem+json" {
				t.Fatalf("429 headers %v", w.Header())
			}
		default:
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
	refilled := int(time.Since(start).Seconds()*10) + 1
	if limited != 1 || ok < 20 || ok > 20+refilled {
		t.Fatalf("acme: %d ok before %d limited in %v; want 20 ok plus at most %d refilled, then a 429",
			ok, limited, time.Since(start).Round(time.Millisecond), refilled)
	}
	// Every answer says where the caller stands (RateLimit header fields):
	// the bucket is empty but for the tokens back since the 429 (10 per
	// second, one of them taken by this request).
	since := time.Now()
	w := get("demo-token-acme")
	var remaining int
	field := w.Header().Get("RateLimit")
	i := strings.Index(field, `"client";r=`)
	if i >= 0 {
		_, err = fmt.Sscanf(field[i+len(`"client";r=`):], "%d", &remaining)
	}
	if w.Header().Get("RateLimit-Policy") == "" || i < 0 || err != nil || remaining > int(time.Since(since).Seconds()*10) {
		t.Fatalf("RateLimit headers: %v (remaining %d, %v)", w.Header(), remaining, err)
	}
	// Another tenant and an anonymous client have their own buckets.
	if w := get("demo-token-globex"); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "tenant:globex") {
		t.Fatalf("globex: %d %s", w.Code, w.Body)
	}
	if w := get(""); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "anonymous:198.51.100.7") {
		t.Fatalf("anonymous: %d %s", w.Code, w.Body)
	}
	// Reports: 2 at a time per tenant; the third concurrent one gets 429
	// without Retry-After (a concurrency limit cannot know when).
	var wg sync.WaitGroup
	codes := make(chan int, 3)
	for range 3 {
		wg.Go(func() {
			r := httptest.NewRequest("POST", "/reports", nil)
			r.Header.Set("Authorization", "Bearer demo-token-globex")
			w := httptest.NewRecorder()
			app.ServeHTTP(w, r)
			if w.Code == http.StatusTooManyRequests && w.Header().Get("Retry-After") != "" {
				t.Errorf("concurrency refusal with Retry-After")
			}
			codes <- w.Code
			time.Sleep(0)
		})
	}
	wg.Wait()
	close(codes)
	got := map[int]int{}
	for c := range codes {
		got[c]++
	}
	if got[http.StatusAccepted] != 2 || got[http.StatusTooManyRequests] != 1 {
		t.Fatalf("reports: %v, want 2 accepted and 1 refused", got)
	}
	// A client on the deny list gets 403 before using any capacity.
	if err := rdb.SAdd(context.Background(), "test:limits:denied", "anonymous:198.51.100.8").Err(); err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/catalog", nil)
	r.RemoteAddr = "198.51.100.8:1234"
	w = httptest.NewRecorder()
	app.ServeHTTP(w, r)
	if w.Code != http.StatusForbidden {
		t.Fatalf("a denied client: %d %s", w.Code, w.Body)
	}
}

// Redis stops mid-run: the shared limits switch to this replica's share
// (the per-client bucket: ceil(20/2) = 10, refilled at 5 per second), so
// an anonymous client is still limited (200s, then 429 with Retry-After),
// and /health/limits says so; when Redis is back, the next try (at least
// 1 s after the switch) returns the decisions to Redis.
func TestRedisStoppedMidRun(t *testing.T) {
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()
	coord, err := coordination.New(rdb, coordination.WithKeyPrefix("test:"))
	if err != nil {
		t.Fatal(err)
	}
	app, closeApp, err := newApp(coord, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer closeApp()
	get := func(path string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", path, nil)
		r.RemoteAddr = "198.51.100.9:1234"
		w := httptest.NewRecorder()
		app.ServeHTTP(w, r)
		return w
	}
	health := func() string { return strings.TrimSpace(get("/health/limits").Body.String()) }
	if w := get("/catalog"); w.Code != http.StatusOK {
		t.Fatalf("with Redis: %d %s", w.Code, w.Body)
	}
	if h := health(); h != "limits decided by: redis\nswitches: 0" {
		t.Fatalf("/health/limits with Redis: %q", h)
	}
	m.Close() // Redis stops
	ok, limited := 0, 0
	start := time.Now()
	for ok < 100 && limited == 0 {
		switch w := get("/catalog"); w.Code {
		case http.StatusOK:
			ok++
		case http.StatusTooManyRequests:
			limited++
			if w.Header().Get("Retry-After") == "" {
				t.Fatalf("a local refusal without Retry-After: %v", w.Header())
			}
		default:
			t.Fatalf("Redis down: %d %s, want 200s then 429", w.Code, w.Body)
		}
	}
	refilled := int(time.Since(start).Seconds()*5) + 1
	if limited != 1 || ok < 10 || ok > 10+refilled {
		t.Fatalf("Redis down: %d ok before %d limited, want this replica's 10 plus at most %d refilled, then a 429", ok, limited, refilled)
	}
	if h := health(); !strings.HasPrefix(h, "limits decided by: local") || !strings.HasSuffix(h, "switches: 1") {
		t.Fatalf("/health/limits with Redis down: %q", h)
	}
	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for health() != "limits decided by: redis\nswitches: 2" {
		if time.Now().After(deadline) {
			t.Fatalf("not back on Redis: %q", health())
		}
		get("/catalog") // a try, at least 1 s after the switch, goes to Redis
		time.Sleep(50 * time.Millisecond)
	}
}

// testConfig is the configuration of the tests: two replicas, no trusted
// proxy.
func testConfig() config {
	ip, err := clientAddress("")
	if err != nil {
		panic(err)
	}
	return config{replicas: 2, clientIP: ip}
}

// Behind a trusted proxy the client is the address it forwarded; from any
// other peer the header is ignored; a bad network is refused.
func TestTrustedProxies(t *testing.T) {
	ip, err := clientAddress("10.0.0.0/8, 192.168.0.0/16")
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/catalog", nil)
	r.RemoteAddr = "10.1.2.3:5555"
	r.Header.Set("X-Forwarded-For", "203.0.113.50, 198.51.100.7")
	if got := ip(r); got != "198.51.100.7" {
		t.Fatalf("through a trusted proxy: %q, want the right-most untrusted address", got)
	}
	r.RemoteAddr = "203.0.113.9:5555"
	if got := ip(r); got != "203.0.113.9" {
		t.Fatalf("from an untrusted peer: %q, want the peer", got)
	}
	if _, err := clientAddress("10.0.0.0/8,nonsense"); err == nil || !strings.Contains(err.Error(), `"nonsense"`) {
		t.Fatalf("a bad network: %v", err)
	}
}

// connect takes -redis, else $COORD_REDIS_URL, else 127.0.0.1:6379; a bad
// URL is a usage error (exit 2) that never shows its password, an
// unreachable server exit 1.
func TestConnect(t *testing.T) {
	m := miniredis.RunT(t)
	ctx := context.Background()
	for _, c := range []struct {
		url  string
		code int
		want string
	}{
		{"redis://" + m.Addr() + "/0", 0, ""},
		{"redis://u:hunter2@127.0.0.1:1/0", 1, "cannot reach the server at 127.0.0.1:1: "},
		{"bogus:hunter2", 2, "-redis: redis: invalid URL scheme: bogus; want a URL such as redis://"},
		{"redis://u:hunter2%zz@h:1/0", 2, "-redis: invalid URL escape"},
	} {
		rdb, err := connect(ctx, c.url)
		if err == nil {
			if c.code != 0 || !rdb.Options().ContextTimeoutEnabled {
				t.Errorf("%s: connected without ContextTimeoutEnabled", c.url)
			}
			rdb.Close()
			continue
		}
		if exitCode(err) != c.code || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: %v (exit %d); want exit %d and %q, no password", c.url, err, exitCode(err), c.code, c.want)
		}
	}
	t.Setenv("COORD_REDIS_URL", "redis://"+m.Addr()+"/0")
	rdb, err := connect(ctx, "")
	if err != nil || rdb.Options().Addr != m.Addr() {
		t.Fatalf("$COORD_REDIS_URL not used: %v", err)
	}
	rdb.Close()
}
