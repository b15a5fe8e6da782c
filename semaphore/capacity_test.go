package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/semaphore"
)

// noRecheck is a re-check period longer than any of these tests: a waiter
// that returns promptly was woken by a notification.
const noRecheck = time.Minute

// wantState fails the test unless s's state is want.
func wantState(t testing.TB, s *semaphore.Semaphore, want semaphore.State) {
	t.Helper()
	st, err := s.State(context.Background())
	if err != nil || st != want {
		t.Fatalf("State = %+v, %v; want %+v", st, err, want)
	}
}

// waitingRecord waits until a refused blocked acquisition (or a drain)
// recorded itself in the key: it is then subscribed and asleep.
func waitingRecord(t testing.TB, b *testharness.Backend, raw redis.UniversalClient) {
	t.Helper()
	eventually(t, 5*time.Second, "the \"waiting\" record", func() bool {
		_, err := raw.ZScore(context.Background(), b.Key(key), "waiting").Result()
		return err == nil
	})
}

type acquired struct {
	p   *semaphore.Permit
	err error
	at  time.Time
}

// Raising the capacity wakes a waiter blocked in Acquire (in another
// process: another coordinator) at once, and grants it; the key keeps the
// capacity set, without a TTL, after the last release.
func TestSetCapacityRaiseWakesBlockedWaiter(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		admin := newSem(t, b.Coordinator(t), 1)
		waiter := newSem(t, b.Coordinator(t), 1, semaphore.WithRecheck(noRecheck))
		holder := mustAcquireN(t, admin, 1, time.Minute)

		got := make(chan acquired, 1)
		go func() {
			p, err := waiter.Acquire(ctx, time.Minute)
			got <- acquired{p, err, time.Now()}
		}()
		waitingRecord(t, b, raw)
		select {
		case r := <-got:
			t.Fatalf("Acquire returned %v, %v at capacity 1 with 1 held", r.p, r.err)
		default:
		}
		raised := time.Now()
		if err := admin.SetCapacity(ctx, 3); err != nil {
			t.Fatalf("SetCapacity(3): %v", err)
		}
		var r acquired
		select {
		case r = <-got:
		case <-time.After(5 * time.Second):
			t.Fatal("the waiter was not granted within 5 s of raising the capacity")
		}
		if r.err != nil {
			t.Fatalf("Acquire after the raise: %v", r.err)
		}
		if d := r.at.Sub(raised); d > 2*time.Second {
			t.Fatalf("the waiter took %v after the raise; want it woken by the notification (re-check %v)", d, noRecheck)
		}
		wantState(t, waiter, semaphore.State{Capacity: 3, Used: 2, Holders: 2, CapacitySet: true})
		if at, err := raw.PExpireTime(ctx, b.Key(key)).Result(); err != nil || at != -1 {
			t.Fatalf("PEXPIRETIME = %v, %v; want -1 (a key holding a capacity set has no TTL)", at, err)
		}
		// The third permit, then none.
		third := mustAcquireN(t, admin, 1, time.Minute)
		p, err := waiter.TryAcquire(ctx, time.Minute)
		wantNotAcquired(t, p, err)

		for _, p := range []*semaphore.Permit{holder, r.p, third} {
			if out := release(t, p); out != coordination.Released {
				t.Fatalf("Release = %v", out)
			}
		}
		// The key stays with its capacity set (and the records only).
		if got := snapshot(t, b, raw); got != "capacity-set=-3 expires=-1ns" {
			t.Fatalf("key after the last release = %s; want capacity-set=-3 expires=-1ns (no TTL)", got)
		}
		wantState(t, admin, semaphore.State{Capacity: 3, CapacitySet: true})
	})
}

// Lowering the capacity revokes nothing: the holders keep, renew and
// release their permits; nothing is granted until the permits in use fall
// below the new capacity.
func TestSetCapacityLowerKeepsHeldPermits(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		s := newSem(t, b.Coordinator(t), 4)
		var held []*semaphore.Permit
		for range 4 {
			held = append(held, mustAcquireN(t, s, 1, time.Minute))
		}
		if err := s.SetCapacity(ctx, 2); err != nil {
			t.Fatalf("SetCapacity(2): %v", err)
		}
		wantState(t, s, semaphore.State{Capacity: 2, Used: 4, Holders: 4, CapacitySet: true})
		for i, p := range held {
			if ok, err := p.Verify(ctx); !ok || err != nil {
				t.Fatalf("permit %d after lowering: Verify = %v, %v; want true", i, ok, err)
			}
			if ok, err := p.Refresh(ctx, time.Minute); !ok || err != nil {
				t.Fatalf("permit %d after lowering: Refresh = %v, %v; want true", i, ok, err)
			}
		}
		// 4, 3 and 2 in use: nothing is granted.
		for i := range 3 {
			p, err := s.TryAcquire(ctx, time.Minute)
			wantNotAcquired(t, p, err)
			release(t, held[i])
		}
		// 1 in use of 2: one grant, then none.
		p := mustAcquireN(t, s, 1, time.Minute)
		wantState(t, s, semaphore.State{Capacity: 2, Used: 2, Holders: 2, CapacitySet: true})
		q, err := s.TryAcquire(ctx, time.Minute)
		wantNotAcquired(t, q, err)
		release(t, p)
		release(t, held[3])
		wantState(t, s, semaphore.State{Capacity: 2, CapacitySet: true})
	})
}

// Drain stops every grant, waits until the held permits are released (or
// expire), and Resume grants again, waking the blocked waiters.
func TestDrainWaitsThenResumes(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		ops := newSem(t, b.Coordinator(t), 3, semaphore.WithRecheck(noRecheck))
		worker := newSem(t, b.Coordinator(t), 3, semaphore.WithRecheck(noRecheck))
		p1 := mustAcquireN(t, worker, 1, time.Minute)
		p2 := mustAcquireN(t, worker, 1, time.Minute)

		drained := make(chan error, 1)
		go func() { drained <- ops.Drain(ctx) }()
		waitingRecord(t, b, raw)
		wantState(t, worker, semaphore.State{Capacity: 3, Used: 2, Holders: 2, CapacitySet: true, Draining: true})
		// Nothing is granted, with one permit free of 3.
		p, err := worker.TryAcquire(ctx, time.Minute)
		wantNotAcquired(t, p, err)
		got := make(chan acquired, 1)
		go func() {
			p, err := worker.Acquire(ctx, time.Minute)
			got <- acquired{p, err, time.Now()}
		}()

		release(t, p1)
		select {
		case err := <-drained:
			t.Fatalf("Drain returned %v with a permit held", err)
		case <-time.After(300 * time.Millisecond):
		}
		if ok, err := p2.Refresh(ctx, time.Minute); !ok || err != nil {
			t.Fatalf("a held permit while draining: Refresh = %v, %v; want true", ok, err)
		}
		lastOut := time.Now()
		release(t, p2)
		select {
		case err := <-drained:
			if err != nil {
				t.Fatalf("Drain: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Drain did not return within 5 s of the last release")
		}
		if d := time.Since(lastOut); d > 2*time.Second {
			t.Fatalf("Drain took %v after the last release; want it woken by the notification", d)
		}
		// Drained, not resumed: still nothing is granted.
		select {
		case r := <-got:
			t.Fatalf("Acquire returned %v, %v while drained", r.p, r.err)
		case <-time.After(200 * time.Millisecond):
		}
		wantState(t, ops, semaphore.State{Capacity: 3, CapacitySet: true, Draining: true})
		// A second Drain returns at once.
		if err := ops.Drain(ctx); err != nil {
			t.Fatalf("Drain of a drained semaphore: %v", err)
		}

		resumed := time.Now()
		if err := ops.Resume(ctx); err != nil {
			t.Fatalf("Resume: %v", err)
		}
		var r acquired
		select {
		case r = <-got:
		case <-time.After(5 * time.Second):
			t.Fatal("the blocked Acquire was not granted within 5 s of Resume")
		}
		if r.err != nil {
			t.Fatalf("Acquire after Resume: %v", r.err)
		}
		if d := r.at.Sub(resumed); d > 2*time.Second {
			t.Fatalf("the waiter took %v after Resume; want it woken by the notification", d)
		}
		wantState(t, ops, semaphore.State{Capacity: 3, Used: 1, Holders: 1, CapacitySet: true})
		// Resume again changes nothing.
		before := snapshot(t, b, raw)
		if err := ops.Resume(ctx); err != nil {
			t.Fatalf("second Resume: %v", err)
		}
		if after := snapshot(t, b, raw); after != before {
			t.Fatalf("a second Resume wrote:\nbefore %s\nafter  %s", before, after)
		}
		release(t, r.p)
	})
}

// A Drain whose context ends while permits are held gives up with an
// error matching ErrNotAcquired and the context's cause; the drain stays
// until Resume. A held permit that expires ends a drain as a release does.
func TestDrainGivesUpAndExpiryEndsIt(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		s := newSem(t, b.Coordinator(t), 2)
		p := mustAcquireN(t, s, 1, time.Minute)
		dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		err := s.Drain(dctx)
		cancel()
		if !errors.Is(err, coordination.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Drain with a permit held past ctx = %v; want ErrNotAcquired and DeadlineExceeded", err)
		}
		wantState(t, s, semaphore.State{Capacity: 2, Used: 1, Holders: 1, CapacitySet: true, Draining: true})
		if st, _ := s.State(ctx); st.Free(st.Capacity) != 0 {
			t.Fatalf("Free while draining = %d; want 0", st.Free(st.Capacity))
		}
		q, err := s.TryAcquire(ctx, time.Minute)
		wantNotAcquired(t, q, err)
		release(t, p)

		// A permit that expires (its holder crashed).
		const ttl = 500 * time.Millisecond
		if err := s.Resume(ctx); err != nil {
			t.Fatal(err)
		}
		mustAcquireN(t, s, 2, ttl)
		done := make(chan error, 1)
		go func() { done <- s.Drain(ctx) }()
		if b.IsMini() {
			time.Sleep(100 * time.Millisecond) // the drain read the permit's expiry
			b.Advance(ttl + 100*time.Millisecond)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Drain: %v", err)
			}
		case <-time.After(ttl + 5*time.Second):
			t.Fatal("Drain did not return within 5 s of the permit's expiry")
		}
		wantState(t, s, semaphore.State{Capacity: 2, CapacitySet: true, Draining: true})
	})
}

// Two Semaphore values on one key with different capacities given to New:
// without a capacity set in the key the second is refused with
// ErrConfigMismatch while a permit is live; once one sets a capacity, both
// grant by it, whatever New was given; a caller still takes at most its
// own New capacity at once.
func TestCapacitySetWinsOverNew(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		two := newSem(t, b.Coordinator(t), 2)
		five := newSem(t, b.Coordinator(t), 5)
		p1 := mustAcquireN(t, two, 1, time.Minute)
		if p, err := five.TryAcquire(ctx, time.Minute); !errors.Is(err, coordination.ErrConfigMismatch) || p != nil {
			t.Fatalf("capacity 5 on a key of capacity 2 with a live permit: %v, %v; want ErrConfigMismatch", p, err)
		}

		if err := two.SetCapacity(ctx, 3); err != nil {
			t.Fatalf("SetCapacity(3): %v", err)
		}
		p2 := mustAcquireN(t, five, 1, time.Minute) // no mismatch: 2 of 3
		if p, err := five.TryAcquireN(ctx, 2, time.Minute); !errors.Is(err, coordination.ErrNotAcquired) || p != nil {
			t.Fatalf("TryAcquireN(2) with 2 of 3 used: %v, %v; want ErrNotAcquired", p, err)
		}
		p3 := mustAcquireN(t, five, 1, time.Minute)
		p, err := two.TryAcquire(ctx, time.Minute)
		wantNotAcquired(t, p, err)
		for _, s := range []*semaphore.Semaphore{two, five} {
			wantState(t, s, semaphore.State{Capacity: 3, Used: 3, Holders: 3, CapacitySet: true})
		}
		if two.Capacity() != 2 || five.Capacity() != 5 {
			t.Fatalf("Capacity() = %d, %d; want New's 2 and 5", two.Capacity(), five.Capacity())
		}
		for _, p := range []*semaphore.Permit{p1, p2, p3} {
			release(t, p)
		}
		// n is bounded by New's capacity, whatever the key's.
		if _, err := two.TryAcquireN(ctx, 3, time.Minute); !errors.Is(err, coordination.ErrInvalidArgument) {
			t.Fatalf("TryAcquireN(3) on a Semaphore of capacity 2 = %v; want ErrInvalidArgument", err)
		}
		// A larger request than the capacity set waits, and is granted
		// once the capacity is raised; a newcomer's capacity changes
		// nothing of the key's.
		four := mustAcquireN(t, five, 3, time.Minute)
		release(t, four)
		if _, err := five.TryAcquireN(ctx, 4, time.Minute); !errors.Is(err, coordination.ErrNotAcquired) {
			t.Fatalf("TryAcquireN(4) at capacity 3, none used = %v; want ErrNotAcquired", err)
		}
		seven := newSem(t, b.Coordinator(t), 7)
		q := mustAcquireN(t, seven, 3, time.Minute)
		wantState(t, seven, semaphore.State{Capacity: 3, Used: 3, Holders: 1, CapacitySet: true})
		release(t, q)
		if err := seven.SetCapacity(ctx, 4); err != nil {
			t.Fatal(err)
		}
		release(t, mustAcquireN(t, five, 4, time.Minute))
	})
}

// Bad input changes nothing in Redis: a capacity set (and a drain) on a
// key that holds something else, or a semaphore's key with a record out of
// layout, fails with ErrBadState and leaves the key as it was.
func TestSetCapacityRefusesForeignKey(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		s := newSem(t, b.Coordinator(t), 2)
		for _, setup := range []struct {
			name  string
			write func() error
			want  error
		}{
			{"a string", func() error { return raw.Set(ctx, b.Key(key), "x", 0).Err() }, nil},
			{"no capacity record", func() error { return raw.ZAdd(ctx, b.Key(key), redis.Z{Score: -1, Member: "multi"}).Err() }, coordination.ErrBadState},
			{"a bad draining record", func() error {
				return raw.ZAdd(ctx, b.Key(key), redis.Z{Score: -2, Member: "capacity-set"}, redis.Z{Score: 3, Member: "draining"}).Err()
			}, coordination.ErrBadState},
			{"a bad capacity-set record", func() error {
				return raw.ZAdd(ctx, b.Key(key), redis.Z{Score: -2.5, Member: "capacity-set"}).Err()
			}, coordination.ErrBadState},
		} {
			raw.Del(ctx, b.Key(key))
			if err := setup.write(); err != nil {
				t.Fatal(err)
			}
			dump := func() string {
				if typ, _ := raw.Type(ctx, b.Key(key)).Result(); typ != "zset" {
					v, _ := raw.Get(ctx, b.Key(key)).Result()
					return typ + " " + v
				}
				return snapshot(t, b, raw)
			}
			before := dump()
			for _, call := range []func() error{
				func() error { return s.SetCapacity(ctx, 3) },
				func() error { return s.Drain(ctx) },
				func() error { return s.Resume(ctx) },
			} {
				err := call()
				if err == nil || (setup.want != nil && !errors.Is(err, setup.want)) {
					t.Fatalf("%s: err = %v; want %v", setup.name, err, setup.want)
				}
				if after := dump(); after != before {
					t.Fatalf("%s: the refused call wrote to the key", setup.name)
				}
			}
		}
		raw.Del(ctx, b.Key(key))
	})
}

// Goroutines acquire and release while the capacity moves (raised,
// lowered, drained and resumed): no grant ever makes the permits held
// exceed the largest capacity in force while it was asked for. The
// controller publishes an upper bound of the capacity in force: raised
// before the server's, lowered after it, so the server's capacity is
// never above it; a grant's permits in use, counted by the workers after
// the grant returned and before each release is sent (never above the
// server's count), must not exceed the bound's highest value between the
// acquisition's start and its return.
func TestCapacityMovesUnderLoad(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		const (
			workers = 6
			rounds  = 25
			maxCap  = 5
		)
		admin := newSem(t, b.Coordinator(t), maxCap)
		if err := admin.SetCapacity(ctx, 3); err != nil {
			t.Fatal(err)
		}
		var (
			mu      sync.Mutex
			history = []int64{3} // bounds, in order; the last is current
			inUse   atomic.Int64
			grants  atomic.Int64
			stop    = make(chan struct{})
			errs    = make(chan error, workers*rounds+1) // never blocks a worker
		)
		bound := func() int {
			mu.Lock()
			defer mu.Unlock()
			return len(history) - 1
		}
		maxSince := func(i int) int64 {
			mu.Lock()
			defer mu.Unlock()
			m := int64(0)
			for _, v := range history[i:] {
				m = max(m, v)
			}
			return m
		}
		set := func(v int64) {
			mu.Lock()
			history = append(history, v)
			mu.Unlock()
		}
		var ctl sync.WaitGroup
		ctl.Add(1)
		go func() {
			defer ctl.Done()
			rng := rand.New(rand.NewPCG(1, 2))
			cur := int64(3)
			for {
				select {
				case <-stop:
					return
				default:
				}
				next := 1 + rng.Int64N(maxCap)
				if next > cur {
					set(next)
				}
				if err := admin.SetCapacity(ctx, next); err != nil {
					errs <- fmt.Errorf("SetCapacity(%d): %w", next, err)
					return
				}
				if next <= cur {
					set(next)
				}
				cur = next
				if rng.IntN(4) == 0 {
					dctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
					err := admin.Drain(dctx)
					cancel()
					if err != nil && !errors.Is(err, context.DeadlineExceeded) {
						errs <- fmt.Errorf("Drain: %w", err)
						return
					}
					if err := admin.Resume(ctx); err != nil {
						errs <- fmt.Errorf("Resume: %w", err)
						return
					}
				}
				time.Sleep(time.Duration(2+rng.IntN(8)) * time.Millisecond)
			}
		}()
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := newSem(t, b.Coordinator(t), maxCap, semaphore.WithRecheck(50*time.Millisecond))
				rng := rand.New(rand.NewPCG(uint64(w), 7))
				for range rounds {
					n := 1 + rng.Int64N(2)
					from := bound()
					actx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
					p, err := s.AcquireN(actx, n, time.Minute)
					cancel()
					if errors.Is(err, context.DeadlineExceeded) {
						// Refused until ctx ended, or (a loaded machine) no
						// attempt answered in time: no grant. A permit an
						// unanswered attempt took is given back in the
						// background; uncounted here, it only makes the
						// server's count higher than the workers'.
						continue
					}
					if err != nil {
						errs <- fmt.Errorf("AcquireN(%d): %w", n, err)
						return
					}
					grants.Add(1)
					now := inUse.Add(n)
					if limit := maxSince(from); now > limit {
						errs <- fmt.Errorf("%d permits held after a grant of %d; the capacity in force was at most %d", now, n, limit)
					}
					time.Sleep(time.Duration(rng.IntN(5)) * time.Millisecond)
					inUse.Add(-n)
					if _, err := p.Release(ctx); err != nil {
						errs <- fmt.Errorf("Release: %w", err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(stop)
		ctl.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if grants.Load() == 0 {
			t.Fatal("no grant at all")
		}
		st, err := admin.State(ctx)
		if err != nil || st.Used != 0 || st.Holders != 0 || !st.CapacitySet || st.Draining {
			t.Fatalf("State after the load = %+v, %v; want nothing used, capacity set, not draining", st, err)
		}
		t.Logf("%d grants of %d attempts, %d capacity changes", grants.Load(), workers*rounds, len(history)-1)
	})
}
