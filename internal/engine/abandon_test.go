package engine

import (
	"testing"
	"time"
)

// The record of an abandoned acquisition lives for the lease's TTL, at
// least minAbandon and at most CleanupLimit (CleanupLimit without expiry).
func TestAbandonFor(t *testing.T) {
	for _, c := range []struct{ ttl, want time.Duration }{
		{0, CleanupLimit},
		{time.Millisecond, minAbandon},
		{time.Second, minAbandon},
		{30 * time.Second, 30 * time.Second},
		{time.Minute, time.Minute},
		{time.Hour, CleanupLimit},
	} {
		if got := AbandonFor(c.ttl); got != c.want {
			t.Errorf("AbandonFor(%v) = %v, want %v", c.ttl, got, c.want)
		}
	}
}
