package lock_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/lockcore"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/lock"
)

// cmdHook calls before and after around every command of a client (nil:
// nothing).
type cmdHook struct {
	before, after func(cmd redis.Cmder)
}

func (h *cmdHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *cmdHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.before != nil {
			h.before(cmd)
		}
		err := next(ctx, cmd)
		if h.after != nil {
			h.after(cmd)
		}
		return err
	}
}

func (h *cmdHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A release publishes only when a waiter marked the lock. That never
// strands a waiter until its 5 s re-check, wherever the release falls in
// the waiter's sequence (first attempt, subscribe, marking attempt,
// sleep): released right after the waiter's first attempt found the lock
// held (so before it subscribes), after it subscribed but before its
// second attempt, or while it sleeps, the waiter holds the lock within a
// fraction of a second. The holder's TTL is a minute, so no expiry helps.
func TestReleaseWithoutMarkNeverStrandsAWaiter(t *testing.T) {
	const bound = time.Second // the re-check is 5 s
	for _, at := range []string{"after the first attempt", "before the marking attempt", "while the waiter sleeps"} {
		t.Run(at, func(t *testing.T) {
			testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
				ctx := context.Background()
				holder, err := tryAcquire(ctx, b.Coordinator(t), "n", time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				var once sync.Once
				released := make(chan struct{}) // closed once holder.Release returned
				release := func() {
					once.Do(func() {
						defer close(released)
						if _, err := holder.Release(ctx); err != nil {
							t.Error(err)
						}
					})
				}
				hook := &cmdHook{}
				switch at {
				case "after the first attempt":
					hook.after = func(cmd redis.Cmder) {
						if cmd.Name() == "set" {
							release()
						}
					}
				case "before the marking attempt":
					hook.before = func(cmd redis.Cmder) {
						if cmd.Name() == "evalsha" || cmd.Name() == "eval" {
							release()
						}
					}
				default:
					hook.after = func(cmd redis.Cmder) {
						if cmd.Name() == "evalsha" || cmd.Name() == "eval" {
							go func() {
								time.Sleep(50 * time.Millisecond)
								release()
							}()
						}
					}
				}
				client := b.Client(t)
				client.AddHook(hook)
				coord := coordinatorOf(t, b, client)
				start := time.Now()
				cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				l, err := acquire(cctx, coord, "n", time.Minute)
				if err != nil {
					t.Fatalf("Acquire: %v", err)
				}
				if d := time.Since(start); d > bound {
					t.Errorf("the waiter held the lock %v after it started waiting; want well under the 5 s re-check", d)
				}
				if _, err := l.Release(ctx); err != nil {
					t.Fatal(err)
				}
				// The holder's release ran on the server before the waiter
				// could take the lock, but its call may not have returned
				// yet (a goroutine of the sleeping case, descheduled after
				// the server answered): the test must not end, closing the
				// holder's client, before it does.
				select {
				case <-released:
				case <-time.After(10 * time.Second):
					t.Fatal("the holder's Release has not returned 10 s after the waiter released the lock")
				}
			})
		})
	}
}

// Two waiters: the first release wakes both, one takes the lock and the
// other marks the new holder's value before it sleeps again, so the second
// release (of a lock taken without a mark) notifies it too. Each wake-up is
// the release's notification: the waiter's attempt after a release is sent
// less than the 5 s re-check after its previous one came back, and each
// waiter makes exactly the attempts this story needs.
func TestSecondWaiterWakesOnTheNextRelease(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		holder, err := tryAcquire(ctx, b.Coordinator(t), "w", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		type took struct {
			waiter int
			l      *lock.Lock
		}
		got := make(chan took, 2)
		var logs [2]*attemptLog
		for i := range logs {
			var coord *coordination.Coordinator
			coord, logs[i] = recordingCoordinator(t, b)
			go func() {
				l, err := acquire(ctx, coord, "w", time.Minute)
				if err != nil {
					t.Error(err)
				}
				got <- took{i, l}
			}()
		}
		// Both waiters asleep: each has had the answer of its first attempt
		// (SET) and of its marking one, sent after it subscribed.
		for i, a := range logs {
			a.waitReturned(t, 2, fmt.Sprintf("waiter %d", i+1))
		}
		raw := b.Client(t)
		waitFor(t, func() bool { return raw.Get(ctx, b.Key("w")).Val() == holder.Token()+"+" })
		woken := func(who string, a *attemptLog, n int) {
			t.Helper()
			s := a.spans()
			if len(s) != n {
				t.Fatalf("%s made %d acquire attempts, want %d", who, len(s), n)
			}
			if gap := s[n-1].sent.Sub(s[n-2].returned); gap >= engine.DefaultRecheck {
				t.Errorf("%s's attempt after the release came %v after its previous one: its re-check, not the release's notification", who, gap)
			}
		}
		if _, err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		var first took
		select {
		case first = <-got:
		case <-time.After(10 * time.Second):
			t.Fatal("no waiter took the lock after the release")
		}
		if first.l == nil {
			t.Fatal("the first waiter failed")
		}
		second := logs[1-first.waiter]
		// The other waiter's attempt after the first release marked the new
		// holder's value.
		waitFor(t, func() bool { return raw.Get(ctx, b.Key("w")).Val() == first.l.Token()+"+" })
		second.waitReturned(t, 3, "the second waiter")
		woken("the first waiter", logs[first.waiter], 3)
		woken("the second waiter, at the first release,", second, 3)
		if _, err := first.l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case l := <-got:
			if l.l == nil {
				t.Fatal("the second waiter failed")
			}
			l.l.Release(ctx)
		case <-time.After(10 * time.Second):
			t.Fatal("the second waiter did not wake on the second release")
		}
		woken("the second waiter, at the second release,", second, 4)
	})
}

// span is one acquire attempt: when it was sent and when its reply came
// back.
type span struct{ sent, returned time.Time }

// attemptLog records, as a go-redis hook, the acquire attempts one client
// sends: the lock's SET NX and lock_acquire runs, and lease_acquire runs
// (a field lease's). An EVALSHA answered NOSCRIPT is not an attempt: the
// EVAL that follows is. With ref set, a reference timer of ref is
// started as each attempt's reply comes back ([attemptLog.timerLag]).
type attemptLog struct {
	ref  time.Duration
	mu   sync.Mutex
	log  []span
	lags []chan time.Duration
}

// timerLag returns how late the reference timer started when attempt i
// (from 0) came back fired.
func (a *attemptLog) timerLag(i int) time.Duration {
	a.mu.Lock()
	c := a.lags[i]
	a.mu.Unlock()
	return <-c
}

// spans returns the attempts so far, in order.
func (a *attemptLog) spans() []span {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.log)
}

// waitReturned waits until n attempts have had their reply.
func (a *attemptLog) waitReturned(t *testing.T, n int, what string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); len(a.spans()) < n; {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d acquire attempts after 10 s, want %d", what, len(a.spans()), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func (a *attemptLog) DialHook(next redis.DialHook) redis.DialHook { return next }

func (a *attemptLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !strings.EqualFold(cmd.Name(), "set") && !testharness.RunsScript(cmd, lockcore.Acquire.Hash()) && !testharness.RunsScript(cmd, lock.FieldAcquire.Hash()) {
			return next(ctx, cmd)
		}
		sent := time.Now()
		err := next(ctx, cmd)
		if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			return err
		}
		returned := time.Now()
		a.mu.Lock()
		a.log = append(a.log, span{sent, returned})
		if a.ref > 0 {
			c := make(chan time.Duration, 1)
			a.lags = append(a.lags, c)
			time.AfterFunc(a.ref, func() { c <- time.Since(returned) - a.ref })
		}
		a.mu.Unlock()
		return err
	}
}

func (a *attemptLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// recordingCoordinator returns a coordinator over a new client of b whose
// acquire attempts are recorded in the returned log.
func recordingCoordinator(t *testing.T, b *testharness.Backend) (*coordination.Coordinator, *attemptLog) {
	t.Helper()
	client := b.Client(t)
	a := &attemptLog{}
	client.AddHook(a)
	return coordinatorOf(t, b, client), a
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func coordinatorOf(t *testing.T, b *testharness.Backend, client redis.UniversalClient) *coordination.Coordinator {
	t.Helper()
	coord, err := coordination.New(client, coordination.WithKeyPrefix(b.Prefix()))
	if err != nil {
		t.Fatal(err)
	}
	return coord
}
