package leader_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/leader"
)

// probe answers one GET of h: the status and the body.
func probe(h http.Handler, method string) (int, string) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, "/healthz", nil))
	return rec.Code, rec.Body.String()
}

// The health handler: 503 "not running" before Run and after it
// returned; 200 "ok" while it leads and renews; 503 "renewal overdue"
// when renewals fail for longer than half the lease plus the tolerance;
// 503 "OnElected outlived its term" while a stopped term's OnElected does
// not return; 405 for other methods; a negative tolerance refused.
func TestHealthHandler(t *testing.T) {
	t.Parallel()
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		const lease, tolerance = 2 * time.Second, 200 * time.Millisecond
		cut := &failingHook{err: errCutOff}
		stuck := make(chan struct{})
		t.Cleanup(func() { close(stuck) })
		elected := make(chan struct{}, 4)
		coord := coordWith(t, b, []redis.Hook{cut})
		e := must(leader.New(coord, leaseKey, fenceKey, "probed",
			leader.WithLeaseDuration(lease), leader.WithDrainTimeout(time.Second),
			leader.OnElected(func(ctx context.Context, _ *leader.Term) error {
				elected <- struct{}{}
				<-ctx.Done()
				if context.Cause(ctx) != nil && strings.Contains(context.Cause(ctx).Error(), "elector stopped") {
					<-stuck // a stopped term's OnElected does not return
				}
				return nil
			})))(t)
		if _, err := e.HealthHandler(-time.Second); err == nil {
			t.Fatal("a negative tolerance was accepted")
		} else if name, _ := check.ArgumentName(err); name != "tolerance" {
			t.Fatalf("negative tolerance: %v, want an error naming tolerance", err)
		}
		h := must(e.HealthHandler(tolerance))(t)
		if code, body := probe(h, http.MethodGet); code != http.StatusServiceUnavailable || body != "not running\n" {
			t.Fatalf("before Run: %d %q, want 503 \"not running\\n\"", code, body)
		}
		if code, _ := probe(h, http.MethodPost); code != http.StatusMethodNotAllowed {
			t.Fatalf("POST: %d, want 405", code)
		}

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- e.Run(ctx) }()
		<-elected
		if code, body := probe(h, http.MethodGet); code != http.StatusOK || body != "ok\n" {
			t.Fatalf("leading: %d %q, want 200 \"ok\\n\"", code, body)
		}
		if code, body := probe(h, http.MethodHead); code != http.StatusOK || body != "ok\n" {
			t.Fatalf("HEAD while leading: %d %q, want 200", code, body)
		}

		// Renewals fail: overdue once the lease is older than half its
		// duration plus the tolerance; the term then ends at its local
		// deadline, and the elector campaigns again (healthy, following).
		cut.on.Store(true)
		waitFor(t, lease+5*time.Second, "renewal overdue", func() bool {
			code, body := probe(h, http.MethodGet)
			return code == http.StatusServiceUnavailable && strings.HasPrefix(body, "renewal overdue by ")
		})
		waitFor(t, lease+5*time.Second, "the term to end", func() bool { return e.Current() == nil })
		if code, body := probe(h, http.MethodGet); code != http.StatusOK {
			t.Fatalf("following after a lost term: %d %q, want 200", code, body)
		}
		cut.on.Store(false)
		if b.IsMini() {
			b.Advance(lease) // the lost lease expires on the server
		}
		select {
		case <-elected:
		case <-time.After(lease + 10*time.Second):
			t.Fatal("not elected again")
		}

		// Stopped while OnElected does not return: unhealthy after the
		// tolerance, then "not running" once Run gave up at the drain
		// timeout.
		cancel()
		waitFor(t, 5*time.Second, "OnElected outlived its term", func() bool {
			code, body := probe(h, http.MethodGet)
			return code == http.StatusServiceUnavailable && strings.HasPrefix(body, "OnElected outlived its term by ")
		})
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return after the drain timeout")
		}
		if code, body := probe(h, http.MethodGet); code != http.StatusServiceUnavailable || body != "not running\n" {
			t.Fatalf("after Run returned: %d %q, want 503 \"not running\\n\"", code, body)
		}
	})
}
