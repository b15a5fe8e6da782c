package semaphore_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/semaphore"
)

// BenchmarkHandoff measures the handoff latency of a blocking Acquire on
// each real standalone server: a holder keeps the only permit, a waiter is
// blocked in Acquire (subscribed to the release channel and asleep), and
// the time runs from just before the holder's Release is sent until the
// waiter's Acquire returns holding the permit. The waiter then becomes the
// holder for the next handoff. Only the handoff is timed (ns/op is its
// mean); p50-ms, p90-ms and p99-ms are its percentiles.
//
//	go test -run '^$' -bench Handoff -benchtime 1000x -benchmem ./semaphore/
func BenchmarkHandoff(b *testing.B) {
	for _, flavor := range testharness.Flavors {
		b.Run(flavor, func(b *testing.B) { benchHandoff(b, flavor) })
	}
}

func benchHandoff(b *testing.B, flavor string) {
	be := testharness.Get(b, flavor)
	ctx := context.Background()
	raw := be.Raw(b)
	info, _ := raw.Info(ctx, "server").Result()
	version := "?"
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "redis_version:"); ok {
			version = v
		}
		if v, ok := strings.CutPrefix(line, "valkey_version:"); ok {
			version = "valkey " + v
		}
	}
	holderCoord, waiterCoord := be.Coordinator(b), be.Coordinator(b)
	holderSem, waiterSem := newSem(b, holderCoord, 1), newSem(b, waiterCoord, 1)
	holder := mustAcquireN(b, holderSem, 1, time.Minute)

	type acquired struct {
		p   *semaphore.Permit
		at  time.Time
		err error
	}
	got := make(chan acquired, 1)
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	b.StopTimer()
	for i := range b.N {
		sem := waiterSem // the two clients take turns waiting
		if i%2 == 1 {
			sem = holderSem
		}
		go func() {
			p, err := sem.Acquire(ctx, time.Minute)
			got <- acquired{p, time.Now(), err}
		}()
		// Wait until the waiter is subscribed, then give its post-subscribe
		// retry time to finish, so that it is asleep when the release comes.
		for {
			n, err := testharness.Subscribers(ctx, raw, be.Key(key))
			if err != nil {
				b.Fatal(err)
			}
			if n > 0 {
				break
			}
			time.Sleep(100 * time.Microsecond)
		}
		time.Sleep(2 * time.Millisecond)

		b.StartTimer()
		t0 := time.Now()
		if _, err := holder.Release(ctx); err != nil {
			b.Fatal(err)
		}
		r := <-got
		b.StopTimer()
		if r.err != nil {
			b.Fatalf("Acquire: %v", r.err)
		}
		lat = append(lat, r.at.Sub(t0))
		holder = r.p
	}
	release(b, holder)
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.90), "p90-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.Logf("%s (%s): %d handoffs, p50 %.3f ms, p90 %.3f ms, p99 %.3f ms, max %.3f ms",
		flavor, version, len(lat), pct(0.5), pct(0.9), pct(0.99), float64(lat[len(lat)-1].Microseconds())/1000)
}
