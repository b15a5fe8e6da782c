package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	limiter "github.com/ulule/limiter/v3"
	sredis "github.com/ulule/limiter/v3/drivers/store/redis"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/ratelimit"
)

// BenchmarkRateLimitDecision: one rate-limit decision per op against a
// limit that never rejects (so every op writes), each caller on its own
// key, next to the no-op EVALSHA floor, in one run.
//
//	go test -run '^$' -bench RateLimitDecision -benchmem -count 5 -benchtime 2s
func BenchmarkRateLimitDecision(b *testing.B) {
	be := backend(b)
	c := client(b, be)
	ctx := context.Background()
	coord, _ := coordination.New(c, coordination.WithKeyPrefix(be.Prefix()))
	rr := redis_rate.NewLimiter(c)
	// ulule/limiter needs a *redis.Client-compatible client.
	ustore, err := sredis.NewStoreWithOptions(c, limiter.StoreOptions{Prefix: be.Prefix() + "ulule"})
	if err != nil {
		b.Fatal(err)
	}
	huge := 1 << 30
	for _, callers := range []int{1, 64} {
		gcra := map[int]*ratelimit.Limiter{}
		fixed := map[int]*ratelimit.Limiter{}
		get := func(m map[int]*ratelimit.Limiter, id int, mk func(string) (*ratelimit.Limiter, error)) *ratelimit.Limiter {
			if l, ok := m[id]; ok {
				return l
			}
			l, err := mk(fmt.Sprintf("k%d-%d", callers, id))
			if err != nil {
				b.Fatal(err)
			}
			m[id] = l
			return l
		}
		// Build the limiters up front: parallel map writes are not safe.
		for id := 0; id <= callers; id++ {
			get(gcra, id, func(k string) (*ratelimit.Limiter, error) {
				return ratelimit.NewGCRA(coord, "gcra:"+k, ratelimit.GCRA{Burst: huge, Interval: time.Millisecond})
			})
			get(fixed, id, func(k string) (*ratelimit.Limiter, error) {
				return ratelimit.NewFixedWindow(coord, "fixed:"+k, ratelimit.FixedWindow{Limit: huge, Window: time.Hour})
			})
		}
		b.Run(fmt.Sprintf("floor-evalsha-noop/callers=%d", callers), func(b *testing.B) {
			noop.Load(ctx, c)
			b.ReportAllocs()
			parallel(b, callers, func(id int) {
				if err := noop.Run(ctx, c, []string{fmt.Sprint(be.Prefix(), "n", id)}).Err(); err != nil {
					b.Error(err)
				}
			})
		})
		b.Run(fmt.Sprintf("coordination-gcra/callers=%d", callers), func(b *testing.B) {
			b.ReportAllocs()
			parallel(b, callers, func(id int) {
				if _, err := gcra[id%(callers+1)].Allow(ctx, 1); err != nil {
					b.Error(err)
				}
			})
		})
		b.Run(fmt.Sprintf("redis_rate-gcra/callers=%d", callers), func(b *testing.B) {
			b.ReportAllocs()
			lim := redis_rate.Limit{Rate: 1000, Burst: huge, Period: time.Second}
			parallel(b, callers, func(id int) {
				if _, err := rr.Allow(ctx, fmt.Sprint(be.Prefix(), "rr", id), lim); err != nil {
					b.Error(err)
				}
			})
		})
		b.Run(fmt.Sprintf("coordination-fixed-window/callers=%d", callers), func(b *testing.B) {
			b.ReportAllocs()
			parallel(b, callers, func(id int) {
				if _, err := fixed[id%(callers+1)].Allow(ctx, 1); err != nil {
					b.Error(err)
				}
			})
		})
		b.Run(fmt.Sprintf("ulule-fixed-window/callers=%d", callers), func(b *testing.B) {
			b.ReportAllocs()
			rate := limiter.Rate{Period: time.Hour, Limit: int64(huge)}
			parallel(b, callers, func(id int) {
				if _, err := ustore.Get(ctx, fmt.Sprint("u", id), rate); err != nil {
					b.Error(err)
				}
			})
		})
		for _, m := range []map[int]*ratelimit.Limiter{gcra, fixed} {
			for _, l := range m {
				l.Close()
			}
		}
	}
}
