package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	coordination "github.com/coordkit/coordination"

	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// A local limiter decides as the scripts do: the same random sequence of
// decisions (probes, batches, refundable grants), refunds of earlier
// grants, settlements of reservations and updates to other settings, at
// random times, on a Redis limiter and on a local one whose clock is the
// server's, gets the same answers: granted or not, Available and
// RetryAfter, whether a refund gave anything back, and Settle's figure.
// (miniredis: its clock moves only when the test moves it.)
func TestLocalAgreesWithTheScripts(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		c := b.Coordinator(t)
		clock := withLocalClock(func() int64 { return b.Now().UnixMicro() })
		for _, pair := range [][2]Settings{
			{FixedWindow{Limit: 7, Window: 700 * time.Millisecond}, FixedWindow{Limit: 5, Window: 400 * time.Millisecond}},
			{SlidingWindow{Limit: 7, Window: 700 * time.Millisecond, Segments: 4}, SlidingWindow{Limit: 9, Window: 500 * time.Millisecond, Segments: 3}},
			{TokenBucket{Limit: 7, TokensPerPeriod: 2, Period: 90 * time.Millisecond}, TokenBucket{Limit: 5, TokensPerPeriod: 1, Period: 50 * time.Millisecond}},
			{GCRA{Burst: 7, Rate: 10, Period: time.Second}, GCRA{Burst: 4, Interval: time.Second / 3}},
			{Throttle{Limit: 4, Quiet: 25 * time.Millisecond}, Throttle{Limit: 3, Quiet: 20 * time.Millisecond}},
			{SlidingLog{Limit: 7, Window: 150 * time.Millisecond}, SlidingLog{Limit: 4, Window: 90 * time.Millisecond}},
			{Composite{Components: []Settings{
				TokenBucket{Limit: 6, TokensPerPeriod: 1, Period: 60 * time.Millisecond},
				SlidingWindow{Limit: 9, Window: 400 * time.Millisecond, Segments: 4},
				FixedWindow{Limit: 12, Window: 500 * time.Millisecond},
				GCRA{Burst: 8, Interval: 40 * time.Millisecond},
			}}, Composite{Components: []Settings{
				TokenBucket{Limit: 4, TokensPerPeriod: 2, Period: 80 * time.Millisecond},
				SlidingWindow{Limit: 5, Window: 300 * time.Millisecond, Segments: 2},
				FixedWindow{Limit: 9, Window: 300 * time.Millisecond},
				GCRA{Burst: 5, Rate: 20, Period: time.Second},
			}}},
		} {
			sp, err := pair[0].spec()
			if err != nil {
				t.Fatal(err)
			}
			name := sp.cfg
			rl, err := New(c, "agree:"+name, pair[0])
			if err != nil {
				t.Fatal(err)
			}
			ll, err := NewLocal(pair[0], clock)
			if err != nil {
				t.Fatal(err)
			}
			lims := [2]*Limiter{rl, ll}
			reserves := sp.alg == algBucket || sp.alg == algGCRA || sp.alg == algThrot || sp.alg == algLog
			var grants [2][]result
			var resv [2][]*Reservation
			rng := rand.New(rand.NewPCG(11, uint64(sp.alg)))
			cur, grantsSeen, refused := 0, 0, 0
			for step := range 800 {
				b.Advance(time.Duration(rng.IntN(30000)) * time.Microsecond)
				x, permits, k, actual := rng.IntN(20), rng.IntN(4), rng.IntN(8), rng.IntN(10)
				var got [2]string
				for i, l := range lims {
					switch {
					case x < 1: // other settings
						if i == 0 {
							cur = 1 - cur
						}
						if err := l.Update(ctx, pair[cur]); err != nil {
							t.Fatal(err)
						}
					case x < 4 && len(grants[i]) > 0: // a refund of an earlier grant
						k := k % len(grants[i])
						g := grants[i][k]
						grants[i] = append(grants[i][:k], grants[i][k+1:]...)
						ok, err := g.refund(ctx)
						got[i] = fmt.Sprint(ok, err)
					case x < 6 && reserves && len(resv[i]) > 0: // a settlement
						r := resv[i][0]
						resv[i] = resv[i][1:]
						n, err := r.Settle(ctx, actual)
						got[i] = fmt.Sprint(n, err)
					case x < 8 && reserves:
						r, err := l.Reserve(ctx, 1+permits%3)
						if err != nil {
							t.Fatal(err)
						}
						if r.Allowed() {
							resv[i] = append(resv[i], r)
						}
						got[i] = fmtDecision(r.Decision)
					default:
						r, err := l.allow(ctx, permits, refundable)
						if err != nil {
							t.Fatal(err)
						}
						if r.acquired && r.mark >= 0 && len(grants[i]) < 8 {
							grants[i] = append(grants[i], r)
						}
						got[i] = fmtDecision(r.decision())
						if i == 0 && permits > 0 {
							if r.acquired {
								grantsSeen++
							} else {
								refused++
							}
						}
					}
				}
				got[0] = strings.Replace(got[0], ` "agree:`+name+`"`, "", 1) // the local limiter's errors name no key
				if got[0] != got[1] {
					t.Fatalf("%s step %d (x=%d): Redis %s, local %s", name, step, x, got[0], got[1])
				}
				if len(grants[0]) != len(grants[1]) || len(resv[0]) != len(resv[1]) {
					t.Fatalf("%s step %d: %d/%d grants, %d/%d reservations", name, step, len(grants[0]), len(grants[1]), len(resv[0]), len(resv[1]))
				}
			}
			if grantsSeen < 30 || refused < 30 {
				t.Fatalf("%s: %d grants and %d refusals: the sequence does not exercise both", name, grantsSeen, refused)
			}
		}
	}, testharness.Only("miniredis"))
}

func fmtDecision(d Decision) string {
	ra, ok := d.RetryAfter()
	return fmt.Sprint(d.Allowed(), d.Available(), ra, ok)
}

// outage is a go-redis hook that refuses every command, as a stopped
// server does, while down is set (nothing reaches the server).
type outage struct {
	down  atomic.Bool
	hung  atomic.Bool  // commands wait until their context ends, as on a frozen server
	calls atomic.Int64 // commands and pipelines asked for, down or not
}

var errRefused = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}

func (o *outage) DialHook(next redis.DialHook) redis.DialHook { return next }

func (o *outage) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		o.calls.Add(1)
		if o.hung.Load() {
			<-ctx.Done()
			cmd.SetErr(ctx.Err())
			return ctx.Err()
		}
		if o.down.Load() {
			cmd.SetErr(errRefused)
			return errRefused
		}
		return next(ctx, cmd)
	}
}

func (o *outage) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		o.calls.Add(1)
		if o.down.Load() {
			for _, c := range cmds {
				c.SetErr(errRefused)
			}
			return errRefused
		}
		return next(ctx, cmds)
	}
}

// fakeMicros is a clock a test moves.
type fakeMicros struct{ us atomic.Int64 }

func (f *fakeMicros) now() int64              { return f.us.Load() }
func (f *fakeMicros) advance(d time.Duration) { f.us.Add(int64(d / time.Microsecond)) }

// outageCoord returns a coordinator whose client the outage hook can cut
// off (go-redis retries off: a refused call fails at once), recording
// metrics to reader and logging to logs.
func outageCoord(t *testing.T, b *testharness.Backend) (*coordination.Coordinator, *outage, *sdkmetric.ManualReader, *lockedBuffer) {
	t.Helper()
	client := b.Client(t, func(o *redis.Options) { o.MaxRetries, o.ContextTimeoutEnabled = -1, true })
	o := &outage{}
	client.AddHook(o)
	reader := sdkmetric.NewManualReader()
	logs := &lockedBuffer{}
	coord, err := coordination.New(client, coordination.WithKeyPrefix(b.Prefix()),
		coordination.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))),
		coordination.WithLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{ReplaceAttr: noTime}))))
	if err != nil {
		t.Fatal(err)
	}
	return coord, o, reader, logs
}

// counts returns the data points of the counter name, by their attribute
// set.
func counts(t *testing.T, reader *sdkmetric.ManualReader, name string) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
				out[p.Attributes.Encoded(attribute.DefaultEncoder())] = p.Value
			}
		}
	}
	return out
}

// WithLocalFallback: while Redis refuses every command a limiter decides
// locally with its per-replica share, without asking Redis again before
// the retry interval; the first call after it that Redis answers switches
// back; each switch is told to the callback, logged and counted once; a
// second outage starts from an empty local state.
func TestLocalFallback(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord, out, reader, logs := outageCoord(t, b)
		clock := &fakeMicros{}
		clock.us.Store(time.Now().UnixMicro())
		var told []bool
		var toldMu sync.Mutex
		sw := &fallbackSwitch{replicas: 3, now: clock.now, notify: func(local bool) {
			toldMu.Lock()
			told = append(told, local)
			toldMu.Unlock()
		}}
		l, err := New(coord, "{fb}:secret-key", FixedWindow{Limit: 10, Window: time.Minute}, withFallback(sw))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		allow := func(want bool, avail int64) Decision {
			t.Helper()
			d, err := l.Allow(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed() != want || d.Available() != avail || d.FailedOpen() {
				t.Fatalf("Allow: allowed %v available %d failed open %v, want %v %d", d.Allowed(), d.Available(), d.FailedOpen(), want, avail)
			}
			return d
		}
		for i := range 3 { // Redis: 10 per minute
			allow(true, int64(9-i))
		}
		out.down.Store(true)
		// Local: ceil(10/3) = 4 per minute in this replica.
		for i := range 4 {
			allow(true, int64(3-i))
		}
		d := allow(false, 0)
		if ra, ok := d.RetryAfter(); !ok || ra <= 59*time.Second || ra > time.Minute {
			t.Fatalf("local refusal RetryAfter %v %v, want about a minute", ra, ok)
		}
		// Redis is back, but the limiter does not ask it before the retry
		// interval: still local (and nothing sent).
		out.down.Store(false)
		calls := out.calls.Load()
		allow(false, 0)
		if n := out.calls.Load() - calls; n != 0 {
			t.Fatalf("a local decision before the retry interval sent %d commands", n)
		}
		// A try after the interval while Redis is still down stays local
		// and is not told again.
		out.down.Store(true)
		clock.advance(fallbackRetry)
		allow(false, 0)
		out.down.Store(false)
		clock.advance(fallbackRetry - time.Microsecond)
		allow(false, 0) // not yet: the failed try postponed the next
		clock.advance(time.Microsecond)
		allow(true, 6) // Redis again: 3 + this one of its 10
		allow(true, 5)
		out.down.Store(true)
		for i := range 4 { // a new outage: an empty local state
			allow(true, int64(3-i))
		}
		toldMu.Lock()
		if fmt.Sprint(told) != "[true false true]" {
			t.Errorf("told %v, want [true false true]", told)
		}
		toldMu.Unlock()
		got := counts(t, reader, "coordination.rate_limit.fallback")
		if got["to=local"] != 2 || got["to=redis"] != 1 || len(got) != 2 {
			t.Errorf("coordination.rate_limit.fallback = %v, want to=local 2, to=redis 1", got)
		}
		if n := counts(t, reader, "coordination.rate_limit.unavailable"); len(n) != 0 {
			t.Errorf("coordination.rate_limit.unavailable = %v: no failure mode applies", n)
		}
		want := "level=WARN msg=\"ratelimit: Redis cannot give decisions; deciding locally with the per-replica share of the limits\" replicas=3 retry_every=1s\n" +
			"level=INFO msg=\"ratelimit: Redis gives decisions again; local decisions ended\"\n" +
			"level=WARN msg=\"ratelimit: Redis cannot give decisions; deciding locally with the per-replica share of the limits\" replicas=3 retry_every=1s\n"
		if logs.String() != want {
			t.Errorf("logs:\n%s\nwant:\n%s", logs, want)
		}
		if strings.Contains(logs.String(), "secret") || strings.Contains(logs.String(), b.Prefix()) {
			t.Error("a log line names the key")
		}
	})
}

// wantResponse checks a response's status, its headers (exactly these of
// Content-Type, Cache-Control, Retry-After, RateLimit and RateLimit-Policy;
// "" for absent) and its body.
func wantResponse(t *testing.T, w *httptest.ResponseRecorder, status int, hdr map[string]string, body string) {
	t.Helper()
	if w.Code != status {
		t.Fatalf("status %d, want %d (body %s)", w.Code, status, w.Body)
	}
	for _, k := range []string{"Content-Type", "Cache-Control", "Retry-After", "RateLimit", "RateLimit-Policy"} {
		if got := w.Header().Values(k); strings.Join(got, ",") != hdr[k] || len(got) > 1 {
			t.Fatalf("header %s %q, want %q", k, got, hdr[k])
		}
	}
	if w.Body.String() != body {
		t.Fatalf("body %s\nwant %s", w.Body, body)
	}
}

// The in-process instance guard of the issue: with Redis down, a policy
// on a local concurrency limiter keeps guarding the instance and a Redis
// limiter with a local fallback keeps limiting with its share, while a
// Redis limiter without one answers "unavailable" (503, no
// violated-policies, no Retry-After), never as a violated policy, under
// FailClosed as under ReturnError.
func TestMiddlewareInstanceGuardWhileRedisIsDown(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		coord, out, _, _ := outageCoord(t, b)
		guard, err := NewLocalConcurrency(1)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = guard.Close() })
		api, err := New(coord, "{mwg}:api", FixedWindow{Limit: 4, Window: time.Minute}, WithLocalFallback(2, nil))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = api.Close() })
		quiet := WithLogger(slog.New(slog.DiscardHandler))
		mw, err := NewMiddleware([]Policy{
			{Name: "instance", Concurrency: guard, Status: http.StatusServiceUnavailable},
			{Name: "api", Limiter: api},
		}, quiet)
		if err != nil {
			t.Fatal(err)
		}
		var inside chan struct{}
		release := make(chan struct{})
		h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if inside != nil {
				close(inside)
				<-release
			}
			w.WriteHeader(http.StatusNoContent)
		}))
		none := map[string]string{}
		wantResponse(t, serve(t, h, "/work"), http.StatusNoContent, none, "") // Redis: 3 of 4 left
		out.down.Store(true)
		// Redis down: one request in the handler holds the guard; another
		// is refused by it, as a violated policy of this instance.
		inside = make(chan struct{})
		done := make(chan *httptest.ResponseRecorder)
		go func() { done <- serve(t, h, "/work") }()
		<-inside
		problemHdr := map[string]string{"Content-Type": "application/problem+json", "Cache-Control": "no-store"}
		wantResponse(t, serve(t, h, "/work"), http.StatusServiceUnavailable, problemHdr,
			`{"type":"https://www.rfc-editor.org/rfc/rfc9110#section-15.6.4","title":"Service Unavailable","status":503,"detail":"The service cannot accept more work right now.","instance":"/work","violated-policies":["instance"]}`+"\n")
		close(release)
		wantResponse(t, <-done, http.StatusNoContent, none, "")
		inside = nil
		// The api policy decides locally: ceil(4/2) = 2 per minute here,
		// one of them taken by the request above.
		wantResponse(t, serve(t, h, "/work"), http.StatusNoContent, none, "")
		w := serve(t, h, "/work")
		hdr := map[string]string{"Content-Type": "application/problem+json", "Cache-Control": "no-store", "Retry-After": w.Header().Get("Retry-After")}
		if ra, _ := strconv.Atoi(hdr["Retry-After"]); ra < 59 || ra > 60 {
			t.Fatalf("Retry-After %q, want about a minute", hdr["Retry-After"])
		}
		wantResponse(t, w, http.StatusTooManyRequests, hdr,
			`{"type":"https://www.rfc-editor.org/rfc/rfc6585#section-4","title":"Too Many Requests","status":429,"detail":"The request exceeds the current rate limit.","instance":"/work","violated-policies":["api"]}`+"\n")

		// Without a fallback, a Redis limiter answers 503 "unavailable"
		// under FailClosed and ReturnError: no policy is named.
		for _, mode := range []FailureMode{FailClosed, ReturnError} {
			l, err := New(coord, "{mwg}:plain", FixedWindow{Limit: 4, Window: time.Minute}, WithFailureMode(mode))
			if err != nil {
				t.Fatal(err)
			}
			mw, err := NewMiddleware([]Policy{{Name: "instance", Concurrency: guard, Status: http.StatusServiceUnavailable}, {Name: "plain", Limiter: l}}, quiet)
			if err != nil {
				t.Fatal(err)
			}
			wantResponse(t, serve(t, mw(http.NotFoundHandler()), "/work"), http.StatusServiceUnavailable, problemHdr,
				`{"type":"https://www.rfc-editor.org/rfc/rfc9110#section-15.6.4","title":"Service Unavailable","status":503,"detail":"The service cannot accept more work right now.","instance":"/work"}`+"\n")
			_ = l.Close()
		}
		// The guard's permit came back after every request.
		if le, err := guard.TryAcquire(context.Background(), 1); err != nil {
			t.Fatalf("guard permit leaked: %v", err)
		} else {
			_, _ = le.Release(context.Background())
		}
	})
}

// Partitions built with one WithLocalFallback value share its switch:
// told and counted once for all of them, each partition deciding with its
// own local state (its share of the partition's limit); concurrency
// limiters fall back too, with leases that release locally.
func TestLocalFallbackPartitioned(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord, out, reader, _ := outageCoord(t, b)
		var told atomic.Int64
		fb := WithLocalFallback(2, func(local bool) { told.Add(1) })
		p, err := NewPartitioned(func(part string) (*Limiter, error) {
			return New(coord, PartitionKey("{fbp}", part), GCRA{Burst: 3, Interval: time.Minute}, fb)
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		out.down.Store(true)
		for _, part := range []string{"a", "b"} {
			for i, want := range []bool{true, true, false} { // ceil(3/2) = 2 each
				d, err := p.Allow(ctx, part, 1)
				if err != nil || d.Allowed() != want {
					t.Fatalf("partition %s request %d: %v %v, want %v", part, i, d.Allowed(), err, want)
				}
			}
		}
		if n := told.Load(); n != 1 {
			t.Fatalf("told %d times, want once", n)
		}
		if got := counts(t, reader, "coordination.rate_limit.fallback"); got["to=local"] != 1 {
			t.Fatalf("fallback counter %v, want to=local 1", got)
		}

		c, err := NewConcurrency(coord, "{fbp}:conc", 3, WithLocalFallback(2, nil))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		le, err := c.TryAcquire(ctx, 2) // ceil(3/2) = 2 here
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.TryAcquire(ctx, 1); !errors.Is(err, coordination.ErrNotAcquired) {
			t.Fatalf("a third permit: %v, want ErrNotAcquired", err)
		}
		if o, err := le.Release(ctx); o != coordination.Released || err != nil {
			t.Fatalf("Release: %v %v", o, err)
		}
		if !errors.Is(context.Cause(le.Context()), coordination.ErrReleased) {
			t.Fatalf("lease context cause %v, want ErrReleased", context.Cause(le.Context()))
		}
		if o, _ := le.Release(ctx); o != coordination.AlreadyReleased {
			t.Fatalf("second Release: %v", o)
		}
		le, err = c.TryAcquire(ctx, 2)
		if err != nil {
			t.Fatalf("the permits did not come back: %v", err)
		}
		_, _ = le.Release(ctx)
	})
}

// A local limiter's verbs, as a Redis limiter's: the options that need
// Redis refused by name, bad settings by field, Wait sleeping until the
// local retry time, Reserve and Settle, Update, Statistics, Close; a local
// concurrency limiter's Acquire woken by a Release. (No server: it runs
// once, not per backend.)
func TestLocalLimiterOperations(t *testing.T) {
	ctx := context.Background()
	dl := &DenyList{}
	for name, opt := range map[string]Option{
		"denyList":       WithDenyList(dl, "x"),
		"allowList":      WithAllowList(&AllowList{}, "x"),
		"strictSettings": WithStrictSettings(true),
		"batch":          WithBatch(2, time.Second),
		"failureMode":    WithFailureMode(FailOpen),
		"localFallback":  WithLocalFallback(2, nil),
		"leaseDuration":  WithLeaseDuration(time.Second),
	} {
		_, err := NewLocal(FixedWindow{Limit: 1, Window: time.Second}, opt)
		if !errors.Is(err, coordination.ErrInvalidArgument) || !strings.Contains(err.Error(), "invalid argument "+name+":") {
			t.Errorf("NewLocal with %s: %v", name, err)
		}
		_, err = NewLocalConcurrency(1, opt)
		if !errors.Is(err, coordination.ErrInvalidArgument) || !strings.Contains(err.Error(), "invalid argument "+name+":") {
			t.Errorf("NewLocalConcurrency with %s: %v", name, err)
		}
	}
	if _, err := NewLocal(GCRA{Burst: 0, Interval: time.Second}); err == nil || !strings.Contains(err.Error(), "invalid argument burst:") {
		t.Errorf("NewLocal with Burst 0: %v", err)
	}
	if _, err := NewLocal(nil); err == nil || !strings.Contains(err.Error(), "invalid argument settings:") {
		t.Errorf("NewLocal(nil): %v", err)
	}
	if _, err := NewLocalConcurrency(0); err == nil || !strings.Contains(err.Error(), "invalid argument limit:") {
		t.Errorf("NewLocalConcurrency(0): %v", err)
	}

	l, err := NewLocal(TokenBucket{Limit: 2, TokensPerPeriod: 1, Period: 40 * time.Millisecond}, WithReservationTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if s := l.Statistics(); s.AvailablePermits != -1 {
		t.Fatalf("Statistics before any decision: %+v", s)
	}
	res, err := l.Reserve(ctx, 2)
	if err != nil || !res.Allowed() {
		t.Fatalf("Reserve: %v %v", res, err)
	}
	if back, err := res.Settle(ctx, 1); back != 1 || err != nil {
		t.Fatalf("Settle: %d %v, want 1 back", back, err)
	}
	if d, err := l.Allow(ctx, 1); err != nil || !d.Allowed() || d.Available() != 0 {
		t.Fatalf("Allow after the settlement: %+v %v", d, err)
	}
	start := time.Now()
	if d, err := l.Wait(ctx, 1); err != nil || !d.Allowed() {
		t.Fatalf("Wait: %+v %v", d, err)
	}
	if e := time.Since(start); e < 30*time.Millisecond || e > 2*time.Second {
		t.Fatalf("Wait took %v, want about one period (40 ms)", e)
	}
	if err := l.Update(ctx, TokenBucket{Limit: 5, TokensPerPeriod: 5, Period: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := l.Update(ctx, GCRA{Burst: 1, Interval: time.Second}); !errors.Is(err, coordination.ErrInvalidArgument) {
		t.Fatalf("Update to another algorithm: %v", err)
	}
	// The new capacity admits 5 at once; the usage is kept (the bucket
	// is empty, or holds a token refilled at the old rate on a slow
	// machine), so they are refused, with the retry at the new rate.
	d, err := l.Allow(ctx, 5)
	if err != nil || d.Allowed() || d.Available() > 1 {
		t.Fatalf("Allow 5 after Update: %+v %v", d, err)
	} else if ra, ok := d.RetryAfter(); !ok || ra > time.Hour || ra < 59*time.Minute {
		t.Fatalf("RetryAfter %v %v, want about an hour", ra, ok)
	}
	if s := l.Statistics(); s.Granted != 3 || s.Rejected != 1 || s.AvailablePermits != d.Available() {
		t.Fatalf("Statistics: %+v", s)
	}
	_ = l.Close()
	if _, err := l.Allow(ctx, 1); !errors.Is(err, coordination.ErrClosed) {
		t.Fatalf("Allow after Close: %v", err)
	}

	c, err := NewLocalConcurrency(1)
	if err != nil {
		t.Fatal(err)
	}
	held, err := c.Acquire(ctx, 1)
	if err != nil || held.N() != 1 || held.Context().Err() != nil {
		t.Fatalf("Acquire: %v %v", held, err)
	}
	got := make(chan error, 1)
	go func() {
		le, err := c.Acquire(ctx, 1)
		if err == nil {
			_, err = le.Release(ctx)
		}
		got <- err
	}()
	time.Sleep(20 * time.Millisecond)
	select {
	case err := <-got:
		t.Fatalf("the second Acquire returned while the permit was held: %v", err)
	default:
	}
	if _, err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second): // the recheck is 5 s: woken by the release
		t.Fatal("the queued Acquire was not woken by the release")
	}
	if err := c.Update(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := c.TryAcquire(ctx, 2); err != nil {
		t.Fatalf("TryAcquire 2 after Update: %v", err)
	}
	if s := c.Statistics(); s.Granted != 3 || s.AvailablePermits != 0 {
		t.Fatalf("Statistics: %+v", s)
	}
	_ = c.Close()
}

// BenchmarkLocalAllow is a local limiter's Allow (granted, then refused
// as the bucket empties: both paths):
//
//	go test -run '^$' -bench BenchmarkLocalAllow -benchmem ./ratelimit/
func BenchmarkLocalAllow(b *testing.B) {
	for _, s := range []Settings{
		GCRA{Burst: 1000, Interval: time.Microsecond},
		SlidingWindow{Limit: 1000, Window: time.Millisecond, Segments: 4},
		Composite{Components: []Settings{TokenBucket{Limit: 1000, TokensPerPeriod: 1, Period: time.Microsecond}, FixedWindow{Limit: 1000, Window: time.Millisecond}}},
	} {
		sp, _ := s.spec()
		b.Run(sp.cfg, func(b *testing.B) {
			l, err := NewLocal(s)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := l.Allow(ctx, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A real outage: the server is stopped and started again (its data gone).
// The limiter with a local fallback decides locally from the first call
// that cannot reach it, and returns to Redis on the first call at least
// fallbackRetry later once the server is back; each server flavor.
func TestLocalFallbackAcrossARestart(t *testing.T) {
	for _, flavor := range testharness.AvailableFlavors(t) {
		t.Run(flavor, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			srv := testharness.StartStandalone(t, flavor)
			o := srv.Options()
			o.MaxRetries, o.ContextTimeoutEnabled, o.DialerRetries = -1, true, 1
			client := redis.NewClient(o)
			t.Cleanup(func() { _ = client.Close() })
			coord, err := coordination.New(client, coordination.WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				t.Fatal(err)
			}
			told := make(chan bool, 4)
			l, err := New(coord, "{restart}", FixedWindow{Limit: 10, Window: time.Minute}, WithLocalFallback(2, func(local bool) { told <- local }))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close() })
			want := func(what string, avail int64) {
				t.Helper()
				d, err := l.Allow(ctx, 1)
				if err != nil || !d.Allowed() || d.Available() != avail {
					t.Fatalf("%s: allowed %v available %d (%v), want %d", what, d.Allowed(), d.Available(), err, avail)
				}
			}
			want("Redis", 9)
			srv.Stop()
			for srv.Running() {
				time.Sleep(10 * time.Millisecond)
			}
			switched := time.Now()
			want("local, ceil(10/2) = 5", 4)
			if local := <-told; !local {
				t.Fatal("told false, want true")
			}
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
			if time.Since(switched) < fallbackRetry*8/10 { // (a slow restart leaves no time to check)
				want("local until the retry interval passed", 3)
			}
			// The first try after the retry interval switches back, unless
			// the restarted server is not answering yet on a loaded machine
			// (the try fails, and the next one waits another interval): the
			// call that switches back is the first Redis answer of a new
			// window (the data is gone).
			time.Sleep(time.Until(switched.Add(fallbackRetry + 50*time.Millisecond)))
			for end := time.Now().Add(15 * time.Second); ; time.Sleep(fallbackRetry + 50*time.Millisecond) {
				d, err := l.Allow(ctx, 1)
				select {
				case local := <-told:
					if local {
						t.Fatal("told true, want false")
					}
					if err != nil || !d.Allowed() || d.Available() != 9 {
						t.Fatalf("Redis again (a new window: the data is gone): allowed %v available %d (%v), want 9", d.Allowed(), d.Available(), err)
					}
					return
				default:
				}
				if time.Now().After(end) {
					t.Fatalf("still local 15 s after the restart: allowed %v available %d (%v)", d.Allowed(), d.Available(), err)
				}
			}
		})
	}
}

// A frozen server (commands hang) and callers with deadlines: the first
// call ends with its deadline, and the calls after it decide locally
// (before, every call timed out for the whole outage: a deadline that
// passed was never taken for an outage). Once the server answers again,
// the next try switches back.
func TestLocalFallbackHungServer(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		coord, out, _, logs := outageCoord(t, b)
		clock := &fakeMicros{}
		clock.us.Store(time.Now().UnixMicro())
		sw := &fallbackSwitch{replicas: 2, now: clock.now}
		l, err := New(coord, "{fb}:hung", FixedWindow{Limit: 10, Window: time.Minute}, withFallback(sw))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		// Calls that reach Redis get a deadline a loaded machine keeps (the
		// first one on a Cluster dials and discovers the slots: it failed
		// at 100 ms under two CI runs); the one meeting the frozen server
		// and the local ones a short one.
		callWithin := func(d time.Duration) (Decision, error) {
			ctx, cancel := context.WithTimeout(context.Background(), d)
			defer cancel()
			return l.Allow(ctx, 1)
		}
		call := func() (Decision, error) { return callWithin(100 * time.Millisecond) }
		if d, err := callWithin(10 * time.Second); err != nil || !d.Allowed() {
			t.Fatalf("before: %v %v", d.Allowed(), err)
		}
		out.hung.Store(true)
		if _, err := call(); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("the call that met the frozen server: %v, want its deadline", err)
		}
		for i := range 5 { // local: ceil(10/2) = 5 per minute
			d, err := call()
			if err != nil || !d.Allowed() || d.Available() != int64(4-i) {
				t.Fatalf("local call %d: allowed %v available %d %v", i, d.Allowed(), d.Available(), err)
			}
		}
		if d, err := call(); err != nil || d.Allowed() {
			t.Fatalf("the sixth local call: allowed %v %v, want refused", d.Allowed(), err)
		}
		if !strings.Contains(logs.String(), "deciding locally") {
			t.Fatalf("the switch was not logged:\n%s", logs.String())
		}
		out.hung.Store(false)
		clock.advance(2 * time.Second) // past the retry interval
		if d, err := callWithin(10 * time.Second); err != nil || !d.Allowed() || d.Available() != 8 {
			t.Fatalf("back on Redis: allowed %v available %d %v, want 8 left of Redis' 10", d.Allowed(), d.Available(), err)
		}
	})
}

// The administrative operations act on an in-process limiter's local
// state (they panicked: they sent a script without a server).
func TestLocalAdminOperations(t *testing.T) {
	ctx := context.Background()
	for _, s := range []Settings{
		FixedWindow{Limit: 5, Window: time.Minute},
		SlidingWindow{Limit: 5, Window: time.Minute, Segments: 4},
		TokenBucket{Limit: 5, TokensPerPeriod: 1, Period: time.Minute},
		GCRA{Burst: 5, Interval: time.Minute},
		Composite{Components: []Settings{GCRA{Burst: 5, Interval: time.Minute}, FixedWindow{Limit: 9, Window: time.Hour}}},
	} {
		l, err := NewLocal(s)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := l.Penalize(ctx, 3); err != nil || n != 2 {
			t.Fatalf("%T Penalize(3): %d %v, want 2 left", s, n, err)
		}
		if n, err := l.Reward(ctx, 1); err != nil || n != 3 {
			t.Fatalf("%T Reward(1): %d %v, want 3 left", s, n, err)
		}
		if err := l.Reset(ctx); err != nil {
			t.Fatalf("%T Reset: %v", s, err)
		}
		if d, err := l.Peek(ctx); err != nil || d.Available() != 5 {
			t.Fatalf("%T after Reset: %d available, %v; want 5", s, d.Available(), err)
		}
		_ = l.Close()
	}
}
