package bench

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	limiter "github.com/ulule/limiter/v3"
	sredis "github.com/ulule/limiter/v3/drivers/store/redis"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/ratelimit"
)

// rateCase is one decision measured by the rate-limit benchmarks.
type rateCase struct {
	name string
	// setup returns the decision of caller id (each caller its own key).
	setup func(b *testing.B, id int) func(ctx context.Context) error
}

// rateCases are the decisions compared: the no-op EVALSHA and the floor
// script, ours (every algorithm, on its writing path: limits so high that
// every decision is granted, as PERFORMANCE.md asks of peers too), and the
// peers' writing paths.
func rateCases(b *testing.B, c redis.UniversalClient, prefix string) []rateCase {
	coord, err := coordination.New(c, append(tracingOptions(b), coordination.WithKeyPrefix(prefix))...)
	if err != nil {
		b.Fatal(err)
	}
	rr := redis_rate.NewLimiter(c)
	ustore, err := sredis.NewStoreWithOptions(c, limiter.StoreOptions{Prefix: prefix + "ulule"})
	if err != nil {
		b.Fatal(err)
	}
	const huge = 1 << 30
	ours := func(s ratelimit.Settings) func(b *testing.B, id int) func(context.Context) error {
		return func(b *testing.B, id int) func(context.Context) error {
			key := fmt.Sprintf("%T:%d", s, id)
			l, err := ratelimit.New(coord, key, s)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = l.Close() })
			return func(ctx context.Context) error {
				le, err := l.Allow(ctx, 1)
				if err == nil && !le.Allowed() {
					return fmt.Errorf("%T refused", s)
				}
				return err
			}
		}
	}
	keyed := func(f func(ctx context.Context, key string) error) func(b *testing.B, id int) func(context.Context) error {
		return func(b *testing.B, id int) func(context.Context) error {
			key := prefix + "peer:" + strconv.Itoa(id) + ":" + strconv.Itoa(int(time.Now().UnixNano()%1e6))
			return func(ctx context.Context) error { return f(ctx, key) }
		}
	}
	return []rateCase{
		{"noop-evalsha", keyed(func(ctx context.Context, key string) error { return noop.Run(ctx, c, []string{key}).Err() })},
		{"floor-time-get-set", keyed(func(ctx context.Context, key string) error {
			// The least a limiter deciding with the server's clock does on
			// its writing path (a value the size of a Unix time in s).
			return floorScript.Run(ctx, c, []string{key}, "1700000000", 60000).Err()
		})},
		{"ours-fixed-window", ours(ratelimit.FixedWindow{Limit: huge, Window: time.Hour})},
		{"ours-sliding-window", ours(ratelimit.SlidingWindow{Limit: huge, Window: time.Hour, Segments: 10})},
		{"ours-token-bucket", ours(ratelimit.TokenBucket{Limit: huge, TokensPerPeriod: huge, Period: time.Hour})},
		{"ours-gcra", ours(ratelimit.GCRA{Burst: huge, Interval: time.Millisecond})},
		{"ours-composite-3", ours(ratelimit.Composite{Components: []ratelimit.Settings{
			ratelimit.TokenBucket{Limit: huge, TokensPerPeriod: 2, Period: time.Second},
			ratelimit.SlidingWindow{Limit: huge, Window: time.Minute, Segments: 10},
			ratelimit.FixedWindow{Limit: huge, Window: time.Hour},
		}})},
		{"ulule-fixed-window", keyed(func(ctx context.Context, key string) error {
			_, err := ustore.Get(ctx, key, limiter.Rate{Period: time.Hour, Limit: huge})
			return err
		})},
		{"redis_rate-gcra", keyed(func(ctx context.Context, key string) error {
			_, err := rr.Allow(ctx, key, redis_rate.Limit{Rate: 1000, Burst: huge, Period: time.Second})
			return err
		})},
	}
}

// BenchmarkRateLimitDecision: one decision per op, each caller on its own
// key, every case of rateCases side by side in one run. Reports allocs/op
// and, at 1 caller, server-µs/op: the EVALSHA time INFO commandstats
// counts per call (the script's whole run) during the case, so that the
// floor script and the peers are measured on the same server at the same
// time. Run it in interleaved passes (several -count=1 runs) and compare
// medians:
//
//	for i in 1 2 3 4 5; do go test -run '^$' -bench RateLimitDecision -benchmem -count 1 -benchtime 20000x; done
func BenchmarkRateLimitDecision(b *testing.B) {
	be := backend(b)
	c := client(b, be)
	for _, callers := range []int{1, 64} {
		for _, rc := range rateCases(b, c, be.Prefix()) {
			b.Run(fmt.Sprintf("%s/callers=%d", rc.name, callers), func(b *testing.B) {
				ops := make([]func(context.Context) error, callers+1)
				for id := range ops {
					ops[id] = rc.setup(b, id)
				}
				ctx := context.Background()
				for _, op := range ops { // load scripts, create state
					if err := op(ctx); err != nil {
						b.Fatal(err)
					}
				}
				before := commandstats(b, c)
				b.ReportAllocs()
				b.ResetTimer()
				parallel(b, callers, func(id int) {
					if err := ops[id%len(ops)](ctx); err != nil {
						b.Error(err)
					}
				})
				b.StopTimer()
				if d := since(before, commandstats(b, c), scripts); callers == 1 && d.calls > 0 {
					b.ReportMetric(float64(d.usec)/float64(d.calls), "server-µs/op")
				}
			})
		}
	}
}
