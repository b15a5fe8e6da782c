package ratelimit

import (
	"context"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testharness"
)

// BenchmarkDecision measures one rate-limit decision per operation against a
// real server (COORD_BENCH_BACKEND, default redis7), next to a no-op EVALSHA
// with one key (the PERFORMANCE.md baseline), at 1 and 64 concurrent
// callers. Every limiter is sized so that each decision is granted (the
// write path). The concurrency limiter's operation is Acquire + Release
// (two round trips). Ratio = ops/s of a limiter / ops/s of noop-evalsha at
// the same caller count:
//
//	go test -run '^$' -bench BenchmarkDecision -benchmem -count 5 -benchtime 2s ./ratelimit/
func BenchmarkDecision(b *testing.B) {
	name := "redis7"
	if v := lookupEnv("COORD_BENCH_BACKEND"); v != "" {
		name = v
	}
	be := testharness.Get(b, name)
	client := be.Client(b, func(o *redis.Options) { o.PoolSize = 128; o.MaxRetries = -1 })
	coord, err := coordination.New(client, coordination.WithKeyPrefix(be.Prefix()))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	const big = 1 << 30
	noop := redis.NewScript("return 1")
	noopKey := []string{be.Key("noop")}
	cases := []struct {
		name string
		op   func() error
	}{
		{"noop-evalsha", func() error { return noop.Run(ctx, client, noopKey).Err() }},
	}
	lims := map[string]Limiter{}
	mk := func(n string, l Limiter, err error) {
		if err != nil {
			b.Fatal(err)
		}
		lims[n] = l
		b.Cleanup(func() { _ = l.Close() })
	}
	l, err := NewFixedWindow(coord, "bench:fixed", FixedWindow{Limit: big, Window: time.Hour})
	mk("fixed", l, err)
	l, err = NewSlidingWindow(coord, "bench:sliding", SlidingWindow{Limit: big, Window: time.Minute, Segments: 10})
	mk("sliding", l, err)
	l, err = NewTokenBucket(coord, "bench:bucket", TokenBucket{Limit: big, TokensPerPeriod: 1, Period: time.Hour})
	mk("bucket", l, err)
	l, err = NewGCRA(coord, "bench:gcra", GCRA{Burst: big, Interval: time.Millisecond})
	mk("gcra", l, err)
	l, err = NewConcurrency(coord, "bench:concurrency", Concurrency{Limit: big, LeaseDuration: time.Minute})
	mk("concurrency", l, err)
	for _, n := range []string{"fixed", "sliding", "bucket", "gcra"} {
		l := lims[n]
		cases = append(cases, struct {
			name string
			op   func() error
		}{n, func() error {
			le, err := l.Acquire(ctx, 1)
			if err == nil && !le.Acquired() {
				b.Fatal("refused")
			}
			return err
		}})
	}
	conc := lims["concurrency"]
	cases = append(cases, struct {
		name string
		op   func() error
	}{"concurrency-acquire-release", func() error {
		le, err := conc.Acquire(ctx, 1)
		if err != nil {
			return err
		}
		return le.Release(ctx)
	}})
	for _, c := range cases {
		if err := c.op(); err != nil { // load the script
			b.Fatal(err)
		}
		b.Run(c.name+"/callers=1", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := c.op(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/callers=64", func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(max(1, 64/gomaxprocs()))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := c.op(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

func lookupEnv(k string) string { return os.Getenv(k) }

func gomaxprocs() int { return runtime.GOMAXPROCS(0) }
