package leakcheck_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/lockcore"
	"github.com/coordkit/coordination/internal/testkit/faultproxy"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/latch"
	"github.com/coordkit/coordination/leader"
	"github.com/coordkit/coordination/lock"
	"github.com/coordkit/coordination/semaphore"
)

// A user's own goleak-checked test: a coordinator with a lock kept alive,
// a waiter blocked on it, a semaphore permit and a waiter for another, a
// latch waiter, a leader serving its term and another campaigning, and a
// background cleanup retrying an ambiguous acquisition. Shutdown ends all
// of it: every blocked call returns an error wrapping ErrClosed, the
// cleanup gets its last try (and succeeds), the held leases stay on the
// server (to end at their TTL), later calls fail with ErrClosed without
// sending anything, and no goroutine is left. The test is not parallel:
// goleak sees every goroutine of the process.
func TestShutdownEndsEverything(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		observer := b.Coordinator(t) // reads the semaphore after Shutdown
		defer func() { _ = observer.Shutdown(ctx) }()
		osem, _ := semaphore.New(observer, "sem", 1)
		if _, err := osem.State(ctx); err != nil { // connected before the snapshot
			t.Fatal(err)
		}
		raw.Ping(ctx)
		client := b.Client(t)
		// Everything running now (the backend's servers, earlier tests'
		// leftovers) is not this test's.
		ignore := goleak.IgnoreCurrent()

		faults := &testharness.ScriptFaults{}
		client.AddHook(faults)
		counter := testharness.CountCommands(client)
		logs := &testharness.LogBuffer{}
		coord, err := coordination.New(client, coordination.WithKeyPrefix(b.Prefix()),
			coordination.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
		if err != nil {
			t.Fatal(err)
		}
		e, _ := engine.Of(coord)

		// The pending cleanup: the lock's first attempt (SET) runs but its
		// reply is lost; the cleanup's release then fails with LOADING
		// until the faults are cleared.
		faults.Add(testharness.Fault{Command: "set", Forward: true, Err: testharness.ErrLostReply})
		faults.Add(testharness.Fault{SHA: lockcore.Abandon.Hash(), Times: -1, Err: testharness.LoadingError}) // the cleanup of an ambiguous acquisition
		if _, err := lockTryAcquire(ctx, coord, "ambiguous", time.Minute); !coordination.IsAmbiguous(err) {
			t.Fatalf("TryAcquire through a lost reply: %v, want an ambiguous error", err)
		}
		if n := raw.Exists(ctx, b.Key("ambiguous")).Val(); n != 1 {
			t.Fatal("the ambiguous acquisition did not take the lock on the server")
		}
		testharness.WaitFor(t, 10*time.Second, "the cleanup's release to fail once", func() string {
			return cond(faults.Hits() >= 2, "%d faults injected", faults.Hits())
		})
		if n := e.Cleanups(); n != 1 {
			t.Fatalf("%d background cleanups, want 1", n)
		}

		held, err := lockTryAcquire(ctx, coord, "held", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		held.KeepAlive()
		heldCtx := held.Context()

		sem, err := semaphore.New(coord, "sem", 1)
		if err != nil {
			t.Fatal(err)
		}
		permit, err := sem.TryAcquire(ctx, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		ltc, err := latch.New(coord, "latch")
		if err != nil {
			t.Fatal(err)
		}
		lt, err := ltc.Create(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}

		blocked := map[string]chan error{}
		run := func(name string, f func() error) {
			ch := make(chan error, 1)
			blocked[name] = ch
			go func() { ch <- f() }()
		}
		run("lock.(*Mutex).Acquire", func() error {
			_, err := lockAcquire(ctx, coord, "held", 10*time.Second)
			return err
		})
		run("semaphore Acquire", func() error {
			_, err := sem.Acquire(ctx, 10*time.Second)
			return err
		})
		run("latch Wait", func() error {
			_, err := lt.Wait(ctx)
			return err
		})
		first, err := leader.New(coord, "{el}:lease", "{el}:fence", "first", leader.WithLeaseDuration(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		run("leader Run (leading)", func() error { return first.Run(ctx) })
		testharness.WaitFor(t, 10*time.Second, "the first elector to lead", func() string {
			return cond(first.Current() != nil, "no term")
		})
		term := first.Current()
		second, err := leader.New(coord, "{el}:lease", "{el}:fence", "second", leader.WithLeaseDuration(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		run("leader Run (campaigning)", func() error { return second.Run(ctx) })
		// Every waiter is blocked on a notification: lock, semaphore,
		// latch, and the campaigning elector.
		testharness.WaitFor(t, 10*time.Second, "the four waiters to wait", func() string {
			n := waiters(e)
			return cond(n == 4, "%d waiters", n)
		})

		faults.Clear() // the cleanup's last try can succeed now
		start := time.Now()
		if err := coord.Shutdown(ctx); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		took := time.Since(start)
		for name, ch := range blocked {
			select {
			case err := <-ch:
				if !errors.Is(err, coordination.ErrClosed) {
					t.Errorf("%s returned %v, want an error wrapping ErrClosed", name, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s did not return after Shutdown", name)
			}
		}
		t.Logf("Shutdown took %v", took)

		// The cleanup had its last try: the ambiguous lock is gone (its
		// tombstone left: a free lock).
		if v := raw.Get(ctx, b.Key("ambiguous")).Val(); v != "" && !lockcore.IsTombstone(v) {
			t.Error("the pending cleanup did not remove the ambiguous lock during Shutdown")
		}
		if n := e.Cleanups(); n != 0 {
			t.Errorf("%d background cleanups after Shutdown", n)
		}
		if strings.Contains(logs.String(), "cleanup abandoned") {
			t.Errorf("a cleanup was abandoned: %s", logs.String())
		}
		// Held leases end locally, with a cause matching ErrClosed and
		// ErrLost, and stay on the server.
		for name, c := range map[string]context.Context{"lock": heldCtx, "permit": permit.Context(), "term": term.Context()} {
			select {
			case <-c.Done():
			default:
				t.Fatalf("the %s's context was not cancelled by Shutdown", name)
			}
			if cause := context.Cause(c); !errors.Is(cause, coordination.ErrClosed) || (name != "term" && !errors.Is(cause, coordination.ErrLost)) {
				t.Errorf("the %s's context cause = %v, want one matching ErrClosed and ErrLost", name, cause)
			}
		}
		if held.Remaining() != 0 || permit.Remaining() != 0 {
			t.Error("a handle reports time left after Shutdown")
		}
		// (A "+" after the token marks a lock with waiters.)
		if v := raw.Get(ctx, b.Key("held")).Val(); strings.TrimSuffix(v, "+") != held.Token() {
			t.Errorf("the held lock's key = %q after Shutdown, want the holder's token (not released)", v)
		}
		if ttl := raw.PTTL(ctx, b.Key("held")).Val(); ttl <= 0 {
			t.Errorf("the held lock's TTL = %v, want it to end by its TTL", ttl)
		}
		if st, err := osem.State(ctx); err != nil || st.Used != 1 {
			t.Errorf("the semaphore after Shutdown: %+v, %v, want the permit still held", st, err)
		}

		// Later calls of every primitive fail with ErrClosed and send
		// nothing.
		counter.Reset()
		later := map[string]error{}
		_, later["lock.(*Mutex).TryAcquire"] = lockTryAcquire(ctx, coord, "other", time.Second)
		_, later["lock.(*Mutex).Acquire"] = lockAcquire(ctx, coord, "other", time.Second)
		_, later["Lock.Refresh"] = held.Refresh(ctx, time.Second)
		_, later["Lock.Verify"] = held.Verify(ctx)
		_, later["Lock.Release"] = held.Release(ctx)
		_, later["Permit.Release"] = permit.Release(ctx)
		_, later["semaphore TryAcquire"] = sem.TryAcquire(ctx, time.Second)
		_, later["semaphore State"] = sem.State(ctx)
		_, later["latch CountDown"] = lt.CountDown(ctx)
		_, later["latch Create"] = ltc.Create(ctx, 1)
		_, later["leader Leader"] = first.Leader(ctx)
		later["leader Run"] = first.Run(ctx)
		for name, err := range later {
			if !errors.Is(err, coordination.ErrClosed) {
				t.Errorf("%s after Shutdown: %v, want an error wrapping ErrClosed", name, err)
			}
		}
		if n := counter.Count(); n != 0 {
			t.Errorf("%d commands sent after Shutdown: %v", n, counter.Names())
		}
		if err := coord.Shutdown(ctx); err != nil {
			t.Errorf("a second Shutdown: %v", err)
		}

		_ = client.Close() // the user's client, closed by the user
		goleak.VerifyNone(t, ignore)
	}, testharness.Serial())
}

// A Shutdown whose context ends before a cleanup can succeed (the server
// is unreachable through the proxy) returns by then, reports the
// abandoned cleanup, logs it once, and leaves no goroutine.
func TestShutdownAbandonsCleanupsWhenItsContextEnds(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		target := ""
		if b.IsMini() {
			target = b.Mini.Addr()
		} else {
			target = b.Server.Addr
		}
		p := faultproxy.Start(t, target)
		client := b.Client(t, func(o *redis.Options) { o.Addr = p.Addr() })
		raw.Ping(ctx) // connected before the snapshot
		ignore := goleak.IgnoreCurrent()

		faults := &testharness.ScriptFaults{}
		client.AddHook(faults)
		logs := &testharness.LogBuffer{}
		coord, err := coordination.New(client, coordination.WithKeyPrefix(b.Prefix()),
			coordination.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
		if err != nil {
			t.Fatal(err)
		}
		e, _ := engine.Of(coord)
		faults.Add(testharness.Fault{Command: "set", Forward: true, Err: testharness.ErrLostReply})
		faults.Add(testharness.Fault{SHA: lockcore.Abandon.Hash(), Times: -1, Err: testharness.LoadingError}) // the cleanup of an ambiguous acquisition
		if _, err := lockTryAcquire(ctx, coord, "ambiguous", time.Minute); !coordination.IsAmbiguous(err) {
			t.Fatalf("TryAcquire through a lost reply: %v, want an ambiguous error", err)
		}
		testharness.WaitFor(t, 10*time.Second, "the cleanup's release to fail once", func() string {
			return cond(faults.Hits() >= 2, "%d faults injected", faults.Hits())
		})
		// The server becomes unreachable: every connection is refused.
		faults.Clear()
		p.Refuse(time.Hour)
		p.CutAll(faultproxy.RST)

		const limit = time.Second
		start := time.Now() // before the deadline is set: took >= limit
		sctx, cancel := context.WithTimeout(ctx, limit)
		defer cancel()
		err = coord.Shutdown(sctx)
		took := time.Since(start)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "1 background cleanup abandoned") {
			t.Fatalf("Shutdown = %v, want an error wrapping context.DeadlineExceeded that reports 1 abandoned cleanup", err)
		}
		// It retries until its context ends, and returns by then plus a try
		// in flight, which the refused connections end at once (generous
		// bound: a loaded machine).
		if took < limit || took > limit+5*time.Second {
			t.Errorf("Shutdown took %v, want about %v", took, limit)
		}
		if n := strings.Count(logs.String(), "cleanup abandoned"); n != 1 {
			t.Errorf("%d abandon log lines, want 1:\n%s", n, logs.String())
		}
		if !strings.Contains(logs.String(), "reason=shutdown") {
			t.Errorf("the abandon log line does not give the reason: %s", logs.String())
		}
		if n := e.Cleanups(); n != 0 {
			t.Errorf("%d background cleanups after Shutdown", n)
		}
		// Abandoned: the lock ends at its TTL.
		if n := raw.Exists(ctx, b.Key("ambiguous")).Val(); n != 1 {
			t.Error("the abandoned cleanup's lock is gone")
		}
		if err2 := coord.Shutdown(ctx); err2 == nil || err2.Error() != err.Error() {
			t.Errorf("a second Shutdown = %v, want the first one's result", err2)
		}
		_ = client.Close()
		p.Restore()
		goleak.VerifyNone(t, ignore)
	}, testharness.Serial(), testharness.StandaloneOnly())
}

// cond is "" when ok, else the formatted reason (for testharness.WaitFor).
func cond(ok bool, format string, args ...any) string {
	if ok {
		return ""
	}
	return fmt.Sprintf(format, args...)
}

// lockTryAcquire is lock.New(coord, key) then TryAcquire(ctx, ttl): one
// acquisition, for tests that take each lock once.
func lockTryAcquire(ctx context.Context, coord *coordination.Coordinator, key string, ttl time.Duration) (*lock.Lock, error) {
	m, err := lock.New(coord, key)
	if err != nil {
		return nil, err
	}
	return m.TryAcquire(ctx, ttl)
}

// lockAcquire is lock.New(coord, key) then Acquire(ctx, ttl).
func lockAcquire(ctx context.Context, coord *coordination.Coordinator, key string, ttl time.Duration) (*lock.Lock, error) {
	m, err := lock.New(coord, key)
	if err != nil {
		return nil, err
	}
	return m.Acquire(ctx, ttl)
}

// waiters is the number of waiters blocked on a notification of e.
func waiters(e *engine.Engine) int {
	n, _ := e.Waiters()
	return n
}
