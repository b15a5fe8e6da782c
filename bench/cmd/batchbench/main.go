// Command batchbench measures ratelimit.WithBatch on one hot key, in one
// run against one Redis server it starts: decisions per second on one key
// at 1, 4 and 16 processes (each its own client, coordinator and limiter,
// with several goroutines), unbatched and batched; the overshoot observed
// per fixed window under a binding limit beside the bound P × block; and
// the rate-limit middleware on one hot client key under wrk beside the
// bare handler.
//
//	. ~/.cache/redis-servers/env.sh
//	cd bench && go run ./cmd/batchbench
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/bench/internal/port"
	"github.com/coordkit/coordination/ratelimit"
)

var (
	server  = flag.String("server", os.Getenv("REDIS7_SERVER"), "redis-server binary (default $REDIS7_SERVER)")
	dur     = flag.Duration("d", 2*time.Second, "duration of each throughput row")
	gor     = flag.Int("g", 8, "goroutines per process")
	block   = flag.Int("block", 100, "WithBatch block, permits")
	hold    = flag.Duration("hold", 20*time.Millisecond, "WithBatch hold")
	limit   = flag.Int("limit", 20000, "the binding limit of the overshoot rows, permits per window")
	window  = flag.Duration("window", time.Second, "the window of the overshoot rows")
	windows = flag.Int("windows", 4, "windows per overshoot row")
	wrkDur  = flag.String("wrkd", "5s", "wrk duration per HTTP row")
	conns   = flag.Int("c", 16, "wrk connections")
	procsF  = flag.String("procs", "1,4,16", "process counts")
)

func main() {
	flag.Parse()
	if *server == "" {
		fail("no redis-server: set REDIS7_SERVER (. ~/.cache/redis-servers/env.sh) or -server")
	}
	port := freePort()
	srv := exec.Command(*server, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := srv.Start(); err != nil {
		fail(err.Error())
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	admin := redis.NewClient(&redis.Options{Addr: addr})
	for i := 0; admin.Ping(context.Background()).Err() != nil; i++ {
		if i > 100 {
			fail("redis-server did not answer")
		}
		time.Sleep(50 * time.Millisecond)
	}
	ver, _ := admin.Info(context.Background(), "server").Result()
	if m := regexp.MustCompile(`redis_version:(\S+)`).FindStringSubmatch(ver); m != nil {
		fmt.Printf("Redis %s on %s, %d goroutines per process, block %d, hold %v\n\n", m[1], addr, *gor, *block, *hold)
	}

	var procs []int
	for _, s := range strings.Split(*procsF, ",") {
		n, err := strconv.Atoi(s)
		if err != nil {
			fail(err.Error())
		}
		procs = append(procs, n)
	}

	fmt.Println("| processes | unbatched decisions/s | batched decisions/s | ratio | windows | max granted in a window (limit) | overshoot max | bound P×block |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	for _, p := range procs {
		free := ratelimit.FixedWindow{Limit: 1 << 30, Window: time.Hour}
		un := throughput(addr, "tp:un:"+strconv.Itoa(p), p, free, nil)
		ba := throughput(addr, "tp:ba:"+strconv.Itoa(p), p, free, []ratelimit.Option{ratelimit.WithBatch(*block, *hold)})
		n, most := overshoot(addr, admin, "ov:"+strconv.Itoa(p), p)
		fmt.Printf("| %d | %.0f | %.0f | %.1fx | %d | %d (%d) | %d | %d |\n", p, un, ba, ba/un, n, most, *limit, max(most-*limit, 0), p**block)
	}
	fmt.Println()
	httpRows(addr)
}

// processes returns p limiters on key, each on its own client.
func processes(addr, key string, p int, s ratelimit.Settings, opts []ratelimit.Option) ([]*ratelimit.Limiter, func()) {
	var ls []*ratelimit.Limiter
	var cs []*redis.Client
	for range p {
		c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 2 * *gor, ContextTimeoutEnabled: true})
		coord, err := coordination.New(c, coordination.WithKeyPrefix("batchbench:"))
		if err != nil {
			fail(err.Error())
		}
		l, err := ratelimit.New(coord, key, s, opts...)
		if err != nil {
			fail(err.Error())
		}
		ls, cs = append(ls, l), append(cs, c)
	}
	return ls, func() {
		for i := range ls {
			_ = ls[i].Close()
			_ = cs[i].Close()
		}
	}
}

// throughput returns decisions per second on one key of p processes.
func throughput(addr, key string, p int, s ratelimit.Settings, opts []ratelimit.Option) float64 {
	ls, done := processes(addr, key, p, s, opts)
	defer done()
	ctx := context.Background()
	for _, l := range ls { // load the script
		if _, err := l.Allow(ctx, 1); err != nil {
			fail(err.Error())
		}
	}
	var n atomic.Int64
	stop := time.Now().Add(*dur)
	var wg sync.WaitGroup
	start := time.Now()
	for _, l := range ls {
		for range *gor {
			wg.Add(1)
			go func() {
				defer wg.Done()
				k := int64(0)
				for time.Now().Before(stop) {
					for range 64 {
						if _, err := l.Allow(ctx, 1); err != nil {
							fail(err.Error())
						}
					}
					k += 64
				}
				n.Add(k)
			}()
		}
	}
	wg.Wait()
	return float64(n.Load()) / time.Since(start).Seconds()
}

// overshoot runs p batched processes against a fixed window of -limit per
// -window for -windows windows, learns each window's end from the key
// (polled), and returns how many windows it saw whole and the most
// permits granted in one of them.
func overshoot(addr string, admin *redis.Client, key string, p int) (int, int) {
	s := ratelimit.FixedWindow{Limit: *limit, Window: *window}
	ls, done := processes(addr, key, p, s, []ratelimit.Option{ratelimit.WithBatch(*block, *hold)})
	defer done()
	ctx := context.Background()
	stop := time.Now().Add(time.Duration(*windows) * *window)
	var (
		mu     sync.Mutex
		grants []int64 // wall-clock µs of each grant (the server shares the clock)
		ends   = map[int64]bool{}
		wg     sync.WaitGroup
	)
	wg.Add(1)
	go func() { // the window ends, from the key: "f:<limit>:<ms>|<end_ms>|..."
		defer wg.Done()
		for time.Now().Before(stop.Add(*window)) {
			v, err := admin.Get(ctx, "batchbench:"+key).Result()
			if err == nil {
				if f := strings.Split(v, "|"); len(f) > 2 {
					if e, err := strconv.ParseInt(f[1], 10, 64); err == nil {
						mu.Lock()
						ends[e] = true
						mu.Unlock()
					}
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	for _, l := range ls {
		for range *gor {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var mine []int64
				for time.Now().Before(stop) {
					d, err := l.Allow(ctx, 1)
					if err != nil {
						fail(err.Error())
					}
					if d.Allowed() {
						mine = append(mine, time.Now().UnixMicro())
					} else if ra, ok := d.RetryAfter(); ok && ra > 5*time.Millisecond {
						time.Sleep(ra / 4)
					}
				}
				mu.Lock()
				grants = append(grants, mine...)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	slices.Sort(grants)
	w := window.Microseconds()
	seen, most := 0, 0
	for e := range ends {
		hi := e * 1000
		lo := hi - w
		if len(grants) == 0 || lo < grants[0] || hi > grants[len(grants)-1] {
			continue // not a whole window of the run
		}
		a, _ := slices.BinarySearch(grants, lo)
		b, _ := slices.BinarySearch(grants, hi)
		seen++
		most = max(most, b-a)
	}
	return seen, most
}

// httpRows serves a bare handler and the middleware on one hot client
// key, unbatched and batched, and drives each with wrk.
func httpRows(addr string) {
	if _, err := exec.LookPath("wrk"); err != nil {
		fmt.Println("wrk not found: apt-get install -y wrk")
		return
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 128, ContextTimeoutEnabled: true})
	defer c.Close()
	coord, err := coordination.New(c, coordination.WithKeyPrefix("batchbench:"))
	if err != nil {
		fail(err.Error())
	}
	built := 0
	mw := func(headers bool, opts ...ratelimit.Option) http.Handler {
		built++
		row := strconv.Itoa(built)
		part, err := ratelimit.NewPartitioned(func(client string) (*ratelimit.Limiter, error) {
			return ratelimit.New(coord, ratelimit.PartitionKey("http:"+row, client),
				ratelimit.GCRA{Burst: 1 << 30, Rate: 1 << 30, Period: time.Second}, opts...)
		})
		if err != nil {
			fail(err.Error())
		}
		m, err := ratelimit.NewMiddleware([]ratelimit.Policy{{
			Name: "client", Partitioned: part, RateLimitHeader: headers, PublishQuota: headers,
			Partition: func(*http.Request) string { return "the-one-hot-client" },
		}})
		if err != nil {
			fail(err.Error())
		}
		return m(ok)
	}
	rows := []struct {
		name string
		h    http.Handler
	}{
		{"bare handler", ok},
		{"middleware, unbatched", mw(true)},
		{"middleware, WithBatch(" + strconv.Itoa(*block) + ", " + hold.String() + ")", mw(true, ratelimit.WithBatch(*block, *hold))},
		{"middleware, WithBatch(" + strconv.Itoa(*block) + ", " + hold.String() + "), no RateLimit fields", mw(false, ratelimit.WithBatch(*block, *hold))},
	}
	fmt.Printf("HTTP, one hot client key (GCRA never reached), wrk -t2 -c%d -d%s, rows interleaved, 3 rounds:\n\n", *conns, *wrkDur)
	res := make([][]float64, len(rows))
	lat := make([][]string, len(rows))
	urls := make([]string, len(rows))
	for i, r := range rows {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fail(err.Error())
		}
		hs := &http.Server{Handler: r.h}
		go func() { _ = hs.Serve(ln) }()
		defer hs.Close()
		urls[i] = "http://" + ln.Addr().String() + "/"
	}
	for range 3 {
		for i := range rows {
			out, err := exec.Command("wrk", "-t2", "-c"+strconv.Itoa(*conns), "-d"+*wrkDur, "--latency", urls[i]).CombinedOutput()
			if err != nil {
				fail(fmt.Sprintf("wrk: %v: %s", err, out))
			}
			m := regexp.MustCompile(`Requests/sec:\s+([\d.]+)`).FindSubmatch(out)
			if m == nil {
				fail("wrk output: " + string(out))
			}
			v, _ := strconv.ParseFloat(string(m[1]), 64)
			res[i] = append(res[i], v)
			if l := regexp.MustCompile(`50%\s+(\S+)`).FindSubmatch(out); l != nil {
				lat[i] = append(lat[i], string(l[1]))
			}
			if bad := regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`).FindSubmatch(out); bad != nil {
				fail(rows[i].name + ": refused responses: " + string(bad[1]))
			}
		}
	}
	fmt.Println("| handler | req/s, 3 rounds | median | ratio to bare (median of per-round ratios) | p50 |")
	fmt.Println("|---|---|---|---|---|")
	for i, r := range rows {
		var ratios []float64
		for k := range res[i] {
			ratios = append(ratios, res[i][k]/res[0][k])
		}
		fmt.Printf("| %s | %s | %.0f | %.2f | %s |\n", r.name, join(res[i]), median(res[i]), median(ratios), strings.Join(lat[i], ", "))
	}
}

func join(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatFloat(x, 'f', 0, 64)
	}
	return strings.Join(s, ", ")
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func freePort() int {
	p, err := port.Free()
	if err != nil {
		fail(err.Error())
	}
	return p
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "batchbench:", msg)
	os.Exit(1)
}
