package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordination/rwlease"
)

func init() {
	addScenario(scenario{
		order: 70,
		name:  "rwlease",
		title: "Read-write lease: readers share a catalog; a writer gets in while readers keep arriving",
		run:   runRWLeaseDemo,
	})
}

// runRWLeaseDemo sends a reader every 20 ms for 600 ms (each holds 60 ms,
// so several overlap) at one read-write lease, and a writer 150 ms in.
// With writer preference the writer's wait makes new readers queue behind
// it, so it gets in once the readers present have left. The key is printed
// as the server holds it (members and expiries) while the writer waits and
// while it writes. Checked: readers shared the key; never a writer
// together with a reader (as the workers saw it, and in the key); the
// writer got in while readers were still arriving; the key is gone at the
// end.
func runRWLeaseDemo(ctx context.Context, d *demo) error {
	const (
		key    = "catalog:rw"
		every  = 20 * time.Millisecond
		span   = 600 * time.Millisecond
		hold   = 60 * time.Millisecond
		ttl    = 5 * time.Second
		writer = 150 * time.Millisecond
	)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	client := d.coord().Client()
	full := d.prefix + key

	var (
		mu                      sync.Mutex
		readers, maxReaders     int
		writing, overlap        bool
		lastReader              time.Time
		waitFrom, writeIn       time.Time
		wg                      sync.WaitGroup
		errs                    = make(chan error, 64)
		waitingState, heldState string
		serverOK                = true
	)
	start := time.Now()
	wg.Go(func() {
		time.Sleep(writer)
		rw, err := rwlease.New(d.coord(), key)
		if err != nil {
			errs <- fmt.Errorf("writer: %w", err)
			return
		}
		d.logf("writer", "waits for the write lease; readers holding: %d", func() int { mu.Lock(); defer mu.Unlock(); return readers }())
		mu.Lock()
		waitFrom = time.Now()
		mu.Unlock()
		// Show the key while the writer waits: once its marker (Q:) is
		// there, which takes its first attempt's round trip (polled, not
		// guessed: on a loaded machine that can take a while).
		done, acquired := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			for {
				s, _ := showRW(ctx, client, full)
				mu.Lock()
				if waitingState == "" || !strings.Contains(waitingState, "Q:") {
					waitingState = s
				}
				mu.Unlock()
				if strings.Contains(s, "Q:") {
					return
				}
				select {
				case <-acquired:
					return
				case <-time.After(2 * time.Millisecond):
				}
			}
		}()
		w, err := rw.Write(ctx, ttl)
		close(acquired)
		<-done
		if err != nil {
			errs <- fmt.Errorf("writer: %w", err)
			return
		}
		mu.Lock()
		writeIn = time.Now()
		writing = true
		overlap = overlap || readers > 0
		mu.Unlock()
		d.logf("writer", "holds the write lease after %v", time.Since(waitFrom).Round(time.Millisecond))
		s, ok := showRW(ctx, client, full)
		mu.Lock()
		heldState, serverOK = s, ok
		mu.Unlock()
		time.Sleep(30 * time.Millisecond) // the write
		mu.Lock()
		writing = false
		mu.Unlock()
		if _, err := w.Release(ctx); err != nil {
			errs <- err
		}
		d.logf("writer", "released")
	})
	n := 0
	for time.Since(start) < span {
		n++
		name := fmt.Sprintf("reader-%02d", n)
		coord := d.coord()
		wg.Go(func() {
			rw, err := rwlease.New(coord, key)
			if err != nil {
				errs <- fmt.Errorf("%s: %w", name, err)
				return
			}
			r, err := rw.Read(ctx, ttl)
			if err != nil {
				errs <- fmt.Errorf("%s: %w", name, err)
				return
			}
			mu.Lock()
			readers++
			maxReaders = max(maxReaders, readers)
			overlap = overlap || writing
			lastReader = time.Now()
			now := readers
			mu.Unlock()
			d.logf(name, "reads; readers holding: %d", now)
			time.Sleep(hold)
			mu.Lock()
			readers--
			mu.Unlock()
			if _, err := r.Release(ctx); err != nil {
				errs <- err
			}
		})
		time.Sleep(every)
	}
	wg.Wait()
	close(errs)
	if err, failed := <-errs; failed {
		return err
	}
	d.logf("state", "while the writer waited: %s", waitingState)
	d.logf("state", "while the writer held:   %s", heldState)
	exists, err := client.Exists(ctx, full).Result()
	if err != nil {
		return err
	}
	d.check("rwlease: readers share the key", maxReaders >= 2, "up to %d readers at once", maxReaders)
	d.check("rwlease: never a writer with a reader", !overlap && serverOK,
		"as the workers saw it, and in the key while the writer held")
	// Not starved: the writer held the lease before the last reader came
	// (no bound on the wait itself: on a loaded machine the readers
	// already holding take longer to release, and the readers' stream
	// still outlasts the wait if writer preference works).
	d.check("rwlease: the writer got in while readers kept arriving", !writeIn.IsZero() && writeIn.Before(lastReader),
		"waited %v; readers arrived until %v later",
		writeIn.Sub(waitFrom).Round(time.Millisecond), lastReader.Sub(writeIn).Round(time.Millisecond))
	d.check("rwlease: the key goes with its last entry", exists == 0, "the key exists at the end: %v", exists == 1)
	return nil
}

// showRW renders the key as the server holds it (ZRANGE WITHSCORES,
// decoded against the server's TIME): live readers R:, the writer W: and
// waiting writers Q: (scored by their negated expiry). It reports whether
// the live entries are a writer alone, or readers only.
func showRW(ctx context.Context, c redis.UniversalClient, key string) (string, bool) {
	zs, err := c.ZRangeWithScores(ctx, key, 0, -1).Result()
	if err != nil {
		return "ZRANGE: " + err.Error(), false
	}
	t, err := c.Time(ctx).Result()
	if err != nil {
		return "TIME: " + err.Error(), false
	}
	now := t.UnixMilli()
	var parts []string
	readers, writers := 0, 0
	for _, z := range zs {
		m := z.Member.(string)
		exp := int64(z.Score)
		kind := m[:2]
		if kind == "Q:" {
			exp = -exp
		}
		if exp <= now {
			continue // expired, not yet pruned
		}
		switch kind {
		case "R:":
			readers++
		case "W:":
			writers++
		}
		parts = append(parts, fmt.Sprintf("%s%s… %dms", kind, m[2:10], exp-now))
	}
	return fmt.Sprintf("%d readers, %d writer: %s", readers, writers, strings.Join(parts, ", ")),
		(writers == 0) || (writers == 1 && readers == 0)
}
