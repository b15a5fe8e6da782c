package rwlease_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/rwlease"
)

// waitFor polls cond every 2 ms until it holds, failing the test after 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// countPrefix counts the key's members starting with p; "waiting-R:"
// counts the waiting readers' markers (R: members scored below 0).
func countPrefix(t *testing.T, got map[string]float64, p string) int {
	n := 0
	for m, sc := range got {
		switch {
		case p == "waiting-R:":
			if strings.HasPrefix(m, "R:") && sc < 0 {
				n++
			}
		case strings.HasPrefix(m, p):
			n++
		}
	}
	return n
}

// Phase-fair: a reader blocked behind a write lease holds the key when
// that lease is released, before a writer that was waiting too; under
// writer preference the waiting writer goes first. The hand-off is one
// release: the release turns the reader's marker into its read lease.
func TestPhaseFairHandsTheNextPhaseToWaitingReaders(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		for _, p := range []rwlease.Policy{rwlease.PhaseFair, rwlease.WriterPreference} {
			t.Run(p.String(), func(t *testing.T) {
				ctx := context.Background()
				name := "pf-" + p.String()
				raw, key := b.Raw(t), b.Key(name)
				mu := func() *rwlease.RWMutex { return newRW(t, b.Coordinator(t), name, rwlease.WithPolicy(p)) }
				w1 := must(mu().TryWrite(ctx, time.Minute))(t)

				type got struct {
					l   *rwlease.Lease
					err error
				}
				reader, writer := make(chan got, 1), make(chan got, 1)
				go func() {
					l, err := mu().Read(ctx, time.Minute)
					reader <- got{l, err}
				}()
				if p == rwlease.PhaseFair {
					waitFor(t, "the blocked reader recorded itself", func() bool { return countPrefix(t, entries(t, raw, key), "waiting-R:") == 1 })
				} else {
					time.Sleep(100 * time.Millisecond)
					if n := countPrefix(t, entries(t, raw, key), "waiting-R:"); n != 0 {
						t.Fatalf("under writer preference a blocked reader recorded itself (%d waiting readers)", n)
					}
				}
				go func() {
					l, err := mu().Write(ctx, time.Minute)
					writer <- got{l, err}
				}()
				waitFor(t, "the blocked writer recorded itself", func() bool { return countPrefix(t, entries(t, raw, key), "Q:") == 1 })

				must(w1.Release(ctx))(t)
				first, second := reader, writer
				if p == rwlease.WriterPreference {
					first, second = writer, reader
				}
				var g got
				select {
				case g = <-first:
				case <-time.After(5 * time.Second):
					t.Fatal("nobody got in after the write lease was released")
				}
				if g.err != nil {
					t.Fatal(g.err)
				}
				select {
				case o := <-second:
					t.Fatalf("%v got in together with the first (%v)", o.l.Mode(), o.err)
				case <-time.After(100 * time.Millisecond):
				}
				if p == rwlease.PhaseFair {
					e := entries(t, raw, key)
					if g.l.Mode() != rwlease.ReadMode || e["R:"+g.l.Token()] <= 0 || countPrefix(t, e, "waiting-R:") != 0 || countPrefix(t, e, "Q:") != 1 {
						t.Fatalf("phase-fair: %v got in first; the key holds %v, want the reader's lease (its marker gone) and the writer's marker", g.l.Mode(), e)
					}
				} else if g.l.Mode() != rwlease.WriteMode {
					t.Fatalf("writer preference: %v got in first", g.l.Mode())
				}
				must(g.l.Release(ctx))(t)
				select {
				case g = <-second:
				case <-time.After(5 * time.Second):
					t.Fatal("the second waiter never got in")
				}
				if g.err != nil {
					t.Fatal(g.err)
				}
				must(g.l.Release(ctx))(t)
				waitFor(t, "the key is gone", func() bool { return len(entries(t, raw, key)) == 0 })
			})
		}
	})
}

// A phase-fair reader that gives up removes its waiting record at once;
// TryRead never records one; an unknown policy is refused by New.
func TestPhaseFairReaderGivingUpLeavesNothing(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw, key := b.Raw(t), b.Key("pf-cancel")
		w := must(newRW(t, b.Coordinator(t), "pf-cancel").TryWrite(ctx, time.Minute))(t)
		// One reader's mutex for the TryRead and the blocking Read: the
		// TryRead has connected it (on a Cluster, discovered the slots), so
		// the Read's deadline is spent waiting, not dialing (a fresh
		// client's first call on a loaded machine outlasted 150 ms).
		rm := newRW(t, b.Coordinator(t), "pf-cancel")
		if _, err := rm.TryRead(ctx, time.Minute); !errors.Is(err, coordination.ErrNotAcquired) {
			t.Fatalf("TryRead while a writer holds: %v", err)
		}
		if n := countPrefix(t, entries(t, raw, key), "waiting-R:"); n != 0 {
			t.Fatalf("TryRead recorded itself as a waiting reader (%d waiting readers)", n)
		}
		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, err := rm.Read(cctx, time.Minute)
		cancel()
		if !errors.Is(err, coordination.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Read giving up: %v", err)
		}
		if e := entries(t, raw, key); len(e) != 1 || e["W:"+w.Token()] <= 0 {
			t.Fatalf("after the reader gave up the key holds %v, want the writer alone", e)
		}
		must(w.Release(ctx))(t)
		if e := entries(t, raw, key); len(e) != 0 {
			t.Fatalf("after the writer released the key holds %v, want nothing (no read lease handed to the reader that left)", e)
		}
		if _, err := rwlease.New(b.Coordinator(t), "x", rwlease.WithPolicy(0)); !errors.Is(err, coordination.ErrInvalidArgument) || !strings.Contains(err.Error(), "policy") {
			t.Fatalf("WithPolicy(0): %v, want ErrInvalidArgument naming policy", err)
		}
	})
}

// loadRun is what 50 readers and 10 writers, each acquiring in a loop and
// holding about 2 ms, got.
type loadRun struct {
	took                        time.Duration
	reads, writes               int64
	minRead, minWrite           int64 // the fewest acquisitions of one reader, one writer
	starvedReads, starvedWrites int   // goroutines that never acquired
}

// load runs the 50-reader, 10-writer load under p until enough(run) holds
// or d passes.
func load(t *testing.T, b *testharness.Backend, name string, p rwlease.Policy, d time.Duration, enough func(loadRun) bool) loadRun {
	const readers, writers = 50, 10
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	coord := b.Coordinator(t)
	m := newRW(t, coord, name, rwlease.WithPolicy(p), rwlease.WithRecheck(time.Second))
	counts := make([]atomic.Int64, readers+writers)
	tally := func() loadRun {
		r := loadRun{minRead: -1, minWrite: -1}
		for i := range counts {
			n := counts[i].Load()
			total, least, starved := &r.reads, &r.minRead, &r.starvedReads
			if i >= readers {
				total, least, starved = &r.writes, &r.minWrite, &r.starvedWrites
			}
			*total += n
			if *least < 0 || n < *least {
				*least = n
			}
			if n == 0 {
				*starved++
			}
		}
		return r
	}
	start := time.Now()
	var wg sync.WaitGroup
	for i := range counts {
		wg.Go(func() {
			v := verbRead
			if i >= readers {
				v = verbWrite
			}
			for ctx.Err() == nil {
				l, err := v(m, ctx, time.Minute)
				if err != nil {
					if ctx.Err() == nil {
						t.Error(err)
					}
					return
				}
				counts[i].Add(1)
				time.Sleep(2 * time.Millisecond)
				if _, err := l.Release(context.Background()); err != nil {
					t.Error(err)
					return
				}
				if enough != nil && enough(tally()) {
					cancel()
				}
			}
		})
	}
	wg.Wait()
	r := tally()
	r.took = time.Since(start)
	return r
}

// Under 50 readers and 10 writers acquiring in loops, phase-fair starves
// neither side: read phases and write phases alternate, so every reader
// gets in and the writers, together, get in again and again (writers are
// not ordered among themselves: which one goes next is chance). The run
// stops once every reader got in and the writers had 5 write phases;
// under the other policies, which each starve one side, that does not
// happen: measured beside it on Redis 8.0 for 1 s each (logged;
// TestWriterPreference and TestWaitingWriterQueuesReaders hold their
// rules).
func TestPhaseFairStarvesNobody(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		r := load(t, b, "load-phase-fair", rwlease.PhaseFair, 30*time.Second, func(r loadRun) bool { return r.starvedReads == 0 && r.writes >= 5 })
		t.Logf("%s phase-fair: every reader in and 5 write phases after %v: %d reads, %d writes", b.Name, r.took.Round(time.Millisecond), r.reads, r.writes)
		if r.starvedReads > 0 || r.writes < 5 {
			t.Errorf("phase-fair after %v: %d readers never got in and the writers got %d write phases, want every reader in and 5", r.took, r.starvedReads, r.writes)
		}
		if b.Name != "redis8" {
			return
		}
		for _, p := range []rwlease.Policy{rwlease.PhaseFair, rwlease.WriterPreference, rwlease.ReaderPreference} {
			r := load(t, b, "load-"+p.String(), p, time.Second, nil)
			t.Logf("%s %v, 1 s: %d reads (%d readers never in), %d writes (%d writers never in)", b.Name, p, r.reads, r.starvedReads, r.writes, r.starvedWrites)
		}
	})
}
