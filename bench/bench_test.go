package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testharness"
	"github.com/coordkit/coordination/lock"
)

func TestMain(m *testing.M) { testharness.Main(m) }

func backend(b *testing.B) *testharness.Backend {
	name := os.Getenv("BENCH_BACKEND")
	if name == "" {
		name = "redis7"
	}
	return testharness.Get(b, name)
}

func client(b *testing.B, be *testharness.Backend) redis.UniversalClient {
	return be.Client(b, func(o *redis.Options) { o.PoolSize = 128 })
}

var noop = redis.NewScript("return 1")

// parallel runs fn b.N times spread over exactly callers goroutines; each
// goroutine gets its own id (so callers use distinct keys).
func parallel(b *testing.B, callers int, fn func(id int)) {
	if callers == 1 {
		for range b.N {
			fn(0)
		}
		return
	}
	b.SetParallelism((callers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	var next atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		id := int(next.Add(1))
		for pb.Next() {
			fn(id)
		}
	})
}

// BenchmarkLockAcquireRelease: one acquire and one release per op, no
// contention (each caller its own key). The no-op EVALSHA and PING rows
// are the one-round-trip floor to divide by.
func BenchmarkLockAcquireRelease(b *testing.B) {
	be := backend(b)
	c := client(b, be)
	ctx := context.Background()
	coord, _ := coordination.New(c, coordination.WithKeyPrefix(be.Prefix()))
	rl := redislock.New(c)
	rs := redsync.New(goredis.NewPool(c))
	key := func(id int) string { return fmt.Sprintf("%sk%d", be.Prefix(), id) }
	for _, callers := range []int{1, 64} {
		b.Run(fmt.Sprintf("floor-evalsha-noop/callers=%d", callers), func(b *testing.B) {
			noop.Load(ctx, c)
			b.ReportAllocs()
			parallel(b, callers, func(id int) {
				if err := noop.Run(ctx, c, []string{key(id)}).Err(); err != nil {
					b.Error(err)
				}
			})
		})
		b.Run(fmt.Sprintf("floor-ping/callers=%d", callers), func(b *testing.B) {
			b.ReportAllocs()
			parallel(b, callers, func(int) {
				if err := c.Ping(ctx).Err(); err != nil {
					b.Error(err)
				}
			})
		})
		b.Run(fmt.Sprintf("coordination-lock/callers=%d", callers), func(b *testing.B) {
			b.ReportAllocs()
			parallel(b, callers, func(id int) {
				l, err := lock.TryAcquire(ctx, coord, fmt.Sprint("c", id), time.Minute)
				if err != nil {
					b.Error(err)
					return
				}
				if _, err := l.Release(ctx); err != nil {
					b.Error(err)
				}
			})
		})
		b.Run(fmt.Sprintf("bsm-redislock/callers=%d", callers), func(b *testing.B) {
			b.ReportAllocs()
			parallel(b, callers, func(id int) {
				l, err := rl.Obtain(ctx, key(id)+"r", time.Minute, nil)
				if err != nil {
					b.Error(err)
					return
				}
				if err := l.Release(ctx); err != nil {
					b.Error(err)
				}
			})
		})
		b.Run(fmt.Sprintf("redsync/callers=%d", callers), func(b *testing.B) {
			b.ReportAllocs()
			mutexes := map[int]*redsync.Mutex{}
			parallel(b, callers, func(id int) {
				m := rs.NewMutex(key(id)+"s", redsync.WithExpiry(time.Minute), redsync.WithTries(1))
				if err := m.LockContext(ctx); err != nil {
					b.Error(err)
					return
				}
				if _, err := m.UnlockContext(ctx); err != nil {
					b.Error(err)
				}
			})
			_ = mutexes
		})
	}
}

// BenchmarkHandoff: a holder keeps the lock 20 ms and releases; a waiter
// blocked in the library's own acquire takes it. Reports the time from the
// release to the waiter holding (p50, p90, p99 in ms) over b.N handoffs.
//
//	go test -run '^$' -bench Handoff -benchtime 300x
func BenchmarkHandoff(b *testing.B) {
	be := backend(b)
	ctx := context.Background()
	type locker struct {
		acquire func() (release func(), err error)
	}
	mk := map[string]func() locker{
		"coordination-lock": func() locker {
			coord, _ := coordination.New(client(b, be), coordination.WithKeyPrefix(be.Prefix()))
			return locker{func() (func(), error) {
				l, err := lock.Acquire(ctx, coord, "handoff", time.Minute)
				if err != nil {
					return nil, err
				}
				return func() { l.Release(ctx) }, nil
			}}
		},
		"bsm-redislock-linear10ms": func() locker {
			rl := redislock.New(client(b, be))
			return locker{func() (func(), error) {
				l, err := rl.Obtain(ctx, be.Prefix()+"handoff-r", time.Minute, &redislock.Options{RetryStrategy: redislock.LinearBackoff(10 * time.Millisecond)})
				if err != nil {
					return nil, err
				}
				return func() { l.Release(ctx) }, nil
			}}
		},
		"redsync-default": func() locker {
			rs := redsync.New(goredis.NewPool(client(b, be)))
			return locker{func() (func(), error) {
				m := rs.NewMutex(be.Prefix()+"handoff-s", redsync.WithExpiry(time.Minute), redsync.WithTries(1000))
				if err := m.LockContext(ctx); err != nil {
					return nil, err
				}
				return func() { m.UnlockContext(ctx) }, nil
			}}
		},
	}
	for _, name := range []string{"coordination-lock", "bsm-redislock-linear10ms", "redsync-default"} {
		b.Run(name, func(b *testing.B) {
			holder, waiter := mk[name](), mk[name]()
			lat := make([]time.Duration, 0, b.N)
			for range b.N {
				rel, err := holder.acquire()
				if err != nil {
					b.Fatal(err)
				}
				var releasedAt atomic.Int64
				got := make(chan time.Time, 1)
				go func() {
					r, err := waiter.acquire()
					if err != nil {
						b.Error(err)
						got <- time.Now()
						return
					}
					at := time.Now()
					r()
					got <- at
				}()
				time.Sleep(20 * time.Millisecond)
				releasedAt.Store(time.Now().UnixNano())
				rel()
				at := <-got
				lat = append(lat, at.Sub(time.Unix(0, releasedAt.Load())))
			}
			slices.Sort(lat)
			q := func(p float64) float64 {
				return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
			}
			b.ReportMetric(q(0.50), "p50-ms")
			b.ReportMetric(q(0.90), "p90-ms")
			b.ReportMetric(q(0.99), "p99-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}
