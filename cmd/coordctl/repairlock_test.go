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
	"github.com/coordkit/coordination/rwlease"
	"github.com/coordkit/coordination/semaphore"
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

// repair lock runs the library's force release: an acquirer blocked in
// Acquire (another client) takes the lease at once, not at its next
// re-check (5 s by default; the key was deleted without waking anyone
// before), for a plain and a FIFO lock, a fencing lock, a read-write
// lease's writer and a plain and a FIFO semaphore's permit (whose queue's
// head only the FIFO release wakes at once; a default-order release left
// it to its re-check, within a second).
func TestRepairLockWakesWaiter(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		type lease interface {
			Token() string
		}
		type kind struct {
			name, key string
			// take returns the blocking acquisition on a new coordinator
			// (another client: another process).
			take func() func(ctx context.Context) (lease, error)
		}
		mutex := func(key string, opts ...lock.Option) func() func(ctx context.Context) (lease, error) {
			return func() func(ctx context.Context) (lease, error) {
				m, err := lock.New(b.Coordinator(t), key, opts...)
				if err != nil {
					t.Fatal(err)
				}
				return func(ctx context.Context) (lease, error) { return m.Acquire(ctx, time.Hour) }
			}
		}
		kinds := []kind{
			{"lock", "jobs", mutex("jobs")},
			{"lock", "fifo", mutex("fifo", lock.WithFIFO(true))},
			{"fencing lease", "{f}:lock", func() func(ctx context.Context) (lease, error) {
				m, err := fencing.New(b.Coordinator(t), "{f}:lock", "{f}:fence")
				if err != nil {
					t.Fatal(err)
				}
				return func(ctx context.Context) (lease, error) { return m.Acquire(ctx, time.Hour) }
			}},
			{"rwlease", "rw", func() func(ctx context.Context) (lease, error) {
				m, err := rwlease.New(b.Coordinator(t), "rw")
				if err != nil {
					t.Fatal(err)
				}
				return func(ctx context.Context) (lease, error) { return m.Write(ctx, time.Hour) }
			}},
			{"semaphore", "sem", func() func(ctx context.Context) (lease, error) {
				s, err := semaphore.New(b.Coordinator(t), "sem", 1)
				if err != nil {
					t.Fatal(err)
				}
				return func(ctx context.Context) (lease, error) { return s.Acquire(ctx, time.Hour) }
			}},
			{"semaphore", "fifo-sem", func() func(ctx context.Context) (lease, error) {
				s, err := semaphore.New(b.Coordinator(t), "fifo-sem", 1, semaphore.WithFIFO(true))
				if err != nil {
					t.Fatal(err)
				}
				return func(ctx context.Context) (lease, error) { return s.Acquire(ctx, time.Hour) }
			}},
		}
		for _, k := range kinds {
			held, err := k.take()(ctx)
			if err != nil {
				t.Fatalf("%s: %v", k.key, err)
			}
			type got struct {
				l   lease
				err error
				at  time.Time
			}
			done := make(chan got, 1)
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			acquire := k.take()
			go func() {
				l, err := acquire(wctx)
				done <- got{l, err, time.Now()}
			}()
			time.Sleep(300 * time.Millisecond) // the waiter is blocked
			select {
			case r := <-done:
				t.Fatalf("%s: the waiter did not block: %v", k.key, r.err)
			default:
			}
			start := time.Now()
			expect(t, exitOK, "released the "+k.name+" at", cmdline(b, "repair lock", "--key", k.key, "--owner", held.Token()[:8])...)
			r := <-done
			cancel()
			if r.err != nil {
				t.Fatalf("%s: the waiter: %v", k.key, r.err)
			}
			d := r.at.Sub(start)
			t.Logf("%s (%s): the waiter held it %v after coordctl repair lock started", k.key, k.name, d)
			if d > time.Second {
				t.Fatalf("%s: the waiter took %v after the repair; want at once (well under the 5 s re-check)", k.key, d)
			}
			expect(t, exitRefused, "not by "+held.Token()[:8], cmdline(b, "repair lock", "--key", k.key, "--owner", held.Token()[:8])...)
		}
	})
}
