package lock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/lock"
)

// benchBackend returns a real server backend for benchmarks: COORD_BENCH_BACKEND
// (default redis7).
func benchClient(b *testing.B) (redis.UniversalClient, *testharness.Backend) {
	name := "redis7"
	be := testharness.Get(b, name)
	c := be.Client(b, func(o *redis.Options) { o.PoolSize = 128 })
	return c, be
}

var noop = redis.NewScript("return 1")

// BenchmarkLock compares, in one run, a no-op EVALSHA (the floor of one
// round trip) with TryAcquire+Release (two round trips), at 1 and 64
// concurrent callers. Report the ratio of ops/s to the no-op.
//
//	go test -run '^$' -bench BenchmarkLock -benchmem -count 5 ./lock/
func BenchmarkLock(b *testing.B) {
	client, be := benchClient(b)
	coord, err := coordination.New(client, coordination.WithKeyPrefix(be.Prefix()))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, par := range []int{1, 64} {
		b.Run(fmt.Sprintf("noop-evalsha/callers=%d", par), func(b *testing.B) {
			noop.Run(ctx, client, []string{"warm"})
			b.ReportAllocs()
			b.SetParallelism(par)
			runParallel(b, par, func(i int) {
				if err := noop.Run(ctx, client, []string{fmt.Sprint("k", i)}).Err(); err != nil {
					b.Error(err)
				}
			})
		})
		b.Run(fmt.Sprintf("acquire+release/callers=%d", par), func(b *testing.B) {
			mutexes := make([]*lock.Mutex, len(keys)) // made once: New is not what is measured
			for i, k := range keys {
				if mutexes[i], err = lock.New(coord, k); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			runParallel(b, par, func(i int) {
				l, err := mutexes[i%len(keys)].TryAcquire(ctx, time.Minute)
				if err != nil {
					b.Error(err)
					return
				}
				if _, err := l.Release(ctx); err != nil {
					b.Error(err)
				}
			})
		})
	}
}

var keys = func() []string {
	k := make([]string, 256)
	for i := range k {
		k[i] = fmt.Sprintf("bench:%d", i)
	}
	return k
}()

// runParallel runs fn b.N times from par goroutines, each with its own
// index so that callers use distinct keys (no contention).
func runParallel(b *testing.B, par int, fn func(worker int)) {
	b.SetParallelism(max(1, par/max(1, runtimeProcs())))
	var next int64
	var mu = make(chan struct{}, 1)
	mu <- struct{}{}
	b.RunParallel(func(pb *testing.PB) {
		<-mu
		id := int(next)
		next++
		mu <- struct{}{}
		for pb.Next() {
			fn(id)
		}
	})
}
