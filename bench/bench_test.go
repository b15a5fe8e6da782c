package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/fencing"
	"github.com/coordkit/coordination/idempotency"
	"github.com/coordkit/coordination/internal/fencingcore"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/lock"
	"github.com/coordkit/coordination/semaphore"
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
	return be.Client(b, func(o *redis.Options) { o.PoolSize = 128; o.ContextTimeoutEnabled = true })
}

var noop = redis.NewScript("return 1")

// floor names the no-op EVALSHA rows.
const floor = "floor-evalsha-noop"

// floorScript is the least a claim-shaped script can cost: server TIME,
// one GET and one SET PX on its key.
var floorScript = redis.NewScript(`
local t = redis.call('TIME')
local v = redis.call('GET', KEYS[1])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1`)

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

// cmdStat is one command's calls and server time (µs) from INFO
// commandstats.
type cmdStat struct{ calls, usec int64 }

// commandstats reads INFO commandstats by command name (lower case,
// "evalsha", "set", ...). Commands a script runs are counted there too, so
// a benchmark sums the commands its client sends, never the nested ones.
func commandstats(b *testing.B, c redis.UniversalClient) map[string]cmdStat {
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]cmdStat{}
	for _, line := range strings.Split(info, "\r\n") {
		rest, ok := strings.CutPrefix(line, "cmdstat_")
		if !ok {
			continue
		}
		name, fields, _ := strings.Cut(rest, ":")
		var st cmdStat
		for _, f := range strings.Split(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				st.calls = n
			case "usec":
				st.usec = n
			}
		}
		out[name] = st
	}
	return out
}

// since returns the growth of the calls and server time of the commands
// names from before to after (two commandstats readings).
func since(before, after map[string]cmdStat, names []string) cmdStat {
	var d cmdStat
	for _, name := range names {
		d.calls += after[name].calls - before[name].calls
		d.usec += after[name].usec - before[name].usec
	}
	return d
}

// measure runs fn b.N times over callers goroutines and reports, besides
// ns/op and the allocations, the server's time per op (srv-us/op): the
// growth of INFO commandstats' usec of the commands the client sends
// (sent, e.g. "evalsha", "eval", "set") over the timed loop, divided by
// b.N. Nothing else uses the server meanwhile (one test binary, one
// server of its own).
func measure(b *testing.B, c redis.UniversalClient, callers int, sent []string, fn func(id int)) {
	b.ReportAllocs()
	before := commandstats(b, c)
	b.ResetTimer()
	parallel(b, callers, fn)
	b.StopTimer()
	usec := since(before, commandstats(b, c), sent).usec
	b.ReportMetric(float64(usec)/float64(b.N), "srv-us/op")
}

var scripts = []string{"evalsha", "eval"}

// ids are the caller keys, built up front so that building a key costs
// the benchmark nothing.
func ids(prefix string) []string {
	k := make([]string, 65)
	for i := range k {
		k[i] = prefix + strconv.Itoa(i)
	}
	return k
}

// BenchmarkLockAcquireRelease: one acquire and one release per op, no
// contention (each caller its own key), for this library's lock, fencing
// lock and semaphore and for the peers, next to the no-op EVALSHA (the
// floor every ratio divides by) in one run.
//
//	go run ./cmd/benchtab
func BenchmarkLockAcquireRelease(b *testing.B) {
	be := backend(b)
	c := client(b, be)
	ctx := context.Background()
	coord, _ := coordination.New(c, append(tracingOptions(b), coordination.WithKeyPrefix(be.Prefix()))...)
	rl := redislock.New(c)
	rs := redsync.New(goredis.NewPool(c))
	raw := ids(be.Prefix() + "raw:")
	ours := ids("ours:")
	leases, fences := ids("{f"), make([]string, 65)
	fenced := make([]*fencing.Mutex, 65)
	for i := range leases {
		fences[i] = leases[i] + "}:fence"
		leases[i] += "}:lease"
		var err error
		if fenced[i], err = fencing.New(coord, leases[i], fences[i]); err != nil {
			b.Fatal(err)
		}
	}
	sems := make([]*semaphore.Semaphore, 65)
	busy := make([]*semaphore.Semaphore, 65)
	locks := make([]*lock.Mutex, 65)
	for i := range sems {
		var err error
		if locks[i], err = lock.New(coord, ours[i]); err != nil {
			b.Fatal(err)
		}
		if sems[i], err = semaphore.New(coord, ours[i]+":sem", 8); err != nil {
			b.Fatal(err)
		}
		if busy[i], err = semaphore.New(coord, ours[i]+":busy", 1000); err != nil {
			b.Fatal(err)
		}
	}
	mutexes := make([]*redsync.Mutex, 65)
	for i := range mutexes {
		mutexes[i] = rs.NewMutex(raw[i]+":s", redsync.WithExpiry(time.Minute), redsync.WithTries(1))
	}
	for _, callers := range []int{1, 64} {
		// The semaphore with 100 other holders: the cost must not grow
		// with the number of permits held.
		for _, s := range busy {
			st, err := s.State(ctx)
			if err != nil {
				b.Fatal(err)
			}
			for range 100 - st.Holders {
				if _, err := s.TryAcquire(ctx, time.Hour); err != nil {
					b.Fatal(err)
				}
			}
		}
		sem := func(s []*semaphore.Semaphore) func(id int) {
			return func(id int) {
				p, err := s[id].TryAcquire(ctx, time.Minute)
				if err != nil {
					b.Error(err)
					return
				}
				if _, err := p.Release(ctx); err != nil {
					b.Error(err)
				}
			}
		}
		interleaved(b, c, callers, raw, []row{
			{"bsm-redislock", scripts, func(id int) {
				l, err := rl.Obtain(ctx, raw[id]+":r", time.Minute, nil)
				if err != nil {
					b.Error(err)
					return
				}
				if err := l.Release(ctx); err != nil {
					b.Error(err)
				}
			}, nil},
			{"redsync", append([]string{"set"}, scripts...), func(id int) {
				m := mutexes[id]
				if err := m.LockContext(ctx); err != nil {
					b.Error(err)
					return
				}
				if _, err := m.UnlockContext(ctx); err != nil {
					b.Error(err)
				}
			}, nil},
			{"coordination-lock", append([]string{"set"}, scripts...), func(id int) {
				l, err := locks[id].TryAcquire(ctx, time.Minute)
				if err != nil {
					b.Error(err)
					return
				}
				if _, err := l.Release(ctx); err != nil {
					b.Error(err)
				}
			}, nil},
			{"coordination-fencing", scripts, func(id int) {
				l, err := fenced[id].TryAcquire(ctx, time.Minute)
				if err != nil {
					b.Error(err)
					return
				}
				if _, err := l.Release(ctx); err != nil {
					b.Error(err)
				}
			}, nil},
			{"coordination-semaphore", scripts, sem(sems), nil},
			{"coordination-semaphore-100held", scripts, sem(busy), nil},
		})
	}
}

// row is one benchmarked operation: its name, the commands its client
// sends (for the server time) and one op.
type row struct {
	name string
	sent []string
	op   func(id int)
	// setup, when set, runs before each timed loop of b.N ops.
	setup func(n int)
}

// interleaved runs the no-op EVALSHA floor, then each row followed by the
// floor again, at callers concurrent callers: every row is measured between
// two floors taken just before and just after it, so that benchtab's ratio
// (the mean of the two floors' ns/op over the row's) compares moments of
// the same machine load.
func interleaved(b *testing.B, c redis.UniversalClient, callers int, raw []string, rows []row) {
	ctx := context.Background()
	noop.Load(ctx, c)
	floor := func(b *testing.B) {
		measure(b, c, callers, scripts, func(id int) {
			if err := noop.Run(ctx, c, raw[id:id+1]).Err(); err != nil {
				b.Error(err)
			}
		})
	}
	name := fmt.Sprintf("floor-evalsha-noop/callers=%d", callers)
	b.Run(name, floor)
	for _, r := range rows {
		b.Run(fmt.Sprintf("%s/callers=%d", r.name, callers), func(b *testing.B) {
			if r.setup != nil {
				r.setup(b.N)
			}
			measure(b, c, callers, r.sent, r.op)
		})
		b.Run(name, floor)
	}
}

// BenchmarkIdempotencyBegin: one Begin on a fresh key per op (a new
// pending claim), next to the no-op EVALSHA and the floor script (TIME +
// GET + SET PX in one script, also on a fresh key per op) in one run.
//
//	go run ./cmd/benchtab
func BenchmarkIdempotencyBegin(b *testing.B) {
	be := backend(b)
	c := client(b, be)
	ctx := context.Background()
	coord, _ := coordination.New(c, coordination.WithKeyPrefix(be.Prefix()))
	store, err := idempotency.New(coord)
	if err != nil {
		b.Fatal(err)
	}
	raw := ids(be.Prefix() + "idem-raw:")
	var run atomic.Int64
	for _, callers := range []int{1, 64} {
		var keys []string
		var next atomic.Int64
		// fresh builds n fresh keys before a timed loop: the floor script
		// and Begin both create a key per op.
		fresh := func(n int) {
			r := run.Add(1)
			keys = make([]string, n)
			for i := range keys {
				keys[i] = "idem:" + strconv.FormatInt(r, 10) + ":" + strconv.Itoa(i)
			}
			next.Store(0)
		}
		interleaved(b, c, callers, raw, []row{
			{"floor-script", scripts, func(int) {
				i := next.Add(1) - 1
				if int(i) >= len(keys) {
					b.Error("out of fresh keys")
					return
				}
				if err := floorScript.Run(ctx, c, []string{be.Prefix() + keys[i]}, "a-36-byte-owner-token-of-the-caller.", 60000).Err(); err != nil {
					b.Error(err)
				}
			}, fresh},
			{"coordination-idempotency-begin", scripts, func(int) {
				i := next.Add(1) - 1
				if int(i) >= len(keys) {
					b.Error("out of fresh keys")
					return
				}
				cl, err := store.Begin(ctx, keys[i], time.Minute)
				if err != nil || cl.State != idempotency.Started {
					b.Error(cl.State, err)
				}
			}, fresh},
		})
	}
}

// BenchmarkPaired measures every row of BenchmarkLockAcquireRelease and
// BenchmarkIdempotencyBegin paired, at 1 and at 64 callers: the rows take
// turns in chunks (200 ops at one caller; 20 ops per caller, 1,280 in all,
// at 64), in a rotating order, for 25 rounds, and each row's wall time and
// server time (the growth of INFO commandstats' usec of the commands it
// sends) are summed over its own chunks. A burst of load from the shared
// machine, which lengthens whatever runs then (a command inside the server
// as well), falls on every row alike, so the ratio of a row's ops/s to the
// floor's and its server time per op are steady from run to run. The
// database is first filled with 140,000 keys (a key table of 262,144
// slots), so that the keys the two rows that create a key per op add
// (74,000) never make Redis grow its key table: the rehash would fall on
// whichever row runs then. Each row reports ns/op (its wall time per op)
// and srv-us/op; b.N does not matter.
//
//	go run ./cmd/benchtab -passes 0
func BenchmarkPaired(b *testing.B) {
	be := backend(b)
	c := client(b, be)
	ctx := context.Background()
	fill := redis.NewScript("for i = 1, tonumber(ARGV[1]) do redis.call('SET', 'fill:' .. i, '') end return 1")
	if err := fill.Run(ctx, c, nil, 140000).Err(); err != nil {
		b.Fatal(err)
	}
	coord, _ := coordination.New(c, coordination.WithKeyPrefix(be.Prefix()))
	rl := redislock.New(c)
	rs := redsync.New(goredis.NewPool(c))
	store, err := idempotency.New(coord)
	if err != nil {
		b.Fatal(err)
	}
	raw := ids(be.Prefix() + "p:")
	ours := ids("p:")
	mutexes := make([]*redsync.Mutex, 65)
	sems := make([]*semaphore.Semaphore, 65)
	busy := make([]*semaphore.Semaphore, 65)
	locks := make([]*lock.Mutex, 65)
	fenced := make([]*fencing.Mutex, 65)
	for i := range 65 {
		mutexes[i] = rs.NewMutex(raw[i]+":s", redsync.WithExpiry(time.Minute), redsync.WithTries(1))
		if locks[i], err = lock.New(coord, ours[i]); err != nil {
			b.Fatal(err)
		}
		if fenced[i], err = fencing.New(coord, "{"+ours[i]+"}:lease", "{"+ours[i]+"}:fence"); err != nil {
			b.Fatal(err)
		}
		if sems[i], err = semaphore.New(coord, ours[i]+":sem", 8); err != nil {
			b.Fatal(err)
		}
		if busy[i], err = semaphore.New(coord, ours[i]+":busy", 1000); err != nil {
			b.Fatal(err)
		}
		for range 100 {
			if _, err := busy[i].TryAcquire(ctx, time.Hour); err != nil {
				b.Fatal(err)
			}
		}
	}
	var fresh atomic.Int64
	freshKey := func() string { return "p:idem:" + strconv.FormatInt(fresh.Add(1), 10) }
	check := func(err error) {
		if err != nil {
			b.Error(err)
		}
	}
	sem := func(s []*semaphore.Semaphore) func(int) {
		return func(id int) {
			p, err := s[id].TryAcquire(ctx, time.Minute)
			if err != nil {
				b.Error(err)
				return
			}
			_, err = p.Release(ctx)
			check(err)
		}
	}
	rows := []row{
		{floor, scripts, func(id int) { check(noop.Run(ctx, c, raw[id:id+1]).Err()) }, nil},
		{"floor-script", scripts, func(int) {
			check(floorScript.Run(ctx, c, []string{be.Prefix() + freshKey()}, "a-36-byte-owner-token-of-the-caller.", 60000).Err())
		}, nil},
		{"bsm-redislock", scripts, func(id int) {
			l, err := rl.Obtain(ctx, raw[id]+":r", time.Minute, nil)
			if err != nil {
				b.Error(err)
				return
			}
			check(l.Release(ctx))
		}, nil},
		{"redsync", append([]string{"set"}, scripts...), func(id int) {
			if err := mutexes[id].LockContext(ctx); err != nil {
				b.Error(err)
				return
			}
			_, err := mutexes[id].UnlockContext(ctx)
			check(err)
		}, nil},
		{"coordination-lock", append([]string{"set"}, scripts...), func(id int) {
			l, err := locks[id].TryAcquire(ctx, time.Minute)
			if err != nil {
				b.Error(err)
				return
			}
			_, err = l.Release(ctx)
			check(err)
		}, nil},
		{"coordination-fencing", scripts, func(id int) {
			l, err := fenced[id].TryAcquire(ctx, time.Minute)
			if err != nil {
				b.Error(err)
				return
			}
			_, err = l.Release(ctx)
			check(err)
		}, nil},
		{"coordination-semaphore", scripts, sem(sems), nil},
		{"coordination-semaphore-100held", scripts, sem(busy), nil},
		{"coordination-idempotency-begin", scripts, func(int) {
			cl, err := store.Begin(ctx, freshKey(), time.Minute)
			if err != nil || cl.State != idempotency.Started {
				b.Error(cl.State, err)
			}
		}, nil},
	}
	const rounds = 25
	for _, callers := range []int{1, 64} {
		perCaller := 200
		if callers > 1 {
			perCaller = 20
		}
		chunk := func(op func(int)) time.Duration {
			start := time.Now()
			if callers == 1 {
				for range perCaller {
					op(0)
				}
				return time.Since(start)
			}
			var wg sync.WaitGroup
			for g := 1; g <= callers; g++ {
				wg.Go(func() {
					for range perCaller {
						op(g)
					}
				})
			}
			wg.Wait()
			return time.Since(start)
		}
		for _, r := range rows { // warm: scripts cached, connections open
			chunk(r.op)
		}
		usec := make([]int64, len(rows))
		wall := make([]time.Duration, len(rows))
		for i := range rounds {
			for j := range rows {
				k := (i + j) % len(rows)
				before := commandstats(b, c)
				wall[k] += chunk(rows[k].op)
				usec[k] += since(before, commandstats(b, c), rows[k].sent).usec
			}
		}
		ops := float64(rounds * perCaller * callers)
		for k, r := range rows {
			b.Run(fmt.Sprintf("%s/callers=%d", r.name, callers), func(b *testing.B) {
				for range b.N {
				}
				b.ReportMetric(float64(wall[k].Nanoseconds())/ops, "ns/op")
				b.ReportMetric(float64(usec[k])/ops, "srv-us/op")
			})
		}
	}
}

// BenchmarkHandoff: a holder keeps the lock 20 ms and releases; a waiter
// blocked in the library's own acquire takes it. Reports the time from the
// release to the waiter holding (p50, p90, p99 in ms) over b.N handoffs.
// The first row is the limit: a client blocked in BLPOP woken by another
// client's LPUSH, on the same server in the same run.
//
//	go run ./cmd/benchtab -passes 0 -paired 0 -handoff 3
func BenchmarkHandoff(b *testing.B) {
	be := backend(b)
	ctx := context.Background()
	type locker struct {
		acquire func() (release func(), err error)
	}
	mk := map[string]func() locker{
		"coordination-lock": func() locker {
			coord, _ := coordination.New(client(b, be), coordination.WithKeyPrefix(be.Prefix()))
			mu, err := lock.New(coord, "handoff")
			if err != nil {
				b.Fatal(err)
			}
			return locker{func() (func(), error) {
				l, err := mu.Acquire(ctx, time.Minute)
				if err != nil {
					return nil, err
				}
				return func() { l.Release(ctx) }, nil
			}}
		},
		"coordination-fencing": func() locker {
			coord, _ := coordination.New(client(b, be), coordination.WithKeyPrefix(be.Prefix()))
			mu, err := fencing.New(coord, "{handoff}:lease", "{handoff}:fence")
			if err != nil {
				b.Fatal(err)
			}
			return locker{func() (func(), error) {
				l, err := mu.Acquire(ctx, time.Minute)
				if err != nil {
					return nil, err
				}
				return func() { l.Release(ctx) }, nil
			}}
		},
		"coordination-semaphore": func() locker {
			coord, _ := coordination.New(client(b, be), coordination.WithKeyPrefix(be.Prefix()))
			s, err := semaphore.New(coord, "handoff-sem", 1)
			if err != nil {
				b.Fatal(err)
			}
			return locker{func() (func(), error) {
				p, err := s.Acquire(ctx, time.Minute)
				if err != nil {
					return nil, err
				}
				return func() { p.Release(ctx) }, nil
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
	for _, name := range []string{"blpop-lpush", "coordination-lock", "coordination-fencing", "coordination-semaphore", "bsm-redislock-linear10ms", "redsync-default"} {
		b.Run(name, func(b *testing.B) {
			var holder, waiter locker
			if name != "blpop-lpush" {
				holder, waiter = mk[name](), mk[name]()
			} else {
				// The holder "holds" until it pushes the element that the
				// waiter's BLPOP takes.
				list := be.Prefix() + "handoff-list"
				hc, wc := client(b, be), client(b, be)
				holder = locker{func() (func(), error) {
					return func() { hc.LPush(ctx, list, "x") }, nil
				}}
				waiter = locker{func() (func(), error) {
					return func() {}, wc.BLPop(ctx, 0, list).Err()
				}}
			}
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

// BenchmarkMemoryUsage reports MEMORY USAGE (bytes, SAMPLES 0) of one idle
// key of each kind, with a 40-byte key name: a plain SET PX for scale, a
// held lock (ours, bsm/redislock's and redsync's), a fencing lease and the slot's shared counter hash holding its one
// counter, a semaphore with one permit
// held, and idempotency claims (pending; completed with a 100-byte
// result). b.N does not matter.
//
//	go run ./cmd/benchtab -passes 0 -paired 0 -memory
func BenchmarkMemoryUsage(b *testing.B) {
	be := backend(b)
	c := client(b, be)
	ctx := context.Background()
	coord, _ := coordination.New(c) // no prefix: the names below are the keys
	name := func(kind string) string {
		k := "mem:" + kind + ":"
		return k + strings.Repeat("x", 40-len(k))
	}
	usage := func(b *testing.B, key string) {
		n, err := c.MemoryUsage(ctx, key, 0).Result()
		if err != nil {
			b.Fatal(key, err)
		}
		for range b.N {
		}
		b.ReportMetric(float64(n), "bytes")
		b.ReportMetric(0, "ns/op")
	}
	b.Run("set-px", func(b *testing.B) {
		k := name("set")
		c.Set(ctx, k, "a-36-byte-owner-token-of-the-caller.", time.Minute)
		usage(b, k)
	})
	b.Run("lock", func(b *testing.B) {
		k := name("lock")
		c.Del(ctx, k)
		mu, err := lock.New(coord, k)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := mu.TryAcquire(ctx, time.Minute); err != nil {
			b.Fatal(err)
		}
		usage(b, k)
	})
	b.Run("bsm-redislock", func(b *testing.B) {
		k := name("bsm")
		c.Del(ctx, k)
		if _, err := redislock.New(c).Obtain(ctx, k, time.Minute, nil); err != nil {
			b.Fatal(err)
		}
		usage(b, k)
	})
	b.Run("redsync", func(b *testing.B) {
		k := name("redsync")
		c.Del(ctx, k)
		if err := redsync.New(goredis.NewPool(c)).NewMutex(k, redsync.WithExpiry(time.Minute), redsync.WithTries(1)).Lock(); err != nil {
			b.Fatal(err)
		}
		usage(b, k)
	})
	lease, fence := name("{f}lease"), name("{f}fence")
	b.Run("fencing-lease", func(b *testing.B) {
		c.Del(ctx, lease)
		mu, err := fencing.New(coord, lease, fence)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := mu.TryAcquire(ctx, time.Minute); err != nil {
			b.Fatal(err)
		}
		usage(b, lease)
	})
	// The counter is a field of its slot's shared counter hash (issue 24);
	// this is that hash holding this one name's counter.
	b.Run("fencing-counter-hash-1-name", func(b *testing.B) { usage(b, fencingcore.SharedKeyOf("", fence)) })
	b.Run("semaphore-1-permit", func(b *testing.B) {
		k := name("sem")
		c.Del(ctx, k)
		s, err := semaphore.New(coord, k, 10)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.TryAcquire(ctx, time.Minute); err != nil {
			b.Fatal(err)
		}
		usage(b, k)
	})
	store, err := idempotency.New(coord)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("idempotency-pending", func(b *testing.B) {
		k := name("idem-pending")
		c.Del(ctx, k)
		if cl, err := store.Begin(ctx, k, time.Minute); err != nil || cl.State != idempotency.Started {
			b.Fatal(cl.State, err)
		}
		usage(b, k)
	})
	b.Run("idempotency-completed-100B", func(b *testing.B) {
		k := name("idem-done")
		c.Del(ctx, k)
		cl, err := store.Begin(ctx, k, time.Minute)
		if err != nil || cl.State != idempotency.Started {
			b.Fatal(cl.State, err)
		}
		if ok, err := store.Complete(ctx, k, cl.Owner, []byte(strings.Repeat("r", 100))); err != nil || !ok {
			b.Fatal(ok, err)
		}
		usage(b, k)
	})
}
