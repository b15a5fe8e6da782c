package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/coordkit/coordination/fencing"
)

func init() {
	addScenario(scenario{order: 10, name: "fencing", title: "Fencing: three workers, one lock, a fenced store, a paused worker", run: demoFencing})
}

// hold is one interval during which a worker believed it held the lock.
type hold struct {
	worker     string
	token      int64
	start, end time.Time
}

func demoFencing(ctx context.Context, d *demo) error {
	const (
		leaseKey = "{report}:lease"
		fenceKey = "{report}:fence"
		storeKey = "{report}:store"
		ttl      = 400 * time.Millisecond // part 2: the lease a paused worker outlives
		// part 1's lease: long enough that no stall of a loaded machine
		// lets it expire in a 20 ms turn (no takeover is meant there)
		turnTTL = 10 * time.Second
	)
	var (
		mu     sync.Mutex
		holds  []hold
		writes []string
	)
	record := func(h hold) {
		mu.Lock()
		holds = append(holds, h)
		mu.Unlock()
	}

	// Part 1: three workers take turns; each writes to the store with its
	// token while it holds the lock.
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for w := 1; w <= 3; w++ {
		name := fmt.Sprintf("worker-%d", w)
		coord := d.coord() // one coordinator per simulated process
		lock, err := fencing.New(coord, leaseKey, fenceKey)
		if err != nil {
			return err
		}
		store, err := fencing.NewGuarded(coord, storeKey)
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := 1; round <= 3; round++ {
				lk, err := lock.Acquire(ctx, turnTTL)
				if err != nil {
					errs <- err
					return
				}
				start := time.Now()
				d.logf(name, "acquired the lock, fencing token %d", lk.FencingToken())
				value := fmt.Sprintf("%s round %d", name, round)
				ok, _, err := store.Set(ctx, lk.FencingToken(), []byte(value), 0)
				if err != nil {
					errs <- err
					return
				}
				if !ok {
					errs <- fmt.Errorf("%s: write with a current token was rejected", name)
					return
				}
				mu.Lock()
				writes = append(writes, value)
				mu.Unlock()
				time.Sleep(20 * time.Millisecond) // the work
				end := time.Now()
				if dl, ok := lk.Context().Deadline(); ok && dl.Before(end) {
					end = dl // held no longer than its local validity
				}
				record(hold{name, lk.FencingToken(), start, end})
				d.logf(name, "releases (token %d)", lk.FencingToken())
				if _, err := lk.Release(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return err
	}

	// Part 2: worker-1 takes the lock and is paused (a long GC, a VM
	// migration) past its lease; worker-2 takes over and writes; worker-1
	// wakes up and writes with its old token.
	c1, c2 := d.coord(), d.coord()
	lock1, err := fencing.New(c1, leaseKey, fenceKey)
	if err != nil {
		return err
	}
	lock2, err := fencing.New(c2, leaseKey, fenceKey)
	if err != nil {
		return err
	}
	store1, err := fencing.NewGuarded(c1, storeKey)
	if err != nil {
		return err
	}
	store2, err := fencing.NewGuarded(c2, storeKey)
	if err != nil {
		return err
	}
	old, err := lock1.TryAcquire(ctx, ttl)
	if err != nil {
		return err
	}
	oldStart := time.Now()
	d.logf("worker-1", "acquired the lock, fencing token %d, then pauses for %v", old.FencingToken(), 2*ttl)
	type taken struct {
		lk  *fencing.Lock
		err error
	}
	next := make(chan taken, 1)
	go func() {
		lk, err := lock2.Acquire(ctx, ttl)
		next <- taken{lk, err}
	}()
	<-old.Context().Done() // the handle's local deadline passes while worker-1 "sleeps"
	oldEnd := time.Now()
	record(hold{"worker-1", old.FencingToken(), oldStart, oldEnd})
	d.logf("worker-1", "(paused) its lease ran out; its context says: %v", context.Cause(old.Context()))
	t := <-next
	if t.err != nil {
		return t.err
	}
	newStart := time.Now()
	d.logf("worker-2", "acquired the expired lock, fencing token %d", t.lk.FencingToken())
	ok, _, err := store2.Set(ctx, t.lk.FencingToken(), []byte("worker-2 after takeover"), 0)
	if err != nil {
		return err
	}
	d.logf("worker-2", "wrote to the store with token %d: accepted=%v", t.lk.FencingToken(), ok)
	time.Sleep(2*ttl - time.Since(oldStart)) // worker-1's pause ends
	staleOK, newest, err := store1.Set(ctx, old.FencingToken(), []byte("worker-1 late write"), 0)
	if err != nil {
		return err
	}
	d.logf("worker-1", "wakes up and writes with token %d: accepted=%v (store has token %d)", old.FencingToken(), staleOK, newest)
	record(hold{"worker-2", t.lk.FencingToken(), newStart, time.Now()})
	if _, err := t.lk.Release(ctx); err != nil {
		return err
	}
	value, storedToken, _, err := store2.Get(ctx)
	if err != nil {
		return err
	}
	d.logf("store", "holds %q written with token %d", value, storedToken)

	// Invariants.
	sort.Slice(holds, func(i, j int) bool { return holds[i].start.Before(holds[j].start) })
	overlap := ""
	increasing := true
	for i := 1; i < len(holds); i++ {
		if holds[i].start.Before(holds[i-1].end) {
			overlap = fmt.Sprintf("%s (token %d) and %s (token %d)", holds[i-1].worker, holds[i-1].token, holds[i].worker, holds[i].token)
		}
		if holds[i].token <= holds[i-1].token {
			increasing = false
		}
	}
	d.check("one holder at a time", overlap == "", "%d holds, no two overlapping%s", len(holds), suffix(overlap))
	d.check("tokens strictly increase", increasing, "tokens in acquisition order: %v", tokens(holds))
	d.check("stale write rejected", !staleOK && newest == t.lk.FencingToken(), "the paused worker's token %d was refused; the store keeps token %d", old.FencingToken(), newest)
	d.check("store holds the newest write", string(value) == "worker-2 after takeover" && storedToken == t.lk.FencingToken(), "%q with token %d", value, storedToken)
	return nil
}

func suffix(s string) string {
	if s == "" {
		return ""
	}
	return "; overlap: " + s
}

func tokens(hs []hold) []int64 {
	out := make([]int64, len(hs))
	for i, h := range hs {
		out[i] = h.token
	}
	return out
}
