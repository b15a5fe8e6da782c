package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/cliconn"
)

func TestLayeredPolicy(t *testing.T) {
	rdb, stop, err := (&cliconn.Flags{}).Open(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	coord, err := coordination.New(rdb, coordination.WithKeyPrefix("test:"))
	if err != nil {
		t.Fatal(err)
	}
	app, closeApp, err := newApp(coord, "test-instance")
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
	// The per-client bucket holds 20: a tight loop of 25 gets 20 answers
	// (a token or two may come back meanwhile: 10 per second).
	ok, limited := 0, 0
	for range 25 {
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
	if ok < 20 || ok > 22 || limited < 3 {
		t.Fatalf("acme: %d ok, %d limited; want about 20 ok", ok, limited)
	}
	// Every answer says where the caller stands (RateLimit header fields).
	w := get("demo-token-acme")
	if w.Header().Get("RateLimit-Policy") == "" || !strings.Contains(w.Header().Get("RateLimit"), `"client";r=0`) {
		t.Fatalf("RateLimit headers: %v", w.Header())
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

// With Redis unreachable the instance guard fails closed (503), and the
// failure reaches the error handler (counted on /health/limits).
func TestRedisDown(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()
	coord, err := coordination.New(rdb, coordination.WithKeyPrefix("test:"))
	if err != nil {
		t.Fatal(err)
	}
	app, closeApp, err := newApp(coord, "test-instance")
	if err != nil {
		t.Fatal(err)
	}
	defer closeApp()
	w := httptest.NewRecorder()
	app.ServeHTTP(w, httptest.NewRequest("GET", "/catalog", nil))
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "" {
		t.Fatalf("Redis down: %d %v, want 503 without Retry-After", w.Code, w.Header())
	}
	w = httptest.NewRecorder()
	app.ServeHTTP(w, httptest.NewRequest("GET", "/health/limits", nil))
	if got := strings.TrimSpace(w.Body.String()); got != "limiter failures: 1" {
		t.Fatalf("/health/limits: %q", got)
	}
}
