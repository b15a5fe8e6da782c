package redlock_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/coordkit/coordination/internal/testkit/faultproxy"
)

// BenchmarkAcquireSlowNodes measures TryAcquire's latency on five real
// servers behind proxies with 0, 1 and 2 nodes slowed by 200 ms (below the
// 1 s node timeout): the quorum of fast nodes decides, so slow nodes add
// nothing. It reports the median and the 99th percentile of the
// acquisitions (each followed by a release, not timed).
//
//	go test -run '^$' -bench AcquireSlowNodes -benchtime 300x ./redlock/
func BenchmarkAcquireSlowNodes(b *testing.B) {
	c := realNodes(b, 5)
	g := c.group()
	ctx := context.Background()
	for _, slowNodes := range []int{0, 1, 2} {
		b.Run(fmt.Sprintf("slow=%d", slowNodes), func(b *testing.B) {
			for i, p := range c.proxies {
				d := time.Duration(0)
				if i >= len(c.proxies)-slowNodes {
					d = 200 * time.Millisecond
				}
				p.Latency(faultproxy.ToClient, d, 0)
			}
			var lat []time.Duration
			for i := 0; b.Loop(); i++ {
				start := time.Now()
				l, err := g.TryAcquire(ctx, fmt.Sprintf("lat:%d:%d", slowNodes, i), time.Minute)
				lat = append(lat, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if _, err := l.Release(ctx); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
	for _, p := range c.proxies {
		p.Latency(faultproxy.ToClient, 0, 0)
	}
}
