package redlock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordkit/coordination/internal/testkit/faultproxy"
	"github.com/coordkit/coordination/redlock"
)

// soakDuration is how long TestMutualExclusionUnderFaults runs: 5 s by
// default (make test), COORD_REDLOCK_SOAK (a Go duration, e.g. 30s) to run
// longer.
func soakDuration(t *testing.T) time.Duration {
	d := 5 * time.Second
	if v := os.Getenv("COORD_REDLOCK_SOAK"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil || d <= 0 {
			t.Fatalf("COORD_REDLOCK_SOAK=%q: want a positive Go duration", v)
		}
	}
	return d
}

// Mutual exclusion under random faults: four contenders, each with its own
// group over the same five real servers behind fault proxies, take the lock
// in turn for the whole run, while every proxy injects seeded random faults
// into the scripts (lost replies with go-redis re-sends, LOADING instead of
// or after the command, delayed replies) and a random node is partitioned
// away now and then. Each holder checks a shared counter inside its
// critical section (never two inside at once while the one already inside
// is within its validity), and the holders' validity
// intervals, from the quorum's answer to the end of validity or the
// release, never overlap.
func TestMutualExclusionUnderFaults(t *testing.T) {
	c := realNodes(t, 5)
	dur := soakDuration(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d, %v", seed, dur)
	for i, p := range c.proxies {
		p.Apply(faultproxy.Random(faultproxy.Scripts(), seed+uint64(i), faultproxy.Chances{
			DropReply: 0.02, ErrorInstead: 0.02, ErrorAfter: 0.02, DelayReply: 0.04, Delay: 40 * time.Millisecond,
		}))
	}
	const (
		contenders = 4
		ttl        = 300 * time.Millisecond
	)
	type interval struct {
		who        int
		start, end time.Time
	}
	var (
		inside, checks, violations atomic.Int64
		holderUntil                atomic.Int64 // the validity end of the last holder in, in Unix ns
		acquired, notAcquired      atomic.Int64
		failedRounds               atomic.Int64
		mu                         sync.Mutex
		intervals                  []interval
	)
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()

	// The partitioner: every 300-700 ms one random node is cut off for
	// 100-400 ms (what it held is discarded).
	var wg sync.WaitGroup
	wg.Go(func() {
		r := rand.New(rand.NewPCG(seed, 1))
		for ctx.Err() == nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Duration(300+r.IntN(400)) * time.Millisecond):
			}
			i := r.IntN(len(c.proxies))
			c.proxies[i].BlackHole(faultproxy.Both)
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(100+r.IntN(300)) * time.Millisecond):
			}
			c.proxies[i].CutAll(faultproxy.RST)
			c.proxies[i].Restore()
		}
	})
	groups := make([]*redlock.Group, contenders)
	for i := range groups {
		groups[i] = c.group(redlock.WithNodeTimeout(100 * time.Millisecond))
	}
	for w := range contenders {
		g := groups[w]
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(w)+2))
			for ctx.Err() == nil {
				actx, acancel := context.WithTimeout(ctx, time.Second)
				l, err := g.Acquire(actx, "soak", ttl)
				acancel()
				if err != nil {
					var qe *redlock.QuorumError
					if errors.As(err, &qe) {
						failedRounds.Add(1)
					}
					notAcquired.Add(1)
					continue
				}
				acquired.Add(1)
				start := time.Now()
				// validUntil is the end of the lock's validity (the local
				// deadline, later after each successful refresh). A holder
				// that outlives it (a sleep overrun on a loaded machine)
				// holds nothing any more: its time past it is no violation.
				validUntil := func() time.Time { d, _ := l.Context().Deadline(); return d }
				if d, ok := l.Context().Deadline(); !ok || !d.After(start) {
					t.Errorf("a lock just acquired has deadline %v (set: %v), not after %v", d, ok, start)
					return
				}
				work := time.Duration(r.IntN(30)) * time.Millisecond
				if l.Remaining() > work+5*time.Millisecond {
					if inside.Add(1) != 1 && time.Now().UnixNano() < holderUntil.Load() {
						violations.Add(1)
					}
					holderUntil.Store(validUntil().UnixNano())
					checks.Add(1)
					time.Sleep(work)
					if r.IntN(3) == 0 && l.Remaining() > 0 {
						if ok, _ := l.Refresh(context.Background(), ttl); ok {
							holderUntil.Store(validUntil().UnixNano())
						}
					}
					inside.Add(-1)
				}
				end := time.Now() // released from here on
				if d := validUntil(); d.Before(end) {
					end = d
				}
				if end.Before(start) {
					end = start
				}
				_, _ = l.Release(context.Background())
				mu.Lock()
				intervals = append(intervals, interval{w, start, end})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	sort.Slice(intervals, func(i, j int) bool { return intervals[i].start.Before(intervals[j].start) })
	overlaps := 0
	var maxEnd time.Time
	for i, iv := range intervals {
		if i > 0 && iv.start.Before(maxEnd) {
			overlaps++
			if overlaps <= 3 {
				t.Errorf("holder %d's validity starts %v before the previous one's ends", iv.who, maxEnd.Sub(iv.start))
			}
		}
		if iv.end.After(maxEnd) {
			maxEnd = iv.end
		}
	}
	var faults, dropped int
	for _, p := range c.proxies {
		faults += len(p.Events())
		dropped += p.Stats().DroppedReplies
	}
	perWorker := make([]int, contenders)
	for _, iv := range intervals {
		perWorker[iv.who]++
	}
	t.Logf("%v, 4 contenders, 5 nodes: %d acquisitions (per contender %v), %d critical-section checks, %d violations, %d overlapping validities; %d not acquired (%d for want of nodes); %d injected script faults (%d lost replies)",
		dur, acquired.Load(), perWorker, checks.Load(), violations.Load(), overlaps, notAcquired.Load(), failedRounds.Load(), faults, dropped)
	if violations.Load() != 0 || overlaps != 0 {
		t.Fatalf("mutual exclusion broken: %d counter violations, %d overlapping validities", violations.Load(), overlaps)
	}
	if checks.Load() < 10 || slices.Contains(perWorker, 0) && dur >= 5*time.Second {
		t.Fatalf("too little progress: %d checks, per contender %v", checks.Load(), perWorker)
	}
}
