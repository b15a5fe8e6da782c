package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/fencing"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/leader"
	"github.com/coordkit/coordination/lock"
)

// repair lock force-releases a lock or a fencing lock held by the owner
// the caller names (and no other): the holder finds it gone, the next
// acquisition succeeds at once, a fencing lock's next token is higher.
func TestRepairLock(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord := b.Coordinator(t)
		m, err := lock.New(coord, "jobs")
		if err != nil {
			t.Fatal(err)
		}
		held, err := m.TryAcquire(ctx, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		expect(t, exitUsage, "at least the first 8 characters", cmdline(b, "repair lock", "--key", "jobs", "--owner", "abc")...)
		expect(t, exitRefused, "not by zzzzzzzz", cmdline(b, "repair lock", "--key", "jobs", "--owner", "zzzzzzzz")...)
		expect(t, exitOK, "released the lock at", cmdline(b, "repair lock", "--key", "jobs", "--owner", held.Token()[:8])...)
		if ok, err := held.Verify(ctx); ok || err != nil {
			t.Fatalf("the holder's Verify after the repair = %v, %v; want false", ok, err)
		}
		next, err := m.TryAcquire(ctx, time.Hour)
		if err != nil {
			t.Fatalf("the next acquisition after the repair: %v", err)
		}
		expect(t, exitRefused, "no such key", cmdline(b, "repair lock", "--key", "nothing", "--owner", next.Token()[:8])...)
		_, _ = next.Release(ctx)

		fm, err := fencing.New(coord, "{nightly}:lock", "{nightly}:fence")
		if err != nil {
			t.Fatal(err)
		}
		fl, err := fm.TryAcquire(ctx, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		expect(t, exitOK, "released the fencing lease", cmdline(b, "repair lock", "--key", "{nightly}:lock", "--owner", fl.Token())...)
		fl2, err := fm.TryAcquire(ctx, time.Hour)
		if err != nil {
			t.Fatalf("the next fencing acquisition after the repair: %v", err)
		}
		if fl2.FencingToken() <= fl.FencingToken() {
			t.Fatalf("the next token %d is not above %d", fl2.FencingToken(), fl.FencingToken())
		}
		_, _ = fl2.Release(ctx)
		// The fence counter is not a lock. (Since issue 24 the counter is
		// a field of its slot's shared counter hash, not a key: the refusal
		// says there is no such key; the earlier layout's counter key is
		// still refused as a fence counter.)
		expect(t, exitRefused, "no such key", cmdline(b, "repair lock", "--key", "{nightly}:fence", "--owner", fl.Token()[:8])...)
		if err := b.Raw(t).Set(ctx, b.Key("{old}:fence"), "7", 0).Err(); err != nil {
			t.Fatal(err)
		}
		expect(t, exitRefused, "holds a fence counter", cmdline(b, "repair lock", "--key", "{old}:fence", "--owner", fl.Token()[:8])...)
	})
}

// leader resign ends the current term: the leader's term context is
// cancelled (lost) at its next renewal, and with --id only the named
// leader is resigned.
func TestLeaderResign(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		lease, fence := fencedKeys("nightly", "leader")
		terms := make(chan *leader.Term, 4)
		e, err := leader.New(b.Coordinator(t), lease, fence, "worker-7",
			leader.WithLeaseDuration(time.Second), leader.WithRetryDelay(50*time.Millisecond),
			leader.OnElected(func(ctx context.Context, term *leader.Term) error {
				terms <- term
				<-ctx.Done()
				return nil
			}))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- e.Run(ctx) }()
		first := <-terms
		expect(t, exitRefused, "worker-7 leads", cmdline(b, "leader resign", "--key", "nightly", "--id", "worker-9")...)
		expect(t, exitOK, "ended the term of leader worker-7", cmdline(b, "leader resign", "--key", "nightly", "--id", "worker-7")...)
		select {
		case <-first.Context().Done():
			if !errors.Is(context.Cause(first.Context()), coordination.ErrLost) {
				t.Fatalf("the term ended with %v, want a loss", context.Cause(first.Context()))
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the resigned term did not end")
		}
		select {
		case second := <-terms:
			if second.FencingToken() <= first.FencingToken() {
				t.Fatalf("the next term's token %d is not above %d", second.FencingToken(), first.FencingToken())
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no next term")
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		expect(t, exitRefused, "nobody leads election", cmdline(b, "leader resign", "--key", "nightly")...)
		expect(t, exitUsage, "--id is empty", cmdline(b, "leader resign", "--key", "nightly", "--id", "")...)
		expect(t, exitUsage, "at most 256 are allowed", cmdline(b, "leader resign", "--key", "nightly", "--id", strings.Repeat("x", 300))...)
	})
}
