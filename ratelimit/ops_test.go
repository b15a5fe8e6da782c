package ratelimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

func TestOneCommandPerAllow(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		client := b.Client(t)
		count := testharness.CountCommands(client)
		c, err := coordination.New(client, coordination.WithKeyPrefix(b.Prefix()))
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range kinds {
			l := build(t, c, k, "one:"+string(k), 3, 10*time.Second)
			acquire(t, l, 1) // loads the script (EVALSHA, NOSCRIPT, EVAL)
			count.Reset()
			const n = 6 // granted and refused alike
			for range n {
				acquire(t, l, 1)
			}
			names := count.Names()
			if len(names) != n {
				t.Fatalf("%s: %d commands for %d acquisitions: %v", k, len(names), n, names)
			}
			for _, name := range names {
				if name != "EVALSHA" {
					t.Fatalf("%s: sent %v, want only EVALSHA", k, names)
				}
			}
			count.Reset()
			// Larger than the limiter: an error, decided locally.
			if _, err := l.Allow(context.Background(), 4); !errors.Is(err, coordination.ErrInvalidArgument) {
				t.Fatalf("%s: Allow(4) on a capacity of 3: %v, want ErrInvalidArgument", k, err)
			}
			if got := count.Count(); got != 0 {
				t.Fatalf("%s: oversized request sent %d commands", k, got)
			}
		}
	})
}

// recorder is a hook that records admitted operations and outcomes.
type recorder struct {
	mu  sync.Mutex
	ops []string
}

func (r *recorder) Admit(ctx context.Context, op hooks.Operation) (context.Context, hooks.Done, error) {
	return ctx, func(o hooks.Outcome, _ error) {
		r.mu.Lock()
		r.ops = append(r.ops, op.Name+" "+op.Primitive+" "+o.String())
		r.mu.Unlock()
	}, nil
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.ops
	r.ops = nil
	return out
}

func TestHooksAdmitOncePerCall(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		rec := &recorder{}
		c := b.Coordinator(t, coordination.WithHooks(rec))
		ctx := context.Background()
		l := build(t, c, kGCRA, "hook", 1, 100*time.Millisecond, WithQueue(5, OldestFirst))
		acquire(t, l, 1)
		acquire(t, l, 1) // refused: still Succeeded
		_, _ = l.Allow(ctx, -1)
		want := []string{"RATE LIMIT ACQUIRE rate_limit succeeded", "RATE LIMIT ACQUIRE rate_limit succeeded"}
		if got := rec.take(); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("ops %v, want %v", got, want)
		}
		stop := clock(b)
		le, err := l.Wait(ctx, 1) // queued, retried: admitted once
		stop()
		if err != nil || !le.Acquired() {
			t.Fatalf("Wait: %v", err)
		}
		if got := rec.take(); len(got) != 1 || got[0] != "RATE LIMIT ACQUIRE rate_limit succeeded" {
			t.Fatalf("Wait ops %v", got)
		}
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := l.Allow(cctx, 1); err == nil {
			t.Fatal("Allow with a cancelled context succeeded")
		}
		if got := rec.take(); len(got) != 1 || got[0] != "RATE LIMIT ACQUIRE rate_limit canceled" {
			t.Fatalf("cancelled ops %v", got)
		}
		cl := build(t, c, kConc, "hookc", 1, 10*time.Second)
		h := acquire(t, cl, 1)
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
		want = []string{"RATE LIMIT ACQUIRE rate_limit succeeded", "RATE LIMIT RELEASE rate_limit succeeded"}
		if got := rec.take(); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("concurrency ops %v, want %v", got, want)
		}
		// A rejecting hook: nothing is sent.
		deny := hooks.Func(func(ctx context.Context, op hooks.Operation) (context.Context, hooks.Done, error) {
			return ctx, nil, errors.New("denied by policy")
		})
		dl := build(t, b.Coordinator(t, coordination.WithHooks(deny)), kGCRA, "hookd", 1, time.Second)
		if _, err := dl.Allow(ctx, 1); err == nil || !strings.Contains(err.Error(), "denied by policy") {
			t.Fatalf("rejected admission: %v", err)
		}
		if n, _ := b.Client(t).Exists(ctx, b.Key("hookd")).Result(); n != 0 {
			t.Fatal("a rejected admission reached Redis")
		}
	})
}

// Update, Reserve, Settle and the deny list's calls are admitted once
// each; a limiter's own deny-list checks are not admitted again.
func TestHooksNewOperations(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		rec := &recorder{}
		c := b.Coordinator(t, coordination.WithHooks(rec))
		ctx := context.Background()
		list, err := NewDenyList(c, "hook-deny")
		if err != nil {
			t.Fatal(err)
		}
		l := build(t, c, kGCRA, "hook-new", 5, time.Minute, WithDenyList(list, "x"))
		steps := []struct {
			run  func() error
			want string
		}{
			{func() error { return l.Update(ctx, GCRA{Burst: 6, Interval: time.Minute}) }, "RATE LIMIT UPDATE rate_limit succeeded"},
			{func() error { return l.Update(ctx, GCRA{Burst: 6, Interval: time.Minute}) }, "RATE LIMIT UPDATE rate_limit succeeded"},
			{func() error {
				r, err := l.Reserve(ctx, 2)
				if err != nil {
					return err
				}
				rec.take() // the reservation: RATE LIMIT ACQUIRE, as Allow
				_, err = r.Settle(ctx, 1)
				return err
			}, "RATE LIMIT SETTLE rate_limit succeeded"},
			{func() error { return list.Deny(ctx, "y") }, "RATE LIMIT DENY LIST WRITE rate_limit succeeded"},
			{func() error { _, err := list.Denied(ctx, "y"); return err }, "RATE LIMIT DENY LIST READ rate_limit succeeded"},
			{func() error { _, err := list.Denied(ctx, "y"); return err }, "RATE LIMIT DENY LIST READ rate_limit succeeded"}, // a cache hit
			{func() error { return list.Remove(ctx, "y") }, "RATE LIMIT DENY LIST WRITE rate_limit succeeded"},
			{func() error { _, err := l.Allow(ctx, 1); return err }, "RATE LIMIT ACQUIRE rate_limit succeeded"}, // its deny-list check is not admitted
		}
		for i, s := range steps {
			rec.take()
			if err := s.run(); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			if got := rec.take(); len(got) != 1 || got[0] != s.want {
				t.Fatalf("step %d: ops %v, want [%s]", i, got, s.want)
			}
		}
	})
}

// meterRecorder is a MeterProvider that records counter additions by name
// and attributes.
type meterRecorder struct {
	noop.MeterProvider
	mu   sync.Mutex
	adds map[string]int64
}

type recMeter struct {
	noop.Meter
	p *meterRecorder
}

type recCounter struct {
	noop.Int64Counter
	name string
	p    *meterRecorder
}

func (p *meterRecorder) Meter(string, ...metric.MeterOption) metric.Meter { return recMeter{p: p} }

func (m recMeter) Int64Counter(name string, _ ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	return recCounter{name: name, p: m.p}, nil
}

func (c recCounter) Add(_ context.Context, v int64, opts ...metric.AddOption) {
	set := metric.NewAddConfig(opts).Attributes()
	k := c.name
	if set.Len() > 0 {
		k += "{" + set.Encoded(attribute.DefaultEncoder()) + "}"
	}
	c.p.mu.Lock()
	c.p.adds[k] += v
	c.p.mu.Unlock()
}

func (p *meterRecorder) snapshot() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int64{}
	for k, v := range p.adds {
		out[k] = v
	}
	return out
}

func TestMetricsAllowedBlocked(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		mp := &meterRecorder{adds: map[string]int64{}}
		c := b.Coordinator(t, coordination.WithMeterProvider(mp))
		l := build(t, c, kFixed, "m", 2, 10*time.Second)
		burst(t, l, 5)
		if _, err := l.Allow(context.Background(), 3); err == nil { // oversized: an error, not counted
			t.Fatal("Allow(3) on a capacity of 2: nil error")
		}
		got := mp.snapshot()
		if got["coordination.rate_limit.allowed"] != 2 || got["coordination.rate_limit.blocked{reason=capacity}"] != 3 {
			t.Fatalf("metrics %v", got)
		}
	})
}

// TestFailureModes stops a dedicated server: ReturnError returns the error,
// FailOpen grants, FailClosed refuses; cancellation stays cancellation in
// every mode.
func TestFailureModes(t *testing.T) {
	s := testharness.StartStandalone(t, testharness.FirstFlavor(t))
	client := redis.NewClient(func() *redis.Options {
		o := s.Options()
		o.MaxRetries = -1
		o.DialTimeout = 200 * time.Millisecond
		o.ReadTimeout = 300 * time.Millisecond
		o.ContextTimeoutEnabled = true
		o.DialerRetries = 1 // fail fast once the server is stopped
		return o
	}())
	defer func() {
		_ = client.Close()
		waitDialers(t)
	}()
	mp := &meterRecorder{adds: map[string]int64{}}
	rec := &recorder{}
	c, err := coordination.New(client, coordination.WithMeterProvider(mp), coordination.WithHooks(rec))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	modes := []FailureMode{ReturnError, FailOpen, FailClosed}
	lims := map[kind][]*tlim{}
	for _, k := range kinds {
		for _, m := range modes {
			l := build(t, c, k, "fm:"+string(k), 5, 10*time.Second, WithFailureMode(m), WithQueue(5, OldestFirst))
			if !acquire(t, l, 1).Acquired() {
				t.Fatalf("%s/%v: not acquired while the server is up", k, m)
			}
			lims[k] = append(lims[k], l)
		}
	}
	// A paused server: the deadline ends the call, and that is
	// cancellation, not a failure to apply the mode to.
	s.Pause()
	for i, m := range modes {
		dctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		_, err := lims[kGCRA][i].Allow(dctx, 1)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%v on a paused server: %v, want DeadlineExceeded", m, err)
		}
	}
	s.Resume()
	s.Stop()
	rec.take()
	for _, k := range kinds {
		for i, m := range modes {
			l := lims[k][i]
			for ci, call := range []func(context.Context, int) (Lease, error){l.Allow, l.Wait} {
				le, err := call(ctx, 1)
				wait := ci == 1
				switch m {
				case ReturnError:
					if err == nil || !coordination.IsTransient(err) {
						t.Fatalf("%s/%v: %v, want a transient error", k, m, err)
					}
				case FailOpen:
					if err != nil || !le.Acquired() || !le.FailedOpen() {
						t.Fatalf("%s/%v: err=%v acquired=%v", k, m, err, le.Acquired())
					}
					if cl := le.cl; cl != nil {
						// A fail-open concurrency lease holds nothing: its
						// context is never cancelled, its release asks nothing.
						if cl.N() != 1 || cl.Context().Err() != nil || cl.Remaining() != 0 {
							t.Fatalf("%s/%v: fail-open lease N=%d ctx=%v remaining=%v", k, m, cl.N(), cl.Context().Err(), cl.Remaining())
						}
						if _, ok := cl.Context().Deadline(); ok {
							t.Fatalf("%s/%v: fail-open lease's context has a deadline", k, m)
						}
						if out, err := cl.Release(ctx); out != coordination.AlreadyReleased || err != nil {
							t.Fatalf("release of a fail-open lease = %v, %v; want AlreadyReleased", out, err)
						}
						continue
					}
					if err := le.Release(ctx); err != nil {
						t.Fatalf("release of a fail-open lease: %v", err)
					}
				case FailClosed:
					if wait {
						// Wait never returns a nil error without the
						// permits: the refusal is a WaitError carrying the
						// failure.
						var we *WaitError
						if !errors.As(err, &we) || !errors.Is(err, coordination.ErrNotAcquired) || le.Acquired() ||
							we.Err == nil || !coordination.IsTransient(we.Err) || we.RetryAfter != 0 || we.PastDeadline {
							t.Fatalf("%s/%v: Wait: %v acquired=%v, want a WaitError carrying a transient failure", k, m, err, le.Acquired())
						}
						continue
					}
					if err != nil || le.Acquired() {
						t.Fatalf("%s/%v: err=%v acquired=%v", k, m, err, le.Acquired())
					}
					if _, ok := le.RetryAfter(); ok {
						t.Fatalf("%s/%v: fail-closed lease has a RetryAfter", k, m)
					}
				}
			}
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			if _, err := l.Allow(cctx, 1); !errors.Is(err, context.Canceled) {
				t.Fatalf("%s/%v: cancelled: %v, want context.Canceled", k, m, err)
			}
		}
	}
	for _, op := range rec.take() {
		if !strings.HasSuffix(op, " failed") && !strings.HasSuffix(op, " canceled") {
			t.Fatalf("hook outcome %q with the server down", op)
		}
	}
	got := mp.snapshot()
	want := map[string]int64{
		"coordination.rate_limit.unavailable{failure_mode=fail_open}":    10,
		"coordination.rate_limit.unavailable{failure_mode=fail_closed}":  10,
		"coordination.rate_limit.unavailable{failure_mode=return_error}": 10,
		"coordination.rate_limit.blocked{reason=unavailable}":            10,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
	// A concurrency limiter's TryAcquire refused by FailClosed is a
	// WaitError carrying the failure (the adapter above reads it as a
	// refusal).
	var we *WaitError
	if _, err := lims[kConc][2].conc.TryAcquire(ctx, 1); !errors.As(err, &we) || !errors.Is(err, coordination.ErrNotAcquired) ||
		we.Err == nil || !coordination.IsTransient(we.Err) || !strings.HasPrefix(err.Error(), "coordination: rate limit acquire \"") ||
		!strings.Contains(err.Error(), "\": try acquire 1 permit: not acquired: refused because Redis could not decide") {
		t.Fatalf("TryAcquire under FailClosed: %v, want a WaitError carrying the failure", err)
	}
}

// TestMemoryPerKey measures the state of one idle limiter key with MEMORY
// USAGE (real servers only: miniredis has no MEMORY command) under a
// 40-byte key name, after 10 grants:
// every limiter <= 200 bytes, a composite of 3 components <= 400, on Redis
// 7.0 and Valkey 9.1. The other servers' figures are logged: Redis 8.0 and
// Valkey 8.1 are built here with the C library's malloc, whose reuse of a
// freed chunk can report 16 bytes more for the same value (Redis 8.0 sits
// at 200 for three of the limiters).
func TestMemoryPerKey(t *testing.T) {
	t.Parallel()
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		var r [3]byte
		_, _ = rand.Read(r[:])
		// MEMORY USAGE, and a prefix of its own: not the least-privilege
		// user's.
		client := b.Admin(t)
		prefix := "m" + hex.EncodeToString(r[:]) + ":" // 8 bytes
		c, err := coordination.New(client, coordination.WithKeyPrefix(prefix))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		name := func(k string) string { // 40 bytes with the prefix
			return k + ":" + strings.Repeat("x", 32-len(k)-1)
		}
		var report []string
		measure := func(what, key string, most int64) {
			t.Helper()
			n, err := client.MemoryUsage(ctx, prefix+key).Result()
			if err != nil {
				t.Fatal(err)
			}
			report = append(report, what+"="+itoa(n))
			if most > 0 && n > most && (b.Flavor == "redis7" || b.Flavor == "valkey9") {
				t.Errorf("%s: %d bytes per key, want <= %d", what, n, most)
			}
		}
		for _, k := range every {
			key := name("limits:" + string(k))
			var l *tlim
			switch k {
			case kSliding:
				l, err = newT(c, key, SlidingWindow{Limit: 1000, Window: time.Minute, Segments: 10})
			case kComp:
				l, err = newT(c, key, issueComposite)
			default:
				l = build(t, c, k, key, 1000, time.Minute)
			}
			if err != nil {
				t.Fatal(err)
			}
			// The state a key keeps until it expires: after 10 grants (the
			// ring of re-send ids full); for concurrency, while one lease is
			// held (with none it is deleted).
			grants := 10
			if k == kConc {
				grants = 1
			}
			for range grants {
				if !acquire(t, l, 1).Acquired() {
					t.Fatalf("%s: refused", k)
				}
			}
			most := int64(200)
			if k == kComp {
				most = 400
			}
			measure(string(k), key, most)
			if k == kConc {
				acquire(t, l, 1)
				acquire(t, l, 1)
				measure("concurrency(3 leases)", key, 0)
			}
			l.Close()
			_ = client.Del(ctx, prefix+key).Err()
		}
		// A sliding window with every segment live (100 ms segments, one
		// grant each), for the report.
		key := name("limits:sliding-full")
		sw, err := newT(c, key, SlidingWindow{Limit: 100, Window: time.Second, Segments: 10})
		if err != nil {
			t.Fatal(err)
		}
		for range 10 {
			acquire(t, sw, 1)
			time.Sleep(100 * time.Millisecond)
		}
		measure("sliding(10 live segments)", key, 0)
		sw.Close()
		sort.Strings(report)
		t.Logf("%s: MEMORY USAGE per idle key (40-byte key names): %s", b.Name, strings.Join(report, " "))
	}, testharness.RealOnly(), testharness.StandaloneOnly())
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// waitDialers waits (up to 3 s) for go-redis' background re-dial goroutines
// of closed clients to notice the close: after a failed dial they sleep a
// second before checking.
func waitDialers(t testing.TB) {
	t.Helper()
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		n := runtime.Stack(buf, true)
		if !strings.Contains(string(buf[:n]), "(*ConnPool).tryDial") {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
