package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// The leak check of testharness.Main (goleak's, without goleak) runs after
// the tests.
func TestMain(m *testing.M) { testharness.Main(m) }

func TestPaymentService(t *testing.T) {
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	h, shutdown, err := newHandler(rdb, 50*time.Millisecond, 0, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	srv := httptest.NewServer(h)
	defer srv.Close()
	post := func(account, key, body string) (int, http.Header, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL+"/payments", strings.NewReader(body))
		if account != "" {
			req.Header.Set("X-Account", account)
		}
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	const pay = `{"amount":1999,"currency":"EUR"}`

	// Five concurrent retries of one payment: one charge.
	var wg sync.WaitGroup
	codes := make(chan int, 5)
	for range 5 {
		wg.Go(func() {
			code, _, _ := post("acme", `"order-42"`, pay)
			codes <- code
		})
	}
	wg.Wait()
	close(codes)
	created, conflicts := 0, 0
	for c := range codes {
		switch c {
		case 201:
			created++
		case 409:
			conflicts++
		default:
			t.Fatalf("unexpected status %d", c)
		}
	}
	if created < 1 || created+conflicts != 5 {
		t.Fatalf("%d created, %d conflicts", created, conflicts)
	}
	code, hdr, body := post("acme", `"order-42"`, pay)
	if code != 201 || hdr.Get("Idempotent-Replayed") != "true" || hdr.Get("Location") != "/payments/1" || !strings.Contains(body, `"id":1`) {
		t.Fatalf("replay: %d %v %s", code, hdr, body)
	}
	if code, _, _ := post("acme", `"order-42"`, `{"amount":5,"currency":"EUR"}`); code != 422 {
		t.Fatalf("changed body: %d, want 422", code)
	}
	if code, _, _ := post("acme", "", pay); code != 400 {
		t.Fatalf("no key: %d, want 400", code)
	}
	if code, _, _ := post("", `"order-42"`, pay); code != 401 {
		t.Fatalf("no account: %d, want 401", code)
	}
	// Another account with the same key is another payment.
	if code, hdr, _ := post("globex", `"order-42"`, pay); code != 201 || hdr.Get("Idempotent-Replayed") != "" || hdr.Get("Location") != "/payments/2" {
		t.Fatalf("other account: %d %v", code, hdr)
	}
	// Invalid input is a deterministic 4xx: replayed too.
	post("acme", "bad-1", `{"amount":-1}`)
	if code, hdr, _ := post("acme", "bad-1", `{"amount":-1}`); code != 400 || hdr.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("invalid payment retry: %d %v", code, hdr)
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
