package lock

import (
	"time"

	"github.com/coordkit/coordination/internal/engine"
)

// FIFOAcquire is the first-in first-out order's acquire script, for the
// external tests of this package.
var FIFOAcquire = fifoAcquire

// FIFOKeys returns the keys of a Mutex made WithFIFO(true): the lock key,
// its queue and its alive times, prefixed.
func FIFOKeys(m *Mutex) engine.Keys { return m.keys }

// WithFIFOTiming sets the first-in first-out waiters' re-check period and
// how long a queued waiter counts as alive after each attempt.
func WithFIFOTiming(recheck, live time.Duration) Option {
	return func(c *config) error {
		c.recheck, c.live = recheck, live
		return nil
	}
}

// FIFOAcquireSHA is the SHA1 of the first-in first-out acquire script.
var FIFOAcquireSHA = fifoAcquire.Hash()
