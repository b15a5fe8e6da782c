package ratelimit

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// batchSettings are settings of kind k with capacity n that are back to
// full (or empty) one window w after their last use, refilling nothing in
// a span much shorter than w (except GCRA: n per w, continuously).
func batchSettings(k kind, n int, w time.Duration) Settings {
	switch k {
	case kFixed:
		return FixedWindow{Limit: n, Window: w}
	case kSliding:
		return SlidingWindow{Limit: n, Window: w, Segments: 4}
	case kBucket:
		return TokenBucket{Limit: n, TokensPerPeriod: n, Period: w}
	case kGCRA:
		return GCRA{Burst: n, Rate: n, Period: w}
	default:
		return Composite{Components: []Settings{
			TokenBucket{Limit: n, TokensPerPeriod: n, Period: w},
			FixedWindow{Limit: 2 * n, Window: w},
		}}
	}
}

func TestBatchArguments(t *testing.T) {
	b := testharness.Get(t, "miniredis")
	coord := b.Coordinator(t)
	s := FixedWindow{Limit: 10, Window: time.Second}
	for _, c := range []struct {
		name  string
		block int
		hold  time.Duration
		arg   string
	}{
		{"zero block", 0, time.Millisecond, "block"},
		{"negative block", -1, time.Millisecond, "block"},
		{"block above capacity", 11, time.Millisecond, "block"},
		{"zero hold", 1, 0, "hold"},
		{"sub-millisecond hold", 1, 999 * time.Microsecond, "hold"},
	} {
		_, err := New(coord, "k", s, WithBatch(c.block, c.hold))
		if !errors.Is(err, coordination.ErrInvalidArgument) {
			t.Fatalf("%s: err = %v, want ErrInvalidArgument", c.name, err)
		}
		if name, _ := check.ArgumentName(err); name != c.arg {
			t.Fatalf("%s: err names %q, want %q (%v)", c.name, name, c.arg, err)
		}
	}
	_, err := NewConcurrency(coord, "c", 10, WithBatch(1, time.Second))
	if name, _ := check.ArgumentName(err); !errors.Is(err, coordination.ErrInvalidArgument) || name != "block" {
		t.Fatalf("NewConcurrency with WithBatch: err = %v, want ErrInvalidArgument naming block", err)
	}
	l, err := New(coord, "k", s, WithBatch(10, time.Millisecond))
	if err != nil {
		t.Fatalf("block = capacity: %v", err)
	}
	_ = l.Close()
}

// A context that ended is refused as by an unbatched limiter, although
// the block could serve it: Allow and Wait return its error, no grant.
func TestBatchEndedContext(t *testing.T) {
	b := testharness.Get(t, "miniredis")
	coord := b.Coordinator(t)
	s := FixedWindow{Limit: 100, Window: time.Minute}
	plain, err := New(coord, "plain", s)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	batched, err := New(coord, "batched", s, WithBatch(10, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer batched.Close()
	if d, err := batched.Allow(context.Background(), 1); err != nil || !d.Allowed() {
		t.Fatalf("first Allow: %v, %v", d, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, l := range []*Limiter{plain, batched} {
		if d, err := l.Allow(ctx, 1); !errors.Is(err, context.Canceled) || d.Allowed() {
			t.Errorf("%s: Allow with a cancelled context = %v, %v; want context.Canceled and no grant", l.keys.Full()[0], d, err)
		}
		if d, err := l.Wait(ctx, 1); !errors.Is(err, context.Canceled) || d.Allowed() {
			t.Errorf("%s: Wait with a cancelled context = %v, %v; want context.Canceled and no grant", l.keys.Full()[0], d, err)
		}
	}
}

// A block is one command; the decisions it serves send nothing, carry
// Available = the limit less what was granted, and are counted.
func TestBatchServesLocally(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		client := b.Client(t)
		count := testharness.CountCommands(client)
		coord := withClient(t, b, client)
		for _, k := range consumptive {
			l, err := New(coord, "local:"+string(k), batchSettings(k, 100, time.Minute), WithBatch(10, time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.Allow(context.Background(), 1); err != nil { // loads the script
				t.Fatal(err)
			}
			count.Reset()
			for i := 2; i <= 25; i++ {
				var d Decision
				if i%2 == 0 {
					d, err = l.Allow(context.Background(), 1)
				} else {
					d, err = l.Wait(context.Background(), 1)
				}
				if err != nil || !d.Allowed() {
					t.Fatalf("%s: decision %d: %v, %v", k, i, d, err)
				}
				if _, ok := d.RetryAfter(); ok {
					t.Fatalf("%s: a grant with RetryAfter", k)
				}
				if want := int64(100 - i); d.Available() != want {
					t.Fatalf("%s: decision %d: Available = %d, want %d", k, i, d.Available(), want)
				}
			}
			// 25 permits: blocks at 1, 11 and 21; two after the first.
			if n := count.Count(); n != 2 {
				t.Fatalf("%s: 24 decisions sent %d commands (%v), want 2", k, n, count.Names())
			}
			if st := l.Statistics(); st.Granted != 25 {
				t.Fatalf("%s: Granted = %d, want 25", k, st.Granted)
			}
			// Larger than a block, and probes: decided alone.
			count.Reset()
			if d, err := l.Allow(context.Background(), 11); err != nil || !d.Allowed() {
				t.Fatalf("%s: Allow(11): %v, %v", k, d, err)
			}
			if d, err := l.Allow(context.Background(), 0); err != nil || !d.Allowed() {
				t.Fatalf("%s: probe: %v, %v", k, d, err)
			}
			if n := count.Count(); n != 2 {
				t.Fatalf("%s: Allow(11) and a probe sent %d commands, want 2", k, n)
			}
			_ = l.Close()
		}
	})
}

// Near the limit a refused block falls back to deciding each request
// alone: exactly the limit is granted, and the refusal is the server's.
func TestBatchRefusedBlock(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		coord := b.Coordinator(t)
		for _, k := range consumptive {
			l, err := New(coord, "near:"+string(k), batchSettings(k, 15, time.Minute), WithBatch(10, time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			got := 0
			var last Decision
			for range 20 {
				d, err := l.Allow(context.Background(), 1)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed() {
					got++
				}
				last = d
			}
			if got != 15 {
				t.Fatalf("%s: granted %d of 20, want 15", k, got)
			}
			if ra, ok := last.RetryAfter(); !ok || ra <= 0 || last.Available() != 0 {
				t.Fatalf("%s: refusal: RetryAfter %v %v, Available %d", k, ra, ok, last.Available())
			}
			_ = l.Close()
		}
	})
}

// probeAvailable probes key with an unbatched limiter of the same settings.
func probeAvailable(t *testing.T, coord *coordination.Coordinator, key string, s Settings) int64 {
	t.Helper()
	l, err := New(coord, key, s)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	d, err := l.Allow(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	return d.Available()
}

// Every algorithm gives a block's unused permits back: when its hold ends,
// and on Close.
func TestBatchGivesBack(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		coord := b.Coordinator(t)
		for _, k := range consumptive {
			s := batchSettings(k, 100, time.Hour)
			key := "back:" + string(k)
			l, err := New(coord, key, s, WithBatch(10, 20*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			acquire(t, &tlim{Limiter: l}, 1)
			deadline := time.Now().Add(10 * time.Second)
			for probeAvailable(t, coord, key, s) != 99 {
				if time.Now().After(deadline) {
					t.Fatalf("%s: unused permits not given back after the hold: available %d, want 99", k, probeAvailable(t, coord, key, s))
				}
				time.Sleep(10 * time.Millisecond)
			}
			_ = l.Close()

			l, err = New(coord, key, s, WithBatch(10, time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			acquire(t, &tlim{Limiter: l}, 2)
			if n := probeAvailable(t, coord, key, s); n != 89 {
				t.Fatalf("%s: available %d after a block of 10, want 89", k, n)
			}
			_ = l.Close()
			if n := probeAvailable(t, coord, key, s); n != 97 {
				t.Fatalf("%s: available %d after Close, want 97", k, n)
			}
		}
	})
}

// The overshoot bound: P instances (separate clients, standing for
// processes) with blocks of B on one key each carry B-1 unused permits
// into a new window, then all of them take whatever they can. The new
// window grants at most limit + P×B, and here exactly limit + P×(B-1) on
// miniredis (a frozen clock).
func TestBatchOvershootBound(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		const (
			limit = 100
			procs = 4
			block = 10
		)
		w := time.Second
		for _, k := range consumptive {
			t.Run(string(k), func(t *testing.T) {
				key := "over:" + string(k)
				s := batchSettings(k, limit, w)
				ls := make([]*Limiter, procs)
				for i := range ls {
					l, err := New(withClient(t, b, b.Client(t)), key, s, WithBatch(block, time.Hour))
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { _ = l.Close() })
					ls[i] = l
				}
				// Phase 1: each takes a block and uses one permit of it.
				for _, l := range ls {
					acquire(t, &tlim{Limiter: l}, 1)
				}
				// The key is back to empty (its state is, not the blocks).
				if b.IsMini() {
					b.Advance(2 * w)
				} else {
					time.Sleep(2 * w)
				}
				// Phase 2: all take until refused.
				var granted atomic.Int64
				start := time.Now()
				var wg sync.WaitGroup
				for _, l := range ls {
					for range 4 {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for {
								d, err := l.Allow(context.Background(), 1)
								if err != nil {
									t.Error(err)
									return
								}
								if !d.Allowed() {
									return
								}
								granted.Add(1)
							}
						}()
					}
				}
				wg.Wait()
				span := time.Since(start)
				got := granted.Load()
				bound := int64(limit + procs*block)
				extra := int64(0)
				if k == kGCRA && !b.IsMini() {
					extra = int64(span*limit/w) + 1 // refilled during the phase
				}
				t.Logf("granted %d in the new window (limit %d, bound %d, +%d refill, span %v)", got, limit, bound, extra, span)
				if !b.IsMini() && span > w/2 {
					t.Skipf("phase 2 took %v, too long against a %v window to be conclusive", span, w)
				}
				if got > bound+extra {
					t.Fatalf("granted %d, above limit + P×B = %d (+%d)", got, bound, extra)
				}
				if b.IsMini() && got != limit+procs*(block-1) {
					t.Fatalf("granted %d, want exactly limit + P×(B-1) = %d", got, limit+procs*(block-1))
				}
				if got < limit-procs*block {
					t.Fatalf("granted %d, below limit - P×B", got)
				}
			})
		}
	})
}
