package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredislib "github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/faultproxy"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/redlock"
)

// fiveNodes starts five dedicated servers (flavors mixed), each behind a
// fault proxy, and returns the proxies' addresses.
func fiveNodes(b *testing.B) ([]*faultproxy.Proxy, []string) {
	flavors := testharness.AvailableFlavors(b)
	var (
		proxies []*faultproxy.Proxy
		addrs   []string
	)
	for i := range 5 {
		s := testharness.StartStandalone(b, flavors[i%len(flavors)])
		p := faultproxy.Start(b, s.Addr)
		proxies = append(proxies, p)
		addrs = append(addrs, p.Addr())
	}
	return proxies, addrs
}

// BenchmarkRedlockSlowNodes compares acquisition latency of this library's
// Redlock and redsync's on five real servers behind proxies, with 0, 1 and
// 2 nodes slowed by 200 ms (both under their default per-node bounds), and
// with 2 nodes cut off (black-holed; node timeout 100 ms for ours, redsync's
// timeout factor giving about the same). Reported: median and p99 of the
// acquisitions (the releases are not timed).
//
//	cd bench && go test -run '^$' -bench RedlockSlowNodes -benchtime 30x
func BenchmarkRedlockSlowNodes(b *testing.B) {
	proxies, addrs := fiveNodes(b)
	ctx := context.Background()
	var coords []*coordination.Coordinator
	var pools []redis.Pool
	for _, a := range addrs {
		c := goredislib.NewClient(&goredislib.Options{Addr: a})
		b.Cleanup(func() { c.Close() })
		coord, err := coordination.New(c)
		if err != nil {
			b.Fatal(err)
		}
		coords = append(coords, coord)
		// redsync bounds each node by a context deadline, which go-redis
		// honours only with ContextTimeoutEnabled (without it a
		// black-holed node blocks for ReadTimeout × (MaxRetries+1)).
		rc := goredislib.NewClient(&goredislib.Options{Addr: a, ContextTimeoutEnabled: true})
		b.Cleanup(func() { rc.Close() })
		pools = append(pools, goredis.NewPool(rc))
	}
	g, err := redlock.New(coords, redlock.WithNodeTimeout(100*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	rs := redsync.New(pools...)
	setup := func(slow, cut int) {
		for i, p := range proxies {
			p.CutAll(faultproxy.RST)
			p.Restore()
			p.Latency(faultproxy.ToClient, 0, 0)
			switch {
			case i >= 5-cut:
				p.BlackHole(faultproxy.Both)
			case i >= 5-slow-cut:
				p.Latency(faultproxy.ToClient, 200*time.Millisecond, 0)
			}
		}
	}
	defer setup(0, 0)
	type lib struct {
		name string
		lock func(key string) (func(), error)
	}
	libs := []lib{
		{"coordination", func(key string) (func(), error) {
			l, err := g.TryAcquire(ctx, key, 10*time.Second)
			if err != nil {
				return nil, err
			}
			return func() { _, _ = l.Release(ctx) }, nil
		}},
		{"redsync", func(key string) (func(), error) {
			// One try; expiry 10 s, so the per-node bound is
			// 10 s × TimeoutFactor (default 0.05): 500 ms; 0.01 gives 100 ms.
			m := rs.NewMutex(key, redsync.WithExpiry(10*time.Second), redsync.WithTries(1), redsync.WithTimeoutFactor(0.01))
			if err := m.LockContext(ctx); err != nil {
				return nil, err
			}
			return func() { _, _ = m.UnlockContext(ctx) }, nil
		}},
	}
	for _, c := range []struct{ slow, cut int }{{0, 0}, {1, 0}, {2, 0}, {0, 2}} {
		for _, l := range libs {
			b.Run(fmt.Sprintf("%s/slow=%d/cut=%d", l.name, c.slow, c.cut), func(b *testing.B) {
				setup(c.slow, c.cut)
				var lat []time.Duration
				fails := 0
				for i := 0; b.Loop(); i++ {
					start := time.Now()
					release, err := l.lock(fmt.Sprintf("rl:%s:%d:%d:%d", l.name, c.slow, c.cut, i))
					lat = append(lat, time.Since(start))
					if err != nil {
						var taken *redsync.ErrTaken
						if errors.As(err, &taken) {
							b.Fatal(err)
						}
						fails++
						continue
					}
					b.StopTimer()
					release()
					b.StartTimer()
				}
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
				b.ReportMetric(float64(fails), "failed")
			})
		}
	}
}
