package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coordkit/coordination/latch"
	"github.com/coordkit/coordination/semaphore"
)

func init() {
	addScenario(scenario{
		order: 30,
		name:  "semaphore",
		title: "Semaphore and latch: 5 workers share 2 permits; a latch gates the final step",
		run:   runSemaphoreDemo,
	})
}

// runSemaphoreDemo runs 5 workers (each its own coordinator, as separate
// processes would be) that do 3 tasks each under a semaphore of 2 permits,
// then count a latch down; a reporter waits on the latch for the final
// step. It checks that no more than 2 permits were ever held, on the
// workers' side and on the server's, and that the final step ran only
// after every worker was done.
func runSemaphoreDemo(ctx context.Context, d *demo) error {
	const (
		workers  = 5
		tasks    = 3
		capacity = 2
		permits  = "semaphore:permits"
		gate     = "semaphore:done"
	)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()

	gateLatch, err := latch.New(d.coord(), gate, latch.WithDeadline(time.Minute), latch.WithKeyTTL(10*time.Minute))
	if err != nil {
		return err
	}
	done, err := gateLatch.Create(ctx, workers)
	if err != nil {
		return err
	}
	d.logf("setup", "latch created: %d workers to wait for (generation %d)", workers, done.Number())

	var (
		holding, maxHolding atomic.Int64 // permits held, as the workers see them
		serverMax           atomic.Int64 // the most permits the server reported in use
		ran, finished       atomic.Int64
		errs                = make(chan error, workers+2)
	)
	monitorSem, err := semaphore.New(d.coord(), permits, capacity)
	if err != nil {
		return err
	}
	stopMonitor := make(chan struct{})
	var monitor sync.WaitGroup
	monitor.Go(func() {
		for {
			select {
			case <-stopMonitor:
				return
			case <-time.After(2 * time.Millisecond):
			}
			st, err := monitorSem.State(ctx)
			if err != nil {
				errs <- fmt.Errorf("monitor: %w", err)
				return
			}
			raiseTo(&serverMax, st.Used)
		}
	})

	// The final step: a reporter waits for every worker.
	type report struct {
		ok       bool
		err      error
		finished int64
	}
	reported := make(chan report, 1)
	reporter, err := gateLatch.Join(ctx)
	if err != nil {
		return err
	}
	go func() {
		ok, err := reporter.Wait(ctx)
		r := report{ok: ok, err: err, finished: finished.Load()}
		if ok {
			d.logf("reporter", "latch reached zero: running the final step")
		}
		reported <- r
	}()

	var (
		wg      sync.WaitGroup
		countMu sync.Mutex
	)
	for w := 1; w <= workers; w++ {
		actor := fmt.Sprintf("worker-%d", w)
		coord := d.coord()
		wg.Go(func() {
			sem, err := semaphore.New(coord, permits, capacity)
			if err != nil {
				errs <- err
				return
			}
			for task := 1; task <= tasks; task++ {
				p, err := sem.Acquire(ctx, 10*time.Second)
				if err != nil {
					errs <- fmt.Errorf("%s: %w", actor, err)
					return
				}
				n := holding.Add(1)
				raiseTo(&maxHolding, n)
				d.logf(actor, "task %d: holds a permit (%d of %d in use)", task, n, capacity)
				time.Sleep(10 * time.Millisecond) // the work
				ran.Add(1)
				holding.Add(-1)
				if _, err := p.Release(ctx); err != nil {
					errs <- fmt.Errorf("%s: release: %w", actor, err)
					return
				}
			}
			finished.Add(1)
			workerLatch, err := latch.New(coord, gate)
			var left *latch.Generation
			if err == nil {
				left, err = workerLatch.Join(ctx)
			}
			if err == nil {
				countMu.Lock() // only so that the timeline reads in order
				var n int64
				n, err = left.CountDown(ctx)
				d.logf(actor, "all %d tasks done; latch count now %d", tasks, n)
				countMu.Unlock()
			}
			if err != nil {
				errs <- fmt.Errorf("%s: count down: %w", actor, err)
			}
		})
	}
	wg.Wait()
	r := <-reported
	close(stopMonitor)
	monitor.Wait()
	close(errs)
	if err, failed := <-errs; failed {
		return err
	}

	_, lateErr := done.CountDown(ctx)
	d.logf("setup", "a late count-down is refused: %v", lateErr)
	st, err := monitorSem.State(ctx)
	if err != nil {
		return err
	}

	d.check("semaphore never exceeded (workers)", maxHolding.Load() <= capacity,
		"at most %d of %d permits held at once", maxHolding.Load(), capacity)
	d.check("semaphore never exceeded (server)", serverMax.Load() <= capacity,
		"the server reported at most %d of %d permits in use", serverMax.Load(), capacity)
	d.check("every task ran", ran.Load() == workers*tasks, "%d of %d tasks", ran.Load(), workers*tasks)
	d.check("latch gated the final step", r.ok && r.err == nil && r.finished == workers,
		"Wait returned %v (%v) after %d of %d workers finished", r.ok, r.err, r.finished, workers)
	d.check("completed latch refuses count-downs", errors.Is(lateErr, latch.ErrCompleted), "%v", lateErr)
	d.check("permits all returned", st.Used == 0 && st.Holders == 0, "%d permits in use at the end", st.Used)
	return nil
}

// raiseTo sets a to v if v is larger (a running maximum, safe for
// concurrent use).
func raiseTo(a *atomic.Int64, v int64) {
	for cur := a.Load(); v > cur && !a.CompareAndSwap(cur, v); cur = a.Load() {
	}
}
