package ratelimit

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/sentinel"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// lockedBuffer is a bytes.Buffer safe for a logger and a reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// noTime drops the time attribute of a text log line.
func noTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// A new user's try: the server requires a password, and the client has
// none, or the wrong one. The middleware used to answer 503 and say
// nothing. Now it logs the server's reply (NOAUTH, WRONGPASS) once per
// distinct failure, never the password, keys, partition or address, and
// hands every failed request to the error handler; FailOpen still serves
// the request.
func TestMiddlewareReportsAuthFailures(t *testing.T) {
	srv := testharness.StartStandalone(t, testharness.FirstFlavor(t))
	ctx := context.Background()
	admin := redis.NewClient(srv.Options())
	defer admin.Close()
	const password = "pw-Xq7-hunter2"
	if err := admin.ConfigSet(ctx, "requirepass", password).Err(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, password, want string
		mode                 FailureMode
		status               int
		level                string
	}{
		{"no password", "", "NOAUTH", ReturnError, http.StatusServiceUnavailable, "level=ERROR"},
		{"wrong password", "wrong-pw-Zk9", "WRONGPASS", FailOpen, http.StatusNotFound, "level=WARN"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := srv.Options()
			o.Password, o.MaxRetries = c.password, -1
			client := redis.NewClient(o)
			defer client.Close()
			coord, err := coordination.New(client, coordination.WithKeyPrefix("tenant-prefix-q1:"))
			if err != nil {
				t.Fatal(err)
			}
			key := PartitionKey("limits:private-key-name", "client-7")
			lim, err := newT(coord, key, GCRA{Burst: 5, Interval: time.Second}, WithFailureMode(c.mode))
			if err != nil {
				t.Fatal(err)
			}
			defer lim.Close()
			var (
				buf     lockedBuffer
				mu      sync.Mutex
				handled []error
			)
			mw, err := NewMiddleware([]Policy{{Name: "api", Limiter: lim.lim(), Concurrency: lim.cc()}},
				WithLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: noTime}))),
				WithErrorHandler(func(r *http.Request, err error) {
					mu.Lock()
					handled = append(handled, err)
					mu.Unlock()
				}))
			if err != nil {
				t.Fatal(err)
			}
			h := mw(http.NotFoundHandler())
			for range 3 {
				if w := serve(t, h, "/work"); w.Code != c.status {
					t.Fatalf("status %d, want %d", w.Code, c.status)
				}
			}
			out := strings.TrimSpace(buf.String())
			lines := strings.Split(out, "\n")
			if len(lines) != 1 {
				t.Fatalf("%d log lines for one distinct failure repeated 3 times, want 1:\n%s", len(lines), out)
			}
			line := lines[0]
			t.Logf("log line: %s", line)
			if !strings.Contains(line, c.want) || !strings.Contains(line, c.level) || !strings.Contains(line, "policy=api") {
				t.Errorf("log line %q lacks %s, %s or the policy", line, c.want, c.level)
			}
			for _, secret := range []string{password, "wrong-pw", "private-key-name", key, "tenant-prefix", "client-7",
				srv.Addr, "127.0.0.1", strconv.Itoa(srv.Port)} {
				if strings.Contains(line, secret) {
					t.Errorf("log line %q contains %q", line, secret)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if len(handled) != 3 {
				t.Fatalf("error handler called %d times, want once per request (3)", len(handled))
			}
			for _, err := range handled {
				if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "policy api") {
					t.Errorf("handled error %q, want the policy and %s", err, c.want)
				}
			}
		})
	}
}

// A repeating failure is logged once; distinct failures (another error,
// another policy) are logged each. (When a repeating failure is logged
// again, with its count, is engine.FailureLog's, tested there.)
func TestMiddlewareLogDeduplication(t *testing.T) {
	var buf lockedBuffer
	m := &middleware{cfg: middlewareConfig{logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: noTime}))}}
	r, _ := http.NewRequest("GET", "/", nil)
	p := &policy{name: "api"}
	refused := errors.New("x")
	for range 3 {
		m.failed(r, p, refused, "503 Service Unavailable")
	}
	m.failed(r, p, sentinel.ErrClosed, "503 Service Unavailable") // another failure
	m.failed(r, &policy{name: "other"}, refused, "503 Service Unavailable")
	if n := strings.Count(buf.String(), "\n"); n != 3 {
		t.Fatalf("%d lines, want 3 (one per distinct failure):\n%s", n, buf.String())
	}
}

// The one release semantics for concurrency leases: a failed release still
// counts as released at once (context cancelled with ErrReleased), the
// caller gets the error, the release is retried in the background, and a
// second Release sends nothing.
func TestConcurrencyFailedReleaseIsRetriedInTheBackground(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		client := b.Client(t)
		faults := &testharness.ScriptFaults{}
		client.AddHook(faults)
		coord, err := coordination.New(client, coordination.WithKeyPrefix(b.Prefix()))
		if err != nil {
			t.Fatal(err)
		}
		l := build(t, coord, kConc, "{rel}", 1, time.Minute)
		le := acquire(t, l, 1)
		if !le.Acquired() {
			t.Fatal("not acquired")
		}
		faults.Add(testharness.Fault{SHA: concReleaseScript.Hash(), Err: testharness.ErrLostReply}) // never sent
		if err := le.Release(ctx); err == nil || !coordination.IsAmbiguous(err) {
			t.Fatalf("Release with a failed send: %v, want the error", err)
		}
		if !errors.Is(context.Cause(le.Context()), coordination.ErrReleased) {
			t.Errorf("context cause after a failed release = %v, want ErrReleased", context.Cause(le.Context()))
		}
		waitKeyGone(t, b.Client(t), b.Key("{rel}"), "background release")
		// Counted once the background retry is done, so that only the
		// second Release could send anything.
		k := testharness.CountCommands(client)
		if err := le.Release(ctx); err != nil {
			t.Errorf("second Release: %v", err)
		}
		if n := k.Count(); n != 0 {
			t.Errorf("second Release sent %v", k.Names())
		}
		if !acquire(t, l, 1).Acquired() {
			t.Error("the permit did not come back")
		}
	})
}

// An acquisition whose reply was lost, even when go-redis' re-send then
// reads LOADING, is cleaned up: the lease it may have taken is released
// in the background (a tombstone of its member, holding nothing, stays). In a queued Wait, a lost reply ends the wait under
// the failure mode, and the attempt's lease is cleaned up too.
func TestConcurrencyAmbiguousAttemptsAreCleanedUp(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		acq := concAcquireScript.Hash()
		for _, e := range []error{testharness.ErrLostReply, testharness.LoadingError} {
			t.Run("Allow/"+e.Error()[:8], func(t *testing.T) {
				client := b.Client(t)
				faults := &testharness.ScriptFaults{}
				client.AddHook(faults)
				coord, err := coordination.New(client, coordination.WithKeyPrefix(b.Prefix()))
				if err != nil {
					t.Fatal(err)
				}
				key := "{amb}:" + e.Error()[:4]
				l := build(t, coord, kConc, key, 1, time.Minute)
				acquire(t, l, 0) // load the script
				faults.Add(testharness.Fault{SHA: acq, Forward: true, Err: e})
				if _, err := l.Allow(ctx, 1); err == nil || !coordination.IsAmbiguous(err) {
					t.Fatalf("Allow: %v, want an ambiguous error", err)
				}
				waitNoLease(t, b.Client(t), b.Key(key), "cleanup after "+e.Error()[:8])
			})
		}
		t.Run("queued Wait", func(t *testing.T) {
			client := b.Client(t)
			// The reply lost is that of the attempt that takes the lease
			// once the holder releases it, whenever it comes (woken by the
			// notification or a re-check); the refused attempts before it
			// get their replies.
			attempts := &acquireAttempts{sha: acq}
			attempts.loseGrant.Store(true)
			client.AddHook(attempts)
			coord, err := coordination.New(client, coordination.WithKeyPrefix(b.Prefix()))
			if err != nil {
				t.Fatal(err)
			}
			l := build(t, coord, kConc, "{ambq}", 1, time.Minute, WithFailureMode(FailOpen))
			holder := acquire(t, build(t, b.Coordinator(t), kConc, "{ambq}", 1, time.Minute), 1)
			out := make(chan tresult, 1)
			var wg sync.WaitGroup
			startWait(ctx, &wg, l, "w", 1, out)
			queued(t, l, 1) // its first attempt was refused: it waits in the queue
			if err := holder.Release(ctx); err != nil {
				t.Fatal(err)
			}
			r := <-out
			wg.Wait()
			if !attempts.lost.Load() {
				t.Fatalf("no attempt of the queued Wait took the lease (%d attempts)", attempts.count())
			}
			if r.err != nil || !r.le.Acquired() || !r.le.FailedOpen() {
				t.Fatalf("queued Wait with a lost reply under FailOpen: err=%v acquired=%v failedOpen=%v", r.err, r.le.Acquired(), r.le.FailedOpen())
			}
			waitNoLease(t, b.Client(t), b.Key("{ambq}"), "cleanup of the queued attempt")
		})
	})
}

// acquireAttempts is a go-redis hook watching the calls of one
// concurrency acquire script (sha): it records when each call that ran
// started, and, while loseGrant is set, loses the reply of the first call
// that took a lease (the script ran and granted; the caller sees
// testharness.ErrLostReply), setting lost. Refusals pass unchanged.
type acquireAttempts struct {
	sha       string
	loseGrant atomic.Bool
	lost      atomic.Bool

	mu     sync.Mutex
	starts []time.Time
}

func (a *acquireAttempts) DialHook(next redis.DialHook) redis.DialHook { return next }
func (a *acquireAttempts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (a *acquireAttempts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !a.matches(cmd) {
			return next(ctx, cmd)
		}
		start := time.Now()
		err := next(ctx, cmd)
		if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			return err // it did not run: go-redis sends EVAL next
		}
		a.mu.Lock()
		a.starts = append(a.starts, start)
		a.mu.Unlock()
		// The engine's command embeds a *redis.Cmd (it counts its writes).
		if c, ok := cmd.(interface{ Slice() ([]any, error) }); ok && err == nil && a.loseGrant.Load() {
			if v, _ := c.Slice(); len(v) > 0 && v[0] == int64(1) && a.loseGrant.CompareAndSwap(true, false) {
				a.lost.Store(true)
				cmd.SetErr(testharness.ErrLostReply)
				return testharness.ErrLostReply
			}
		}
		return err
	}
}

func (a *acquireAttempts) matches(cmd redis.Cmder) bool {
	args := cmd.Args()
	if len(args) < 2 {
		return false
	}
	switch cmd.Name() {
	case "evalsha":
		return fmt.Sprint(args[1]) == a.sha
	case "eval":
		sum := sha1.Sum([]byte(fmt.Sprint(args[1])))
		return hex.EncodeToString(sum[:]) == a.sha
	}
	return false
}

// count returns the number of calls that ran.
func (a *acquireAttempts) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.starts)
}

// since returns the number of calls that ran and started after t.
func (a *acquireAttempts) since(t time.Time) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, s := range a.starts {
		if s.After(t) {
			n++
		}
	}
	return n
}

// lastGap returns the time between the starts of the last two calls.
func (a *acquireAttempts) lastGap() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.starts) < 2 {
		return 0
	}
	return a.starts[len(a.starts)-1].Sub(a.starts[len(a.starts)-2])
}

// wait waits up to 10 s for n calls to have run.
func (a *acquireAttempts) wait(t *testing.T, n int, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for a.count() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d acquisition attempts after 10 s, want %d", what, a.count(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitKeyGone waits up to 5 s for key to be deleted.
func waitKeyGone(t *testing.T, raw redis.UniversalClient, key, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := raw.Exists(context.Background(), key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the key is still there after 5 s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A user whose ACL forbids the notification channels still releases
// concurrency leases (the PUBLISH is best effort), and a waiter of that
// user in another process gets the permit soon after, by re-checking.
func TestConcurrencyWithoutChannelPermission(t *testing.T) {
	srv := testharness.StartStandalone(t, testharness.FirstFlavor(t))
	ctx := context.Background()
	admin := redis.NewClient(srv.Options())
	defer admin.Close()
	if err := admin.Do(ctx, "ACL", "SETUSER", "nochan", "on", ">pw", "~*", "resetchannels", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	limiter := func(hooks ...redis.Hook) *tlim {
		o := srv.Options()
		o.Username, o.Password = "nochan", "pw"
		c := redis.NewClient(o)
		t.Cleanup(func() { c.Close() })
		for _, h := range hooks {
			c.AddHook(h)
		}
		coord, err := coordination.New(c)
		if err != nil {
			t.Fatal(err)
		}
		return build(t, coord, kConc, "acl", 1, time.Minute)
	}
	holder := acquire(t, limiter(), 1)
	if !holder.Acquired() {
		t.Fatal("not acquired")
	}
	attempts := &acquireAttempts{sha: concAcquireScript.Hash()}
	waiter := limiter(attempts)
	out := make(chan tresult, 1)
	var wg sync.WaitGroup
	startWait(ctx, &wg, waiter, "w", 1, out)
	queued(t, waiter, 1)
	// Its attempts: the first (refused: it queues), the one after the
	// subscription whose confirmation never comes, then a re-check: it is
	// past the subscription's confirm bound, re-checking.
	attempts.wait(t, 3, "the waiter")
	released := time.Now()
	if err := holder.Release(ctx); err != nil {
		t.Fatalf("Release without channel permission: %v", err)
	}
	r := <-out
	took := time.Since(released)
	wg.Wait()
	if r.err != nil || !r.le.Acquired() {
		t.Fatalf("waiter: %v acquired=%v", r.err, r.le.Acquired())
	}
	// No notification can come: the waiter gets the permit at its first
	// re-check after the release, and its re-checks come at the short
	// period of a waiter without a confirmed subscription (250 ms), not the
	// default one (the lease itself would expire only after a minute). The
	// period is measured between the attempts' starts.
	if n := attempts.since(released); n > 1 {
		t.Errorf("the waiter made %d attempts after the release; want the permit at the first", n)
	}
	if gap := attempts.lastGap(); gap >= engine.DefaultRecheck {
		t.Errorf("the waiter re-checked %v after its previous attempt; want its short re-check, not the default %v", gap, engine.DefaultRecheck)
	}
	if took >= engine.DefaultRecheck {
		t.Errorf("waiter without notifications took %v after the release; want its short re-check, not the default %v", took, engine.DefaultRecheck)
	}
	if err := r.le.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
