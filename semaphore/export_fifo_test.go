package semaphore

import (
	"time"

	"github.com/coordkit/coordination/internal/engine"
)

// FIFOAcquire is the first-in first-out order's acquire script, for the
// external tests of this package.
var FIFOAcquire = fifoAcquireScript

// FIFOAbandon is the FIFO semaphore's cleanup script, for tests.
var FIFOAbandon = fifoAbandonScript

// FIFOKeys returns the keys of a Semaphore made WithFIFO(true): the
// semaphore key, its queue and its alive times, prefixed.
func FIFOKeys(s *Semaphore) engine.Keys { return s.fifo.keys }

// WithFIFOTiming sets the first-in first-out waiters' longest re-check
// period and how long a queued waiter counts as alive after each attempt.
func WithFIFOTiming(recheck, live time.Duration) Option {
	return func(c *config) error {
		c.fifoRecheck, c.fifoLive = recheck, live
		return nil
	}
}
