package testharness

import (
	"sync/atomic"
	"testing"
	"time"
)

// StallMeter measures how long the test process went unscheduled: a
// goroutine wakes every 5 ms and adds up every wake-up that came more
// than 10 ms late. A timed bound that a loaded machine can exceed through
// no fault of the code under test widens by Total (the code's goroutines
// were held up at least as long), instead of being skipped or padded for
// every run.
type StallMeter struct {
	late atomic.Int64 // nanoseconds
	stop chan struct{}
}

// MeterStalls starts a StallMeter; it stops at the end of the test or at
// Stop.
func MeterStalls(t testing.TB) *StallMeter {
	m := &StallMeter{stop: make(chan struct{})}
	const period = 5 * time.Millisecond
	go func() {
		tk := time.NewTicker(period)
		defer tk.Stop()
		last := time.Now()
		for {
			select {
			case <-m.stop:
				return
			case now := <-tk.C:
				now = time.Now() // the tick's own time is when it was due
				if late := now.Sub(last) - period; late > 2*period {
					m.late.Add(int64(late))
				}
				last = now
			}
		}
	}()
	t.Cleanup(m.Stop)
	return m
}

// Total is the time the process was held up so far.
func (m *StallMeter) Total() time.Duration { return time.Duration(m.late.Load()) }

// Stop ends the measurement; Total keeps its value.
func (m *StallMeter) Stop() {
	select {
	case <-m.stop:
	default:
		close(m.stop)
	}
}
