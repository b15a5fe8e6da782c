package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coordkit/coordination/ratelimit"
)

func init() {
	addScenario(scenario{
		order: 50,
		name:  "ratelimit",
		title: "Rate limit: a burst from 4 processes against one GCRA limiter",
		run:   runRateLimitDemo,
	})
}

// runRateLimitDemo has 4 workers (each its own coordinator and limiter, as
// if in 4 processes) hammer one GCRA limiter for about a second. GCRA
// admits the burst at once and then one permit per interval, so over a span
// of server time T the admitted count must be at least the burst and at
// most burst + floor(T / interval), whatever the interleaving.
func runRateLimitDemo(ctx context.Context, d *demo) error {
	const (
		burst    = 10
		interval = 50 * time.Millisecond
		workers  = 4
		run      = time.Second
	)
	cfg := ratelimit.GCRA{Burst: burst, Interval: interval}
	lims := make([]*ratelimit.Limiter, workers)
	for i := range lims {
		l, err := ratelimit.New(d.coord(), "ratelimit:api", cfg)
		if err != nil {
			return err
		}
		defer l.Close()
		lims[i] = l
	}
	client := d.coord().Client()
	t0, err := client.Time(ctx).Result()
	if err != nil {
		return fmt.Errorf("server time: %w", err)
	}
	d.logf("setup", "GCRA burst %d, one permit every %v; %d workers for %v", burst, interval, workers, run)
	var (
		admitted, refused atomic.Int64
		errs              = make(chan error, workers)
		wg                sync.WaitGroup
	)
	stop := time.Now().Add(run)
	for i, l := range lims {
		name := fmt.Sprintf("worker-%d", i+1)
		wg.Go(func() {
			mine := 0
			for time.Now().Before(stop) {
				d, err := l.Allow(ctx, 1)
				if err != nil {
					errs <- err
					return
				}
				if d.Allowed() {
					admitted.Add(1)
					mine++
					continue
				}
				refused.Add(1)
				retry, _ := d.RetryAfter()
				// Back off for the server-computed time (bounded by the run).
				time.Sleep(min(retry, time.Until(stop)))
			}
			d.logf(name, "admitted %d", mine)
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	t1, err := client.Time(ctx).Result()
	if err != nil {
		return fmt.Errorf("server time: %w", err)
	}
	// Scripts read the server clock in whole milliseconds: allow the 1 ms
	// by which t0 may lie after the first script's truncated time.
	span := t1.Sub(t0) + time.Millisecond
	upper := int64(burst) + int64(span/interval)
	got := admitted.Load()
	d.logf("total", "admitted %d, refused %d over %v of server time", got, refused.Load(), span.Round(time.Millisecond))
	d.check("rate limit: burst admitted", got >= burst, "admitted %d >= burst %d", got, burst)
	d.check("rate limit: admitted <= burst + span/interval", got <= upper,
		"admitted %d <= %d + floor(%v / %v) = %d", got, burst, span.Round(time.Millisecond), interval, upper)
	return nil
}
