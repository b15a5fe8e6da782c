package idempotency_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/idempotency"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// syncBuffer is a bytes.Buffer safe for concurrent writes (a log sink).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// stageErrors records the error handler's calls.
type stageErrors struct {
	mu    sync.Mutex
	calls []string // stage: error
}

func (s *stageErrors) handle(_ *http.Request, stage string, err error) {
	s.mu.Lock()
	s.calls = append(s.calls, stage+": "+err.Error())
	s.mu.Unlock()
}

func (s *stageErrors) get() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

// newLogged returns a coordinator over client whose logger writes text
// lines (without time) to the returned buffer.
func newLogged(t *testing.T, client redis.UniversalClient, prefix string) (*coordination.Coordinator, *syncBuffer) {
	t.Helper()
	buf := &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	coord, err := coordination.New(client, coordination.WithKeyPrefix(prefix), coordination.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	return coord, buf
}

func serveKey(h http.Handler, key string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(`{"amount":100}`))
	req.Header.Set(idempotency.HeaderKey, key)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// Fault from a new user's try: a store that refuses the client's
// credentials made the middleware log only "terminal". The operator must
// see the server's reply (NOAUTH, WRONGPASS), once per distinct failure,
// and never the password, the key or the server's address; the error
// handler gets every failure.
func TestMiddlewareLogsTheStoreError(t *testing.T) {
	flavor := testharness.FirstFlavor(t)
	srv := testharness.StartStandalone(t, flavor)
	const password = "pw-Secret-4711"
	ctx := context.Background()
	admin := redis.NewClient(srv.Options())
	if err := admin.ConfigSet(ctx, "requirepass", password).Err(); err != nil {
		t.Fatal(err)
	}
	_ = admin.Close()
	for _, tc := range []struct {
		name, password, want string
	}{
		{"no password", "", "NOAUTH"},
		{"wrong password", "wrong-Secret-0815", "WRONGPASS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := srv.Options()
			o.Password = tc.password
			// With it off, coordination.New logs a warning of its own on
			// this logger; the test counts the middleware's lines only.
			o.ContextTimeoutEnabled = true
			client := redis.NewClient(o)
			t.Cleanup(func() { _ = client.Close() })
			coord, logs := newLogged(t, client, "tenant-prefix:")
			store, err := idempotency.New(coord)
			if err != nil {
				t.Fatal(err)
			}
			handled := &stageErrors{}
			mw, err := idempotency.NewMiddleware(store, idempotency.WithErrorHandler(handled.handle))
			if err != nil {
				t.Fatal(err)
			}
			runs := 0
			h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { runs++ }))
			for range 3 {
				rec := serveKey(h, "idem-key-123")
				if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), idempotency.ProblemUnavailable) {
					t.Fatalf("answer %d %s, want 503 %s", rec.Code, rec.Body, idempotency.ProblemUnavailable)
				}
			}
			if runs != 0 {
				t.Fatalf("the handler ran %d times without a store", runs)
			}
			out := logs.String()
			t.Logf("log: %s", strings.TrimSpace(out))
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], "store unavailable") || !strings.Contains(lines[0], "stage=begin") ||
				!strings.Contains(lines[0], tc.want) {
				t.Fatalf("log:\n%s\nwant one line (the same failure repeats) naming stage=begin and %s", out, tc.want)
			}
			for _, secret := range []string{password, "wrong-Secret", "idem-key-123", "tenant-prefix", idempotency.StoreKey("", "idem"), srv.Addr, "127.0.0.1"} {
				if strings.Contains(out, secret) {
					t.Errorf("the log line holds %q", secret)
				}
			}
			calls := handled.get()
			if len(calls) != 3 {
				t.Fatalf("error handler called %d times, want 3 (every failure)", len(calls))
			}
			for _, c := range calls {
				if !strings.HasPrefix(c, "begin: ") || !strings.Contains(c, tc.want) {
					t.Errorf("error handler got %q, want stage begin and %s", c, tc.want)
				}
			}
		})
	}
}

// A response that cannot be stored after the handler ran is logged with
// the described error (stage complete) and handed to the error handler.
func TestMiddlewareLogsAFailedComplete(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		client := b.Client(t)
		faults := &testharness.ScriptFaults{}
		client.AddHook(faults)
		coord, logs := newLogged(t, client, b.Prefix())
		warmScripts(t, coord)
		store, err := idempotency.New(coord)
		if err != nil {
			t.Fatal(err)
		}
		handled := &stageErrors{}
		mw, err := idempotency.NewMiddleware(store, idempotency.WithErrorHandler(handled.handle))
		if err != nil {
			t.Fatal(err)
		}
		h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusCreated) }))
		faults.Add(testharness.Fault{SHA: idempotency.CompleteScript.Hash(), Err: testharness.LoadingError})
		if rec := serveKey(h, "k1"); rec.Code != http.StatusCreated {
			t.Fatalf("answer %d, want the handler's 201", rec.Code)
		}
		out := logs.String()
		if !strings.Contains(out, "response not stored") || !strings.Contains(out, "stage=complete") ||
			!strings.Contains(out, "transient: server replied LOADING") || strings.Contains(out, b.Prefix()) {
			t.Fatalf("log:\n%s\nwant the failed Complete described, without keys", out)
		}
		if calls := handled.get(); len(calls) != 1 || !strings.HasPrefix(calls[0], "complete: ") || !strings.Contains(calls[0], ": LOADING") {
			t.Fatalf("error handler calls %q, want one for stage complete", calls)
		}
	}, testharness.Only("miniredis", "redis7"))
}
