package leakcheck_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/latch"
)

// latchKey is the latch of the latch tests.
const latchKey = "done"

// Cancelling Wait changes nothing in Redis, drops the subscription and
// leaks no goroutine.
func TestCancelWait(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		goleak.VerifyNone(t, ignore,
			// Shared servers started by this test stay up for the next tests.
			goleak.IgnoreTopFunction("os/exec.(*Cmd).Wait"),
			goleak.IgnoreAnyFunction("github.com/coordkit/coordination/internal/testkit/testharness.(*Server).start.func1"))
	})
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		raw := b.Raw(t)
		coord := b.Coordinator(t)
		l := mustCreate(t, coord, 2)
		before := snapshot(t, b, raw)
		ctx, cancel := context.WithCancel(context.Background())
		ch := wait(ctx, l)
		stillWaiting(t, ch, 200*time.Millisecond)
		cancel()
		r := within(t, ch, 2*time.Second, "after cancel")
		if r.ok || !errors.Is(r.err, context.Canceled) {
			t.Fatalf("cancelled Wait = %v, %v; want false, context.Canceled", r.ok, r.err)
		}
		if after := snapshot(t, b, raw); after != before {
			t.Fatalf("a cancelled Wait changed the key:\nbefore %s\nafter  %s", before, after)
		}
		if !b.IsCluster() { // on a cluster the subscription lives on one node
			n, err := testharness.Subscribers(context.Background(), raw, b.Key(latchKey))
			if err != nil || n != 0 {
				t.Fatalf("PUBSUB NUMSUB after cancel = %v, %v; want 0 subscribers", n, err)
			}
		}
		if n, err := l.Count(context.Background()); n != 2 || err != nil {
			t.Fatalf("Count after a cancelled Wait = %d, %v; want 2", n, err)
		}
	})
}

type waitResult struct {
	ok  bool
	err error
	at  time.Time
}

// wait runs l.Wait(ctx) in the background.
func wait(ctx context.Context, l *latch.Generation) <-chan waitResult {
	ch := make(chan waitResult, 1)
	go func() {
		ok, err := l.Wait(ctx)
		ch <- waitResult{ok, err, time.Now()}
	}()
	return ch
}

// within returns the waiter's result or fails the test after limit.
func within(t testing.TB, ch <-chan waitResult, limit time.Duration, what string) waitResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(limit):
		t.Fatalf("%s: Wait did not return within %v", what, limit)
		return waitResult{}
	}
}

// stillWaiting fails the test if the waiter returns within d.
func stillWaiting(t testing.TB, ch <-chan waitResult, d time.Duration) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("Wait returned %v, %v early", r.ok, r.err)
	case <-time.After(d):
	}
}

// snapshot is the raw content of the latch key and its expiry time.
func snapshot(t testing.TB, b *testharness.Backend, raw redis.UniversalClient) string {
	t.Helper()
	ctx := context.Background()
	h, err := raw.HGetAll(ctx, b.Key(latchKey)).Result()
	if err != nil {
		t.Fatalf("HGETALL: %v", err)
	}
	var kv []string
	for k, v := range h {
		kv = append(kv, k+"="+v)
	}
	sort.Strings(kv)
	at, err := raw.PExpireTime(ctx, b.Key(latchKey)).Result()
	if err != nil {
		t.Fatalf("PEXPIRETIME: %v", err)
	}
	return fmt.Sprintf("%s expires=%v", strings.Join(kv, ","), at)
}

func mustCreate(t testing.TB, coord *coordination.Coordinator, count int64, opts ...latch.Option) *latch.Generation {
	t.Helper()
	lt, err := latch.New(coord, latchKey, opts...)
	if err != nil {
		t.Fatalf("latch.New: %v", err)
	}
	l, err := lt.Create(context.Background(), count)
	if err != nil {
		t.Fatalf("Create(%d): %v", count, err)
	}
	return l
}
