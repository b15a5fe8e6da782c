package idempotency_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/idempotency"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// httpFixture is an httptest server running a handler behind the
// middleware, on one backend.
type httpFixture struct {
	*fixture
	srv  *httptest.Server
	runs atomic.Int32 // handler executions
}

func newHTTP(t *testing.T, b *testharness.Backend, h http.HandlerFunc, opts ...idempotency.MiddlewareOption) *httpFixture {
	t.Helper()
	hf := &httpFixture{fixture: newFixture(t, b)}
	mw, err := idempotency.NewMiddleware(hf.store, opts...)
	if err != nil {
		t.Fatalf("NewMiddleware: %v", err)
	}
	counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hf.runs.Add(1)
		h(w, r)
	})
	hf.srv = httptest.NewUnstartedServer(mw(counted))
	hf.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	hf.srv.Start()
	t.Cleanup(hf.srv.Close)
	return hf
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) replayed() bool { return r.header.Get(idempotency.HeaderReplayed) == "true" }

// send sends one request; keys are sent as given (nil: no header).
func (hf *httpFixture) send(t *testing.T, method, path string, keys []string, body string, hdr ...string) reply {
	t.Helper()
	r, err := hf.trySend(method, path, keys, body, hdr...)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

func (hf *httpFixture) trySend(method, path string, keys []string, body string, hdr ...string) (reply, error) {
	req, err := http.NewRequest(method, hf.srv.URL+path, strings.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	for _, k := range keys {
		req.Header.Add(idempotency.HeaderKey, k)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := hf.srv.Client().Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

func key(k string) []string { return []string{k} }

type problemBody struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
}

// wantProblem checks an RFC 9457 problem details answer.
func wantProblem(t *testing.T, r reply, status int, typ string) problemBody {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d, want %d (body %s)", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type = %q, want application/problem+json", ct)
	}
	if cc := r.header.Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("Cache-Control = %q, want no-store", cc)
	}
	var p problemBody
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("problem body %q: %v", r.body, err)
	}
	if p.Type != typ || p.Status != status || p.Title == "" || p.Detail == "" {
		t.Fatalf("problem = %+v, want type %s and status %d with a title and detail", p, typ, status)
	}
	return p
}

// payment is a payment-like handler: it creates a resource and describes
// it in JSON, echoing the request body.
func payment(delay time.Duration) http.HandlerFunc {
	var seq atomic.Int32
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		time.Sleep(delay)
		id := seq.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", fmt.Sprintf("/payments/%d", id))
		w.Header().Set("X-Unchosen", "not replayed")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%d,"request":%q}`, id, body)
	}
}

func TestMiddlewareConcurrentDuplicatesRunOnce(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		for _, wait := range []time.Duration{0, 10 * time.Second} {
			t.Run(fmt.Sprintf("wait=%v", wait), func(t *testing.T) {
				hf := newHTTP(t, b, payment(100*time.Millisecond), idempotency.WithWaitForOriginal(wait))
				const n = 50
				var (
					wg      sync.WaitGroup
					mu      sync.Mutex
					replies []reply
					errs    []error
					start   = make(chan struct{})
				)
				for range n {
					wg.Go(func() {
						<-start
						r, err := hf.trySend("POST", "/payments", key(t.Name()), `{"amount":100}`)
						mu.Lock()
						defer mu.Unlock()
						if err != nil {
							errs = append(errs, err)
							return
						}
						replies = append(replies, r)
					})
				}
				close(start)
				wg.Wait()
				if len(errs) > 0 {
					t.Fatalf("%d requests failed, first: %v", len(errs), errs[0])
				}
				var original, replayed, conflicts int
				var first []byte
				for _, r := range replies {
					switch {
					case r.status == http.StatusCreated && !r.replayed():
						original++
						first = r.body
					case r.status == http.StatusCreated:
						replayed++
					case r.status == http.StatusConflict:
						conflicts++
						wantProblem(t, r, http.StatusConflict, idempotency.ProblemInProgress)
					default:
						t.Fatalf("unexpected answer %d %s", r.status, r.body)
					}
				}
				for _, r := range replies {
					if r.status == http.StatusCreated && !bytes.Equal(r.body, first) {
						t.Fatalf("a replay differs: %s vs %s", r.body, first)
					}
				}
				if hf.runs.Load() != 1 || original != 1 || original+replayed+conflicts != n {
					t.Fatalf("handler ran %d times; %d original, %d replays, %d conflicts", hf.runs.Load(), original, replayed, conflicts)
				}
				if wait > 0 && conflicts != 0 {
					t.Fatalf("waiting for the original still gave %d conflicts", conflicts)
				}
				t.Logf("%s: %d concurrent identical requests: handler ran %d time(s); %d original, %d replayed, %d answered 409",
					b.Name, n, hf.runs.Load(), original, replayed, conflicts)
				// A later retry replays too.
				if r := hf.send(t, "POST", "/payments", key(t.Name()), `{"amount":100}`); !r.replayed() || !bytes.Equal(r.body, first) {
					t.Fatalf("later retry: %d %s replayed=%v", r.status, r.body, r.replayed())
				}
			})
		}
	})
}

func TestMiddlewareReplaysStatusHeadersAndBody(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		var seq atomic.Int32
		hf := newHTTP(t, b, func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			n := seq.Add(1)
			switch r.URL.Path {
			case "/silent": // writes nothing: net/http sends 200, empty
				w.Header().Set("X-Cost", "0")
				return
			case "/nocontent":
				w.Header().Set("X-Cost", "1")
				w.WriteHeader(http.StatusNoContent)
				return
			}
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Location", fmt.Sprintf("/things/%d", n))
			w.Header().Add("X-Cost", "3")
			w.Header().Add("X-Cost", "4")
			w.Header().Set("X-Unchosen", fmt.Sprint(n))
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte{0, 0xff, 0})
			_, _ = w.Write(body) // the handler sees the request body unchanged
		}, idempotency.WithReplayHeaders("content-type", "Location", "x-cost"))

		first := hf.send(t, "POST", "/things?x=1", key("k1"), "payload\x00")
		want := append([]byte{0, 0xff, 0}, "payload\x00"...)
		if first.status != http.StatusAccepted || !bytes.Equal(first.body, want) || first.replayed() {
			t.Fatalf("first = %d %q replayed=%v", first.status, first.body, first.replayed())
		}
		again := hf.send(t, "POST", "/things?x=1", key("k1"), "payload\x00")
		if !again.replayed() || again.status != http.StatusAccepted || !bytes.Equal(again.body, want) {
			t.Fatalf("replay = %d %q replayed=%v", again.status, again.body, again.replayed())
		}
		for _, h := range []string{"Content-Type", "Location"} {
			if again.header.Get(h) != first.header.Get(h) {
				t.Fatalf("replayed %s = %q, want %q", h, again.header.Get(h), first.header.Get(h))
			}
		}
		if got := again.header.Values("X-Cost"); strings.Join(got, ",") != "3,4" {
			t.Fatalf("replayed X-Cost = %v, want [3 4]", got)
		}
		if again.header.Get("X-Unchosen") != "" {
			t.Fatal("a header not chosen for replay was replayed")
		}
		if hf.runs.Load() != 1 {
			t.Fatalf("handler ran %d times", hf.runs.Load())
		}

		hf.send(t, "POST", "/silent", key("k2"), "")
		silent := hf.send(t, "POST", "/silent", key("k2"), "")
		if !silent.replayed() || silent.status != http.StatusOK || len(silent.body) != 0 || silent.header.Get("X-Cost") != "0" {
			t.Fatalf("silent replay = %d %q %v", silent.status, silent.body, silent.header)
		}
		hf.send(t, "POST", "/nocontent", key("k3"), "")
		nc := hf.send(t, "POST", "/nocontent", key("k3"), "")
		if !nc.replayed() || nc.status != http.StatusNoContent || len(nc.body) != 0 || nc.header.Get("X-Cost") != "1" {
			t.Fatalf("204 replay = %d %q %v", nc.status, nc.body, nc.header)
		}
		if hf.runs.Load() != 3 {
			t.Fatalf("handler ran %d times, want 3", hf.runs.Load())
		}
	})
}

func TestMiddlewareDifferentRequestSameKey(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		hf := newHTTP(t, b, payment(0))
		hf.send(t, "POST", "/payments?currency=EUR", key("k"), `{"amount":100}`)
		for _, tc := range []struct{ method, path, body string }{
			{"POST", "/payments?currency=EUR", `{"amount":999}`}, // another body
			{"POST", "/payments?currency=USD", `{"amount":100}`}, // another query
			{"POST", "/refunds?currency=EUR", `{"amount":100}`},  // another path
			{"PUT", "/payments?currency=EUR", `{"amount":100}`},  // another method
		} {
			r := hf.send(t, tc.method, tc.path, key("k"), tc.body)
			p := wantProblem(t, r, http.StatusUnprocessableEntity, idempotency.ProblemKeyReused)
			if strings.Contains(string(r.body), "amount") || strings.Contains(p.Detail, "payments/") {
				t.Fatalf("a 422 revealed the stored response: %s", r.body)
			}
		}
		if hf.runs.Load() != 1 {
			t.Fatalf("handler ran %d times", hf.runs.Load())
		}
		// A custom fingerprint that ignores the query.
		hf2 := newHTTP(t, b, payment(0), idempotency.WithRequestFingerprint(func(r *http.Request, body []byte) string {
			return r.Method + " " + r.URL.Path + " " + string(body)
		}))
		hf2.send(t, "POST", "/payments?trace=1", key("k2"), "same")
		if r := hf2.send(t, "POST", "/payments?trace=2", key("k2"), "same"); !r.replayed() {
			t.Fatalf("custom fingerprint: %d, want a replay", r.status)
		}
	})
}

// One middleware (a func(http.Handler) http.Handler) wraps several routes:
// each wrapped handler runs its own next, and all share one key space, so
// a key used on one route is a reused key on another.
func TestMiddlewareWrapsSeveralRoutes(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		f := newFixture(t, b)
		mw, err := idempotency.NewMiddleware(f.store)
		if err != nil {
			t.Fatalf("NewMiddleware: %v", err)
		}
		var runsA, runsB atomic.Int32
		mux := http.NewServeMux()
		mux.Handle("POST /a", mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			runsA.Add(1)
			w.WriteHeader(http.StatusCreated)
			fmt.Fprint(w, "a")
		})))
		mux.Handle("POST /b", mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			runsB.Add(1)
			w.WriteHeader(http.StatusAccepted)
			fmt.Fprint(w, "b")
		})))
		hf := &httpFixture{fixture: f, srv: httptest.NewServer(mux)}
		t.Cleanup(hf.srv.Close)

		if r := hf.send(t, "POST", "/a", key("k"), "x"); r.status != http.StatusCreated || string(r.body) != "a" || r.replayed() {
			t.Fatalf("first /a: %d %q replayed=%v, want 201 \"a\" not replayed", r.status, r.body, r.replayed())
		}
		if r := hf.send(t, "POST", "/a", key("k"), "x"); r.status != http.StatusCreated || string(r.body) != "a" || !r.replayed() {
			t.Fatalf("retry /a: %d %q replayed=%v, want the replay of 201 \"a\"", r.status, r.body, r.replayed())
		}
		wantProblem(t, hf.send(t, "POST", "/b", key("k"), "x"), http.StatusUnprocessableEntity, idempotency.ProblemKeyReused)
		if r := hf.send(t, "POST", "/b", key("k2"), "x"); r.status != http.StatusAccepted || string(r.body) != "b" || r.replayed() {
			t.Fatalf("/b with its own key: %d %q replayed=%v, want 202 \"b\" not replayed", r.status, r.body, r.replayed())
		}
		if a, b := runsA.Load(), runsB.Load(); a != 1 || b != 1 {
			t.Fatalf("handlers ran /a %d and /b %d times, want 1 and 1", a, b)
		}
	})
}

func TestMiddlewareKeyValidation(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		hf := newHTTP(t, b, payment(0), idempotency.WithKeyRequired(true), idempotency.WithMaxKeyLength(40))
		wantProblem(t, hf.send(t, "POST", "/p", nil, "{}"), http.StatusBadRequest, idempotency.ProblemKeyMissing)
		for name, keys := range map[string][]string{
			"too long":        key(strings.Repeat("k", 41)),
			"too long quoted": key(`"` + strings.Repeat("k", 41) + `"`),
			"two fields":      {"a", "b"},
			"empty quoted":    key(`""`),
			"unclosed quote":  key(`"abc`),
			"after quote":     key(`"abc"x`),
			"bad escape":      key(`"a\bc"`),
			"not ascii":       key("clé"),
		} {
			p := wantProblem(t, hf.send(t, "POST", "/p", keys, "{}"), http.StatusBadRequest, idempotency.ProblemKeyInvalid)
			if name == "too long" && !strings.Contains(p.Detail, "41") {
				t.Errorf("too long: detail %q does not give the length", p.Detail)
			}
		}
		if n := hf.runs.Load(); n != 0 {
			t.Fatalf("handler ran %d times for bad keys", n)
		}
		// At the bound is fine; a quoted sf-string names the same key as
		// its bare form, escapes included.
		if r := hf.send(t, "POST", "/p", key(strings.Repeat("k", 40)), "{}"); r.status != http.StatusCreated {
			t.Fatalf("key at the bound: %d", r.status)
		}
		hf.send(t, "POST", "/p", key(`"8e03978e-40d5"`), "{}")
		if r := hf.send(t, "POST", "/p", key("8e03978e-40d5"), "{}"); !r.replayed() {
			t.Fatal("bare form of a quoted key was not the same key")
		}
		hf.send(t, "POST", "/p", key(`"a\"b\\c"`), "{}")
		if r := hf.send(t, "POST", "/p", key(`a"b\c`), "{}"); !r.replayed() {
			t.Fatal("escaped quoted key was not unescaped")
		}
		if n := hf.runs.Load(); n != 3 {
			t.Fatalf("handler ran %d times, want 3", n)
		}

		// Keys optional: a request without one goes straight through.
		opt := newHTTP(t, b, payment(0))
		opt.send(t, "POST", "/p", nil, "{}")
		if r := opt.send(t, "POST", "/p", nil, "{}"); r.status != http.StatusCreated || r.replayed() {
			t.Fatalf("keyless request: %d replayed=%v", r.status, r.replayed())
		}
		if n := opt.runs.Load(); n != 2 {
			t.Fatalf("keyless requests ran the handler %d times, want 2", n)
		}
	})
}

// One Idempotency-Key field line holding a list ("a, b": what a proxy
// makes of two lines, folding them into one) is refused exactly as two
// lines are: the same 400 and the same problem body, the handler not run
// and nothing sent to Redis. A comma inside a quoted key is part of the
// key.
func TestMiddlewareKeyListIsRefusedAsTwoFields(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		client := b.Client(t)
		coord, err := coordination.New(client, coordination.WithKeyPrefix(b.Prefix()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = coord.Shutdown(context.Background()) })
		store, err := idempotency.New(coord)
		if err != nil {
			t.Fatal(err)
		}
		mw, err := idempotency.NewMiddleware(store)
		if err != nil {
			t.Fatal(err)
		}
		var runs atomic.Int32
		h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			runs.Add(1)
			w.WriteHeader(http.StatusCreated)
		}))
		send := func(values ...string) *httptest.ResponseRecorder {
			req := httptest.NewRequest("POST", "/payments", strings.NewReader("{}"))
			for _, v := range values {
				req.Header.Add(idempotency.HeaderKey, v)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			return w
		}
		sent := testharness.CountCommands(client)
		two := send("a", "b")
		const body = `{"type":"` + idempotency.ProblemKeyInvalid + `","title":"Invalid Idempotency-Key","status":400,` +
			`"detail":"Send exactly one Idempotency-Key header field."}` + "\n"
		if two.Code != http.StatusBadRequest || two.Body.String() != body ||
			two.Header().Get("Content-Type") != "application/problem+json" || two.Header().Get("Cache-Control") != "no-store" {
			t.Fatalf("two lines: %d %v %q, want 400 with %q", two.Code, two.Header(), two.Body.String(), body)
		}
		for _, v := range []string{"a, b", "a,b", `"a", "b"`, `"a","b"`, `"a" , b`, "a,", `"a",`, ",a", "8e03978e-40d5, 8e03978e-40d5"} {
			w := send(v)
			if w.Code != two.Code || w.Body.String() != two.Body.String() || w.Header().Get("Content-Type") != two.Header().Get("Content-Type") ||
				w.Header().Get("Cache-Control") != two.Header().Get("Cache-Control") {
				t.Errorf("one line %q: %d %q, want the answer to two lines: %d %q", v, w.Code, w.Body.String(), two.Code, two.Body.String())
			}
		}
		if n := sent.Count(); n != 0 || runs.Load() != 0 {
			t.Fatalf("refused keys sent %v to Redis and ran the handler %d times", sent.Names(), runs.Load())
		}
		// A comma inside a quoted key belongs to the key.
		if w := send(`"a, b"`); w.Code != http.StatusCreated || runs.Load() != 1 {
			t.Fatalf(`quoted "a, b": %d, handler ran %d times`, w.Code, runs.Load())
		}
		if n := b.Raw(t).Exists(context.Background(), b.Key(idempotency.StoreKey("", "a, b"))).Val(); n != 1 {
			t.Fatalf("the quoted key's claim was not stored under %q", "a, b")
		}
	})
}

func TestMiddlewareLargeResponseIsNotStored(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		big := bytes.Repeat([]byte("0123456789abcdef"), 64) // 1 KiB
		hf := newHTTP(t, b, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK)
			if r.URL.Path == "/big" {
				for i := 0; i < len(big); i += 100 { // several writes
					_, _ = w.Write(big[i:min(i+100, len(big))])
				}
				return
			}
			_, _ = w.Write(big[:512])
		}, idempotency.WithMaxResponseBytes(512))
		r := hf.send(t, "GET", "/big", key("big"), "")
		if r.status != http.StatusOK || !bytes.Equal(r.body, big) {
			t.Fatalf("large response not passed through intact: %d, %d bytes", r.status, len(r.body))
		}
		if hf.exists(t, idempotency.StoreKey("", "big")) {
			t.Fatal("a response over the bound left a claim or record")
		}
		if r := hf.send(t, "GET", "/big", key("big"), ""); r.replayed() || !bytes.Equal(r.body, big) {
			t.Fatal("a response over the bound was replayed")
		}
		if n := hf.runs.Load(); n != 2 {
			t.Fatalf("handler ran %d times, want 2 (not stored, so run again)", n)
		}
		// Exactly at the bound is stored.
		hf.send(t, "GET", "/fits", key("fits"), "")
		if r := hf.send(t, "GET", "/fits", key("fits"), ""); !r.replayed() || !bytes.Equal(r.body, big[:512]) {
			t.Fatal("a response at the bound was not replayed")
		}
	})
}

func TestMiddlewareReplayPolicy(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		var next atomic.Int32 // status the handler answers next
		hf := newHTTP(t, b, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(int(next.Load()))
			fmt.Fprintf(w, "status %d", next.Load())
		})
		for _, status := range []int{500, 503, 409, 429, 401} {
			k := fmt.Sprint("k", status)
			next.Store(int32(status))
			before := hf.runs.Load()
			if r := hf.send(t, "POST", "/p", key(k), ""); r.status != status {
				t.Fatalf("first answer %d, want %d", r.status, status)
			}
			if hf.exists(t, idempotency.StoreKey("", k)) {
				t.Fatalf("a %d response left its claim", status)
			}
			next.Store(201)
			if r := hf.send(t, "POST", "/p", key(k), ""); r.status != 201 || r.replayed() {
				t.Fatalf("retry after %d: %d replayed=%v, want the handler to run again", status, r.status, r.replayed())
			}
			if r := hf.send(t, "POST", "/p", key(k), ""); r.status != 201 || !r.replayed() {
				t.Fatalf("third request after %d: %d replayed=%v, want the 201 replayed", status, r.status, r.replayed())
			}
			if got := hf.runs.Load() - before; got != 2 {
				t.Fatalf("after a %d the handler ran %d times, want 2", status, got)
			}
		}
		// Deterministic 4xx are replayed.
		next.Store(404)
		hf.send(t, "POST", "/p", key("k404"), "")
		if r := hf.send(t, "POST", "/p", key("k404"), ""); r.status != 404 || !r.replayed() {
			t.Fatalf("404 retry: %d replayed=%v", r.status, r.replayed())
		}

		// A custom policy may store server errors.
		all := newHTTP(t, b, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) },
			idempotency.WithReplayPolicy(func(int) bool { return true }))
		all.send(t, "POST", "/p", key("k"), "")
		if r := all.send(t, "POST", "/p", key("k"), ""); r.status != 500 || !r.replayed() {
			t.Fatalf("custom policy: %d replayed=%v", r.status, r.replayed())
		}
	})
}

func TestMiddlewareInProgressAnswers409(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		entered, release := make(chan struct{}), make(chan struct{})
		hf := newHTTP(t, b, func(w http.ResponseWriter, r *http.Request) {
			close(entered)
			<-release
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte("created"))
		}, idempotency.WithRetryAfter(2500*time.Millisecond), idempotency.WithClaimTTL(30*time.Second))
		done := make(chan reply, 1)
		go func() {
			r, _ := hf.trySend("POST", "/p", key("k"), "x")
			done <- r
		}()
		<-entered
		if got := hf.pttl(t, idempotency.StoreKey("", "k")); got <= 0 || got > 30*time.Second {
			t.Fatalf("pending claim PTTL = %v, want the claim ttl", got)
		}
		r := hf.send(t, "POST", "/p", key("k"), "x")
		wantProblem(t, r, http.StatusConflict, idempotency.ProblemInProgress)
		if ra := r.header.Get("Retry-After"); ra != "3" {
			t.Fatalf("Retry-After = %q, want 3 (2.5s rounded up)", ra)
		}
		// A different request under the same key is a 422, even while in progress.
		wantProblem(t, hf.send(t, "POST", "/p", key("k"), "y"), http.StatusUnprocessableEntity, idempotency.ProblemKeyReused)
		close(release)
		if first := <-done; first.status != http.StatusCreated {
			t.Fatalf("original = %d", first.status)
		}
		if r := hf.send(t, "POST", "/p", key("k"), "x"); !r.replayed() || string(r.body) != "created" {
			t.Fatalf("after completion: %d %q", r.status, r.body)
		}
	})
}

func TestMiddlewareWaitBoundThen409(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		release := make(chan struct{})
		entered := make(chan struct{})
		hf := newHTTP(t, b, func(w http.ResponseWriter, r *http.Request) {
			close(entered)
			<-release
		}, idempotency.WithWaitForOriginal(80*time.Millisecond))
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = hf.trySend("POST", "/p", key("k"), "")
		}()
		<-entered
		start := time.Now()
		wantProblem(t, hf.send(t, "POST", "/p", key("k"), ""), http.StatusConflict, idempotency.ProblemInProgress)
		if d := time.Since(start); d < 80*time.Millisecond {
			t.Fatalf("answered 409 after %v, before the wait bound", d)
		}
		close(release)
		<-done
	})
}

func TestMiddlewareNamespaces(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		hf := newHTTP(t, b, payment(0), idempotency.WithNamespace(func(r *http.Request) string {
			return r.Header.Get("X-Tenant")
		}))
		a := hf.send(t, "POST", "/payments", key("same"), "{}", "X-Tenant", "acme")
		other := hf.send(t, "POST", "/payments", key("same"), "{}", "X-Tenant", "globex")
		if other.replayed() || bytes.Equal(a.body, other.body) {
			t.Fatal("a tenant was served another tenant's response")
		}
		if r := hf.send(t, "POST", "/payments", key("same"), "{}", "X-Tenant", "acme"); !r.replayed() || !bytes.Equal(r.body, a.body) {
			t.Fatal("a tenant's own retry was not replayed")
		}
		// Namespace and key cannot be confused by the separator.
		hf.send(t, "POST", "/payments", key("b:c"), "{}", "X-Tenant", "a")
		if r := hf.send(t, "POST", "/payments", key("c"), "{}", "X-Tenant", "a:b"); r.replayed() {
			t.Fatal("namespace a + key b:c collided with namespace a:b + key c")
		}
		if n := hf.runs.Load(); n != 4 {
			t.Fatalf("handler ran %d times, want 4", n)
		}
	})
}

func TestMiddlewareBodyLimitAndTTLs(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		hf := newHTTP(t, b, payment(0), idempotency.WithMaxRequestBytes(8), idempotency.WithResponseTTL(time.Second))
		// The response TTL (1 s) covers a send, a PTTL read and a second send
		// on a loaded machine under -race (100 ms did not: the response
		// expired before the PTTL read on the cluster backend).
		wantProblem(t, hf.send(t, "POST", "/p", key("k"), "123456789"), http.StatusRequestEntityTooLarge, idempotency.ProblemRequestTooLarge)
		if n := hf.runs.Load(); n != 0 {
			t.Fatal("handler ran for an oversized body")
		}
		hf.send(t, "POST", "/p", key("k"), "12345678")
		if got := hf.pttl(t, idempotency.StoreKey("", "k")); got <= 0 || got > time.Second {
			t.Fatalf("stored response PTTL = %v, want the response ttl", got)
		}
		if r := hf.send(t, "POST", "/p", key("k"), "12345678"); !r.replayed() {
			t.Fatal("not replayed within the response ttl")
		}
		b.Advance(1100 * time.Millisecond)
		if r := hf.send(t, "POST", "/p", key("k"), "12345678"); r.replayed() {
			t.Fatal("replayed after the response ttl")
		}
		if n := hf.runs.Load(); n != 2 {
			t.Fatalf("handler ran %d times, want 2", n)
		}
	})
}

// A panicking handler may have had effects: its claim is marked failed
// (as Do marks it), so a retry, such as net/http's automatic re-send after
// the broken connection, gets 409 "outcome unknown" with a Retry-After
// instead of running the handler again; once the record is forgotten the
// handler runs.
func TestMiddlewarePanicMarksClaimFailed(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		var calls atomic.Int32
		hf := newHTTP(t, b, func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1) == 1 {
				panic(http.ErrAbortHandler)
			}
			w.WriteHeader(http.StatusCreated)
		}, idempotency.WithClaimTTL(time.Minute))
		if _, err := hf.trySend("POST", "/p", key("k"), ""); err == nil {
			t.Fatal("the aborted request got a response")
		}
		if !hf.exists(t, idempotency.StoreKey("", "k")) {
			t.Fatal("claim abandoned after the handler panicked")
		}
		r := hf.send(t, "POST", "/p", key("k"), "")
		p := wantProblem(t, r, http.StatusConflict, idempotency.ProblemOutcomeUnknown)
		if p.Title != "Outcome of the original request unknown" {
			t.Fatalf("title %q", p.Title)
		}
		ra, err := strconv.Atoi(r.header.Get("Retry-After"))
		if err != nil || ra < 58 || ra > 60 {
			t.Fatalf("Retry-After %q, want the record's remaining minute", r.header.Get("Retry-After"))
		}
		if n := calls.Load(); n != 1 {
			t.Fatalf("handler ran %d times, want once", n)
		}
		if ok, err := hf.store.Forget(t.Context(), idempotency.StoreKey("", "k")); !ok || err != nil {
			t.Fatalf("Forget = %v, %v", ok, err)
		}
		if r := hf.send(t, "POST", "/p", key("k"), ""); r.status != http.StatusCreated {
			t.Fatalf("after Forget: %d, want 201", r.status)
		}
	})
}

func TestMiddlewareCorruptRecordIs503(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		hf := newHTTP(t, b, payment(0))
		// A claim completed through the Store API with bytes that are not
		// a stored response.
		c := hf.begin(t, idempotency.StoreKey("", "k"), time.Minute, idempotency.WithFingerprint(
			idempotency.DefaultFingerprint(httptest.NewRequest("POST", "/p", nil), nil)))
		hf.complete(t, idempotency.StoreKey("", "k"), c.Owner, []byte("not a response"))
		r := hf.send(t, "POST", "/p", key("k"), "")
		wantProblem(t, r, http.StatusServiceUnavailable, idempotency.ProblemUnavailable)
		if r.header.Get("Retry-After") == "" || hf.runs.Load() != 0 {
			t.Fatal("503 without Retry-After, or the handler ran")
		}
	})
}

func TestNewMiddlewareValidatesOptions(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		f := newFixture(t, b)
		counter := testharness.CountCommands(f.coord.Client())
		for _, tc := range []struct {
			arg string
			opt idempotency.MiddlewareOption
		}{
			{"claimTTL", idempotency.WithClaimTTL(0)},
			{"responseTTL", idempotency.WithResponseTTL(time.Microsecond)},
			{"maxKeyLength", idempotency.WithMaxKeyLength(0)},
			{"maxRequestBytes", idempotency.WithMaxRequestBytes(-1)},
			{"maxResponseBytes", idempotency.WithMaxResponseBytes(-1)},
			{"retryAfter", idempotency.WithRetryAfter(0)},
			{"waitForOriginal", idempotency.WithWaitForOriginal(-time.Second)},
			{"replayPolicy", idempotency.WithReplayPolicy(nil)},
			{"requestFingerprint", idempotency.WithRequestFingerprint(nil)},
			{"namespace", idempotency.WithNamespace(nil)},
			{"errorHandler", idempotency.WithErrorHandler(nil)},
		} {
			_, err := idempotency.NewMiddleware(f.store, tc.opt)
			if name, ok := check.ArgumentName(err); !ok || name != tc.arg || !errors.Is(err, coordination.ErrInvalidArgument) {
				t.Errorf("%s: err = %v", tc.arg, err)
			}
		}
		if counter.Count() != 0 {
			t.Fatal("NewMiddleware sent commands")
		}
	})
}

// The middleware keeps a request's claim alive while its handler runs past
// the claim TTL (duplicates get 409 throughout, the handler runs once) and
// gives the handler the claim's fencing token; with WithClaimKeepAlive(false)
// the claim expires under a slow handler and a duplicate runs it again.
// The TTL leaves the keep-alive (a renewal every ttl/3) a second of slack:
// with 300 ms, a loaded machine that did not schedule the renewal for 200
// ms lost the claim (rightly) and failed the test.
func TestMiddlewareKeepAliveAndFence(t *testing.T) {
	t.Parallel() // sleeps: overlap with the package's other tests
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		const ttl = 1500 * time.Millisecond
		for _, keep := range []bool{true, false} {
			var fences []int64
			var mu sync.Mutex
			hf := newHTTP(t, b, func(w http.ResponseWriter, r *http.Request) {
				fence, ok := idempotency.FenceFrom(r.Context())
				if !ok {
					t.Error("FenceFrom: no fence in the handler's context")
				}
				mu.Lock()
				fences = append(fences, fence)
				first := len(fences) == 1
				mu.Unlock()
				if first {
					time.Sleep(4 * ttl)
				}
				if err := r.Context().Err(); err != nil {
					t.Errorf("the handler's context ended: %v", context.Cause(r.Context()))
				}
				_, _ = w.Write([]byte("ok"))
			}, idempotency.WithClaimTTL(ttl), idempotency.WithClaimKeepAlive(keep))
			done := make(chan reply, 1)
			k := key(fmt.Sprint("k", keep))
			go func() {
				r, _ := hf.trySend("POST", "/p", k, "x")
				done <- r
			}()
			time.Sleep(3 * ttl)
			dup := hf.send(t, "POST", "/p", k, "x")
			if first := <-done; first.status != http.StatusOK {
				t.Fatalf("keep-alive %v: original = %d", keep, first.status)
			}
			mu.Lock()
			got := append([]int64(nil), fences...)
			mu.Unlock()
			if keep {
				wantProblem(t, dup, http.StatusConflict, idempotency.ProblemInProgress)
				if len(got) != 1 || got[0] < 3 {
					t.Fatalf("keep-alive: handler fences %v, want one run with a fence", got)
				}
				continue
			}
			if dup.status != http.StatusOK || len(got) != 2 || got[1] <= got[0] {
				t.Fatalf("without keep-alive: duplicate = %d, fences %v; want a second run with a larger fence", dup.status, got)
			}
		}
	}, testharness.RealOnly())
}
