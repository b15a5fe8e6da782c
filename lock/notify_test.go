package lock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testharness"
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
				holder, err := lock.TryAcquire(ctx, b.Coordinator(t), "n", time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				var once sync.Once
				release := func() {
					once.Do(func() {
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
				l, err := lock.Acquire(cctx, coord, "n", time.Minute)
				if err != nil {
					t.Fatalf("Acquire: %v", err)
				}
				if d := time.Since(start); d > bound {
					t.Errorf("the waiter held the lock %v after it started waiting; want well under the 5 s re-check", d)
				}
				if _, err := l.Release(ctx); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

// Two waiters: the first release wakes both, one takes the lock and the
// other marks the new holder's value before it sleeps again, so the second
// release (of a lock taken without a mark) notifies it too.
func TestSecondWaiterWakesOnTheNextRelease(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		holder, err := lock.TryAcquire(ctx, b.Coordinator(t), "w", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *lock.Lock, 2)
		for range 2 {
			coord := b.Coordinator(t)
			go func() {
				l, err := lock.Acquire(ctx, coord, "w", time.Minute)
				if err != nil {
					t.Error(err)
				}
				got <- l
			}()
		}
		raw := b.Client(t)
		waitFor(t, func() bool { return raw.Get(ctx, b.Key("w")).Val() == holder.Token()+"+" })
		time.Sleep(50 * time.Millisecond) // both waiters asleep
		for _, prev := range []*lock.Lock{holder, nil} {
			if prev == nil {
				select {
				case prev = <-got:
				case <-time.After(time.Second):
					t.Fatal("no waiter took the lock within 1 s of the release")
				}
				waitFor(t, func() bool { return raw.Get(ctx, b.Key("w")).Val() == prev.Token()+"+" })
			}
			released := time.Now()
			if _, err := prev.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if prev != holder {
				select {
				case l := <-got:
					if d := time.Since(released); d > time.Second {
						t.Errorf("the second waiter held the lock %v after the release; want well under the 5 s re-check", d)
					}
					l.Release(ctx)
				case <-time.After(3 * time.Second):
					t.Fatal("the second waiter did not wake on the second release")
				}
			}
		}
	})
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
