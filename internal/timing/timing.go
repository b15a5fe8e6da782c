// Package timing holds the library's duration policies: the jittered
// exponential backoff and the jitter of the retry and re-check loops, and
// the clock-drift allowance of a lease's local deadline. It knows no
// primitive and no engine.
package timing

import (
	"math/rand/v2"
	"time"
)

// Drift returns the clock-drift allowance subtracted from a lease's TTL for
// the local deadline: 1% of the TTL plus 2 ms (the allowance of the Redlock
// analysis for clock rate differences and scheduling), and never more than
// half of the TTL.
func Drift(ttl time.Duration) time.Duration {
	d := ttl/100 + 2*time.Millisecond
	return min(d, ttl/2)
}

// Backoff returns the jittered exponential backoff after failures
// consecutive failures: min<<(failures-1), capped at max, drawn uniformly
// from [d/2, d].
func Backoff(failures int, lo, hi time.Duration) time.Duration {
	d := lo << min(max(failures-1, 0), 16)
	if d > hi || d <= 0 {
		d = hi
	}
	return d/2 + rand.N(d/2+1)
}

// Jitter returns d plus a random extra of up to 10% of d.
func Jitter(d time.Duration) time.Duration { return d + rand.N(d/10+1) }
