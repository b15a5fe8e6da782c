package ratelimit

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// BenchmarkDecision measures one rate-limit decision per operation against a
// real server (COORD_BENCH_BACKEND, default redis7), next to a no-op EVALSHA
// with one key (the PERFORMANCE.md baseline), at 1 and 64 concurrent
// callers. Every limiter is sized so that each decision is granted (the
// write path). The concurrency limiter's operation is Allow + Release
// (two round trips). floor-time-get-set is a bare script reading TIME and
// the key and writing it with an expiry: the least any server-time limiter
// does, for calibration. Ratio = ops/s of a limiter / ops/s of noop-evalsha at
// the same caller count:
//
//	go test -run '^$' -bench BenchmarkDecision -benchmem -count 5 -benchtime 2s ./ratelimit/
//
// benchCase is one operation measured by the benchmarks.
type benchCase struct {
	name string
	op   func() error
}

// benchSetup starts (or reuses) the benchmark server and returns the no-op
// EVALSHA baseline and one decision per limiter, each already run once so
// that its script is cached.
func benchSetup(b *testing.B) (noop benchCase, decisions []benchCase) {
	name := "redis7"
	if v := os.Getenv("COORD_BENCH_BACKEND"); v != "" {
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
	script := redis.NewScript("return 1")
	noopKey := []string{be.Key("noop")}
	noop = benchCase{"noop-evalsha", func() error { return script.Run(ctx, client, noopKey).Err() }}
	// The floor of any limiter deciding with server time: read TIME, read
	// the key, write it with an expiry. Not a limiter; a calibration point.
	floor := redis.NewScript("local t = redis.call('TIME') local v = redis.call('GET', KEYS[1]) " +
		"redis.call('SET', KEYS[1], t[1], 'PX', 60000) return 1")
	floorKey := []string{be.Key("floor")}
	decisions = append(decisions, benchCase{"floor-time-get-set", func() error { return floor.Run(ctx, client, floorKey).Err() }})
	// The GCRA script run directly through the engine, without the limiter
	// (no hooks, no lease): separates the limiter's client-side cost from
	// the script's.
	e, err := engine.Of(coord)
	if err != nil {
		b.Fatal(err)
	}
	rawKey := e.Key("raw-gcra")
	gs, err := GCRA{Burst: big, Interval: time.Millisecond}.spec()
	if err != nil {
		b.Fatal(err)
	}
	decisions = append(decisions, benchCase{"gcra-script-only", func() error {
		_, err := gs.scripts.decide.Run(ctx, e, rawKey, gs.args("d", 1)...)
		return err
	}})
	mk := func(n string, l *tlim, err error) {
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = l.Close() })
		decisions = append(decisions, benchCase{n, func() error {
			le, err := l.Allow(ctx, 1)
			if err == nil && !le.Acquired() {
				b.Fatal("refused")
			}
			return err
		}})
	}
	l, err := newT(coord, "bench:fixed", FixedWindow{Limit: big, Window: time.Hour})
	mk("fixed", l, err)
	l, err = newT(coord, "bench:sliding", SlidingWindow{Limit: big, Window: time.Minute, Segments: 10})
	mk("sliding", l, err)
	l, err = newT(coord, "bench:bucket", TokenBucket{Limit: big, TokensPerPeriod: big, Period: time.Hour})
	mk("bucket", l, err)
	l, err = newT(coord, "bench:gcra", GCRA{Burst: big, Interval: time.Millisecond})
	mk("gcra", l, err)
	conc, err := newT(coord, "bench:concurrency", Concurrency{Limit: big, LeaseDuration: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conc.Close() })
	decisions = append(decisions, benchCase{"concurrency-acquire-release", func() error {
		le, err := conc.Allow(ctx, 1)
		if err != nil {
			return err
		}
		return le.Release(ctx)
	}})
	for _, c := range append([]benchCase{noop}, decisions...) {
		if err := c.op(); err != nil {
			b.Fatal(err)
		}
	}
	return noop, decisions
}

// BenchmarkDecision measures one rate-limit decision per operation against a
// real server (COORD_BENCH_BACKEND, default redis7), next to a no-op EVALSHA
// with one key (the PERFORMANCE.md baseline), at 1 and 64 concurrent
// callers. Every limiter is sized so that each decision is granted (the
// write path). The concurrency limiter's operation is Allow + Release
// (two round trips). floor-time-get-set is a bare script reading TIME and
// the key and writing it with an expiry: the least any server-time limiter
// does, for calibration. Ratio = ops/s of a limiter / ops/s of noop-evalsha at
// the same caller count:
//
//	go test -run '^$' -bench BenchmarkDecision -benchmem -count 5 -benchtime 2s ./ratelimit/
func BenchmarkDecision(b *testing.B) {
	noop, decisions := benchSetup(b)
	cases := append([]benchCase{noop}, decisions...)
	for _, c := range cases {
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
			b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
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

// BenchmarkDecisionPaired alternates one no-op EVALSHA and one decision in
// the same loop, timing each, so that both meet the same load on a shared
// machine, and reports ns per decision, ns per no-op and their ratio
// (noop-ns / decision-ns: the decision's throughput relative to the no-op,
// as in PERFORMANCE.md). callers=64 runs 64 goroutines doing the same.
//
//	go test -run '^$' -bench BenchmarkDecisionPaired -count 5 -benchtime 2s ./ratelimit/
func BenchmarkDecisionPaired(b *testing.B) {
	noop, decisions := benchSetup(b)
	for _, c := range decisions {
		for _, callers := range []int{1, 64} {
			b.Run(c.name+"/callers="+strconv.Itoa(callers), func(b *testing.B) {
				var noopNs, decNs atomic.Int64
				pair := func() {
					t0 := time.Now()
					if err := noop.op(); err != nil {
						b.Error(err)
						return
					}
					t1 := time.Now()
					if err := c.op(); err != nil {
						b.Error(err)
						return
					}
					noopNs.Add(int64(t1.Sub(t0)))
					decNs.Add(int64(time.Since(t1)))
				}
				if callers == 1 {
					for b.Loop() {
						pair()
					}
				} else {
					b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							pair()
						}
					})
				}
				n := float64(b.N)
				b.ReportMetric(float64(decNs.Load())/n, "decision-ns")
				b.ReportMetric(float64(noopNs.Load())/n, "noop-ns")
				b.ReportMetric(float64(noopNs.Load())/float64(decNs.Load()), "ratio")
			})
		}
	}
}
