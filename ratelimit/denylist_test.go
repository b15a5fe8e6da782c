package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// readCounter is a go-redis hook counting deny-list reads (the read
// script's EVALSHA or EVAL).
type readCounter struct{ n atomic.Int32 }

func (r *readCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *readCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if sha, ok := scriptOf(cmd); ok && sha == denyReadScript.Hash() {
			r.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (r *readCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// scriptOf returns the SHA of an EVALSHA (EVALs do not occur once scripts
// are loaded).
func scriptOf(cmd redis.Cmder) (string, bool) {
	if cmd.Name() != "evalsha" || len(cmd.Args()) < 2 {
		return "", false
	}
	// The engine sends the SHA as a counted argument that prints as it.
	switch s := cmd.Args()[1].(type) {
	case string:
		return s, true
	case fmt.Stringer:
		return s.String(), true
	}
	return "", false
}

// denyFixture is a deny list on a client whose reads are counted.
func denyFixture(t *testing.T, b *testharness.Backend, key string, opts ...DenyListOption) (*DenyList, *readCounter, *coordination.Coordinator) {
	t.Helper()
	client := b.Client(t)
	reads := &readCounter{}
	client.AddHook(reads)
	coord := withClient(t, b, client)
	d, err := NewDenyList(coord, key, opts...)
	if err != nil {
		t.Fatal(err)
	}
	// SCRIPT LOAD as the default user: it is not the library's to send.
	admin, err := NewDenyList(withClient(t, b, testharness.AdminOf(t, client)), key)
	if err != nil {
		t.Fatal(err)
	}
	if err := denyReadScript.Load(context.Background(), admin.e); err != nil {
		t.Fatal(err)
	}
	return d, reads, coord
}

// A denied identity is refused before any capacity work: the limiter's key
// is never created, nothing queues, the lease says Denied without
// RetryAfter, and coordination.rate_limit.blocked counts reason=deny_list.
func TestDenyListRefusesBeforeCapacity(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		mp := &meterRecorder{adds: map[string]int64{}}
		c := b.Coordinator(t, coordination.WithMeterProvider(mp))
		list, err := NewDenyList(c, "deny")
		if err != nil {
			t.Fatal(err)
		}
		if err := list.Deny(ctx, "customer:42"); err != nil {
			t.Fatal(err)
		}
		for _, k := range every {
			key := "denied:" + string(k)
			l := build(t, c, k, key, 3, time.Minute, WithDenyList(list, "customer:42"))
			for _, permits := range []int{0, 1, 3} {
				le := acquire(t, l, permits)
				if le.Acquired() || !le.Denied() || le.Available() != -1 {
					t.Fatalf("%s: a denied identity: acquired=%v denied=%v available=%d", k, le.Acquired(), le.Denied(), le.Available())
				}
				if _, ok := le.RetryAfter(); ok {
					t.Fatalf("%s: a denied lease has a RetryAfter", k)
				}
			}
			le, err := l.Wait(ctx, 1)
			var we *WaitError
			if !errors.As(err, &we) || !we.Denied || we.PastDeadline || we.RetryAfter != 0 || we.Err != nil ||
				!errors.Is(err, coordination.ErrNotAcquired) || le.Acquired() || l.Statistics().QueuedPermits != 0 {
				t.Fatalf("%s: Wait for a denied identity: %v acquired=%v queued=%d, want a WaitError with Denied", k, err, le.Acquired(), l.Statistics().QueuedPermits)
			}
			if n, _ := raw.Exists(ctx, b.Key(key)).Result(); n != 0 {
				t.Fatalf("%s: a denied identity touched the capacity key", k)
			}
		}
		if got := mp.snapshot()["coordination.rate_limit.blocked{reason=deny_list}"]; got != int64(4*len(every)) {
			t.Fatalf("blocked{reason=deny_list} = %d, want %d", got, 4*len(every))
		}
		// Another identity passes; removal is seen at once here.
		ok := build(t, c, kGCRA, "allowed", 3, time.Minute, WithDenyList(list, "customer:7"))
		if !acquire(t, ok, 1).Acquired() {
			t.Fatal("an identity not on the list was refused")
		}
		gone := build(t, c, kGCRA, "removed", 3, time.Minute, WithDenyList(list, "customer:42"))
		if err := list.Remove(ctx, "customer:42"); err != nil {
			t.Fatal(err)
		}
		if !acquire(t, gone, 1).Acquired() {
			t.Fatal("an identity taken off the list is still refused here")
		}
		if n, _ := raw.SCard(ctx, b.Key("deny")).Result(); n != 0 {
			t.Fatalf("the deny list holds %d members after the removal", n)
		}
	})
}

// The local cache: a membership is used for its lifetime from the start
// of its read (a change elsewhere shows after it), at most capacity
// identities are kept (expired ones dropped first, then the least recently
// used), Invalidate forgets everything, 50 concurrent misses for one
// identity share one read, and a failed read is not cached.
func TestDenyListCache(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		other, err := NewDenyList(b.Coordinator(t), "cache")
		if err != nil {
			t.Fatal(err)
		}
		denied := func(d *DenyList, id string) bool {
			t.Helper()
			v, err := d.Denied(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}

		// The cache runs on the local clock (there is no clock to inject):
		// lifetimes are seconds, far longer than the few calls each check
		// makes, and every wait is for a deadline computed from timestamps
		// taken around the calls, so a late wake-up cannot change an answer.
		const lifetime = 4 * time.Second

		t.Run("lifetime", func(t *testing.T) {
			d, reads, _ := denyFixture(t, b, "cache", WithDenyCache(16, lifetime))
			before := time.Now() // the entry's read starts after this
			if denied(d, "a") {
				t.Fatal("a is denied")
			}
			// ... and before this: the entry expires by after+lifetime.
			after := time.Now()
			if err := other.Deny(ctx, "a"); err != nil { // another process
				t.Fatal(err)
			}
			if denied(d, "a") || reads.n.Load() != 1 {
				t.Fatalf("within the lifetime (%v since the read): read %d times, want the cached answer", time.Since(before), reads.n.Load())
			}
			time.Sleep(time.Until(after.Add(lifetime)))
			if !denied(d, "a") || reads.n.Load() != 2 {
				t.Fatalf("after the lifetime: read %d times, want a fresh read saying denied", reads.n.Load())
			}
			if err := other.Remove(ctx, "a"); err != nil {
				t.Fatal(err)
			}
			d.Invalidate()
			if denied(d, "a") || reads.n.Load() != 3 {
				t.Fatalf("after Invalidate: read %d times", reads.n.Load())
			}
			if err := d.Deny(ctx, "a"); err != nil { // a write here clears the entry here
				t.Fatal(err)
			}
			if !denied(d, "a") {
				t.Fatal("a write here is not seen here at once")
			}
			if err := d.Remove(ctx, "a"); err != nil {
				t.Fatal(err)
			}
		})

		t.Run("capacity", func(t *testing.T) {
			d, reads, _ := denyFixture(t, b, "cache", WithDenyCache(2, time.Minute))
			denied(d, "a")
			denied(d, "b")
			denied(d, "a") // a hit: a is the most recent
			denied(d, "c") // full: b, the least recently used, goes
			if reads.n.Load() != 3 {
				t.Fatalf("%d reads for a, b, a, c; want 3", reads.n.Load())
			}
			denied(d, "a")
			denied(d, "c")
			if reads.n.Load() != 3 {
				t.Fatalf("a and c were not kept: %d reads", reads.n.Load())
			}
			denied(d, "b")
			if reads.n.Load() != 4 {
				t.Fatalf("b was kept beyond the capacity: %d reads", reads.n.Load())
			}
			// Expired entries go before the least recently used: old is read
			// first and young half a lifetime later, then old is used again
			// (the most recent, its lifetime not extended). Once old has
			// expired, and while young has not, new takes old's place:
			// young, the least recently used but live, stays.
			//
			// The margins are half a lifetime (2 s) of the local clock: an
			// entry lives a lifetime from the start of its read, and every
			// step is timed, so that each check expects what the times
			// measured allow. A stall over 2 s may let old expire before
			// its second use (it is read again, and then lives on), or
			// young before its last lookup.
			e, reads, _ := denyFixture(t, b, "cache", WithDenyCache(2, lifetime))
			oldFrom := time.Now() // old's read starts after this
			denied(e, "old")
			oldBy := time.Now() // ... and before this
			time.Sleep(lifetime / 2)
			youngFrom := time.Now()
			denied(e, "young")
			youngBy := time.Now()
			denied(e, "old") // a hit: old is the most recent
			reread := false  // a stall: old had expired, and was read again
			if n := reads.n.Load(); n != 2 {
				if n != 3 || time.Now().Before(oldFrom.Add(lifetime)) {
					t.Fatalf("%d reads for old, young, old (%v after old's read); want 2", n, time.Since(oldBy))
				}
				reread = true
				t.Logf("old was used again %v after its read, past its lifetime %v: read again", time.Since(oldFrom), lifetime)
			}
			time.Sleep(time.Until(oldBy.Add(lifetime))) // old has expired; young, read later, has not
			denied(e, "new")                            // full: the expired old goes, young stays
			denied(e, "young")
			n, late := reads.n.Load(), time.Since(youngFrom)
			var want []int32
			switch {
			case !reread && late < lifetime:
				want = []int32{3} // young kept
			case !reread:
				want = []int32{3, 4} // young may have expired too: read again
			case time.Now().Before(youngBy.Add(lifetime)):
				// Old, read again after youngBy, was live: new took the
				// least recently used young's place; young is read again.
				want = []int32{5}
			default:
				want = []int32{4, 5} // old may have expired again, young too
			}
			if !slices.Contains(want, n) {
				t.Fatalf("%d reads; want %v: young kept while live %v after its read (lifetime %v)", n, want, late, lifetime)
			}
			if len(want) > 1 || reread {
				t.Logf("%d reads (%v allowed): young was looked up %v after its read (lifetime %v)", n, want, late, lifetime)
			}
		})

		t.Run("one read for concurrent misses", func(t *testing.T) {
			d, reads, _ := denyFixture(t, b, "cache")
			faults := &testharness.ScriptFaults{}
			d.e.Client().AddHook(faults) // the read takes a while: every caller misses meanwhile
			faults.Add(testharness.Fault{SHA: denyReadScript.Hash(), Before: 200 * time.Millisecond})
			var wg sync.WaitGroup
			var bad atomic.Int32
			for range 50 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if v, err := d.Denied(ctx, "x"); err != nil || v {
						bad.Add(1)
					}
				}()
			}
			wg.Wait()
			if bad.Load() != 0 || reads.n.Load() != 1 {
				t.Fatalf("50 concurrent misses: %d bad answers, %d reads; want 0 and 1", bad.Load(), reads.n.Load())
			}
			// A caller whose context ends stops waiting; the others do not.
			faults.Add(testharness.Fault{SHA: denyReadScript.Hash(), Before: 200 * time.Millisecond})
			d.Invalidate()
			cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			defer cancel()
			done := make(chan error, 1)
			go func() { _, err := d.Denied(ctx, "x"); done <- err }()
			if _, err := d.Denied(cctx, "x"); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("a caller whose context ended: %v", err)
			}
			if err := <-done; err != nil {
				t.Fatalf("the other caller: %v", err)
			}
		})

		t.Run("a failed read is not cached", func(t *testing.T) {
			d, reads, coord := denyFixture(t, b, "cache")
			faults := &testharness.ScriptFaults{}
			d.e.Client().AddHook(faults)
			faults.Add(testharness.Fault{SHA: denyReadScript.Hash(), Err: testharness.LoadingError})
			l := build(t, coord, kGCRA, "cache-fail", 3, time.Minute, WithDenyList(d, "x"))
			if _, err := l.Allow(ctx, 1); err == nil || !strings.Contains(err.Error(), "LOADING") {
				t.Fatalf("Allow when the deny list cannot be read: %v, want the error", err)
			}
			if !acquire(t, l, 1).Acquired() || reads.n.Load() != 2 {
				t.Fatalf("after a failed read: %d reads, want the failed one and a fresh one", reads.n.Load())
			}
		})
	})
}

func TestDenyListArguments(t *testing.T) {
	coord, err := coordination.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}))
	if err != nil {
		t.Fatal(err)
	}
	defer coord.Client().Close()
	ctx := context.Background()
	list, err := NewDenyList(coord, "d")
	if err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"coord":    second(NewDenyList(nil, "d")),
		"key":      second(NewDenyList(coord, "")),
		"capacity": second(NewDenyList(coord, "d", WithDenyCache(0, time.Second))),
		"lifetime": second(NewDenyList(coord, "d", WithDenyCache(1, 2*time.Minute))),
		"identity": list.Deny(ctx, ""),
		"denyList": second(newT(coord, "k", GCRA{Burst: 1, Interval: time.Second}, WithDenyList(nil, "x"))),
	} {
		if got, _ := check.ArgumentName(err); got != name {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := list.Denied(ctx, ""); !errors.Is(err, coordination.ErrInvalidArgument) {
		t.Errorf("Denied(\"\"): %v", err)
	}
	if _, err := newT(coord, "k", GCRA{Burst: 1, Interval: time.Second}, WithDenyList(list, "")); !errors.Is(err, coordination.ErrInvalidArgument) {
		t.Errorf("WithDenyList(list, \"\"): %v", err)
	}
}

func second[T any](_ T, err error) error { return err }
