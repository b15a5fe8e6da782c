package engine

import (
	"math"
	"time"
)

// Scaled returns n units as a Duration, saturating at the largest
// Duration (about 292 years) instead of overflowing into a negative one:
// a reply of the server (a PTTL, a wait in µs) may exceed what a Duration
// holds. n must not be negative.
func Scaled(n int64, unit time.Duration) time.Duration {
	if n > math.MaxInt64/int64(unit) {
		return math.MaxInt64
	}
	return time.Duration(n) * unit
}

// maxMillis is the largest millisecond count a time.Duration holds.
const maxMillis = int64(math.MaxInt64 / time.Millisecond)
