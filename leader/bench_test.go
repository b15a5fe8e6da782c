package leader_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/leader"
)

// BenchmarkFailover measures, on a real server with three contenders
// (lease 300 ms, retry delay 100 ms), the time from a leader's end to its
// successor's election: "crash" cuts the leader off from Redis at a random
// point of its renewal cycle (renewals stop, no release), "resign" returns
// from OnElected, "cancel" cancels Run's context. Each failover starts
// after the followers settled (more than one retry delay after the last
// election). One op is one failover;
// it reports the median, p99 and maximum in milliseconds. Run it with e.g.
// -bench Failover -benchtime 50x.
func BenchmarkFailover(b *testing.B) {
	for _, kind := range []string{"crash", "resign", "cancel"} {
		b.Run(kind, func(b *testing.B) {
			be := testharness.Get(b, testharness.FirstFlavor(b))
			samples := measureFailovers(b, be, kind, b.N)
			slices.Sort(samples)
			pct := func(p float64) float64 {
				i := min(int(p*float64(len(samples))), len(samples)-1)
				return float64(samples[i].Microseconds()) / 1000
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(pct(0.5), "median-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
			b.ReportMetric(pct(1), "max-ms")
		})
	}
}

func measureFailovers(tb testing.TB, be *testharness.Backend, kind string, n int) []time.Duration {
	const (
		lease = 300 * time.Millisecond
		retry = 100 * time.Millisecond
	)
	j := newJournal()
	opts := []leader.Option{leader.WithLeaseDuration(lease), leader.WithRetryDelay(retry)}
	type member struct {
		c *contender
		h *failingHook
	}
	members := map[string]member{}
	start := func(id string) {
		h := &failingHook{err: errCutOff}
		members[id] = member{startContender(tb, coordWith(tb, be, []redis.Hook{h}), id, j, opts...), h}
	}
	for _, id := range []string{"a", "b", "c"} {
		start(id)
	}
	prev := j.next(tb, 5*time.Second)
	samples := make([]time.Duration, 0, n)
	for range n {
		m := members[prev.id]
		// Let the followers settle into waiting (a leader that just ended
		// a term waits one retry delay before campaigning again), and pick
		// a random point of the leader's renewal cycle.
		time.Sleep(retry*11/10 + rand.N(lease/2))
		var at time.Time
		switch kind {
		case "crash":
			at = time.Now()
			m.h.on.Store(true)
		case "resign":
			at = time.Now()
			m.c.resign <- struct{}{}
		case "cancel":
			at = time.Now()
			m.c.cancel()
		}
		next := j.next(tb, 5*time.Second)
		samples = append(samples, next.start.Sub(at))
		if kind != "resign" {
			m.c.cancel()
			start(prev.id)
		}
		prev = next
	}
	return samples
}
