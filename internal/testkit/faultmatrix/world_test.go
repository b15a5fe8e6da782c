package faultmatrix_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/faultproxy"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/lua"
)

// go-redis' log lines about restarted servers are dropped.
func TestMain(m *testing.M) {
	testharness.DropGoRedisLogs()
	testharness.Main(m)
}

// world is one cell's servers: nodes dedicated servers (3 for redlock),
// each behind a fault proxy, with coordinators through the proxies (the
// clients under test: go-redis' default retries, ContextTimeoutEnabled)
// and admin clients straight to the servers.
type world struct {
	t      *testing.T
	srv    []*testharness.Server
	px     []*faultproxy.Proxy
	admin  []*redis.Client
	coord  []*coordination.Coordinator // through the proxies
	direct []*coordination.Coordinator // straight to the servers
	held   any                         // what the cell's take holds
	reader *sdkmetric.ManualReader     // the instruments of coord[0]
}

func newWorld(t *testing.T, flavor string, nodes int) *world {
	w := &world{t: t, reader: sdkmetric.NewManualReader()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(w.reader))
	for i := range nodes {
		srv := testharness.StartStandalone(t, flavor)
		px := faultproxy.Start(t, srv.Addr)
		o := srv.Options()
		o.Addr = px.Addr()
		o.ContextTimeoutEnabled = true
		user := redis.NewClient(o)
		admin := redis.NewClient(srv.Options())
		direct := redis.NewClient(srv.Options())
		t.Cleanup(func() { _, _, _ = user.Close(), admin.Close(), direct.Close() })
		preload(t, admin)
		w.srv, w.px, w.admin = append(w.srv, srv), append(w.px, px), append(w.admin, admin)
		var opts []coordination.Option
		if i == 0 {
			opts = append(opts, coordination.WithMeterProvider(mp))
		}
		w.coord = append(w.coord, must(coordination.New(user, opts...))(t))
		w.direct = append(w.direct, must(coordination.New(direct))(t))
	}
	return w
}

// counted returns the sum of the counter name recorded by coord[0].
func (w *world) counted(name string) int64 {
	var rm metricdata.ResourceMetrics
	if err := w.reader.Collect(context.Background(), &rm); err != nil {
		w.t.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == name {
				for _, p := range sum.DataPoints {
					n += p.Value
				}
			}
		}
	}
	return n
}

// preload loads every script of the library (SCRIPT LOAD), as a server
// that has served the library for a while has them: the first EVALSHA of
// an operation under a fault then runs instead of answering NOSCRIPT. (A
// lost or late NOSCRIPT means the operation did not run at all; the
// SCRIPT FLUSH row covers that path.)
func preload(t *testing.T, c *redis.Client) {
	t.Helper()
	for _, name := range lua.Names() {
		src := must(fs.ReadFile(lua.FS(), name+".lua"))(t)
		must(c.ScriptLoad(context.Background(), string(src)).Result())(t)
	}
}

func must[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return v
	}
}

// snapshot returns every key of a server with its type, TTL and DUMP, to
// prove that a failed operation wrote nothing.
func snapshot(t *testing.T, c *redis.Client) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	for _, k := range must(c.Keys(ctx, "*").Result())(t) {
		d, _ := c.Dump(ctx, k).Result()
		ttl := c.PTTL(ctx, k).Val() > 0
		out[k] = fmt.Sprintf("%s ttl=%v %x", c.Type(ctx, k).Val(), ttl, d)
	}
	return out
}

// evictVolatile makes the server evict keys that have a TTL
// (maxmemory-policy volatile-random with maxmemory just above what is in
// use), writing 64 KiB filler keys with a TTL until every key in gone has
// been evicted, then lifts the limit again. It returns the keys it found
// without a TTL: volatile-* never evicts those.
func evictVolatile(t *testing.T, c *redis.Client, keys []string) (kept []string) {
	t.Helper()
	ctx := context.Background()
	var gone []string
	for _, k := range keys {
		switch c.PTTL(ctx, k).Val() {
		case -2:
		case -1:
			kept = append(kept, k)
		default:
			gone = append(gone, k)
		}
	}
	used := must(testharness.InfoInt(ctx, c, "memory", "used_memory"))(t)
	must(c.ConfigSet(ctx, "maxmemory-policy", "volatile-random").Result())(t)
	must(c.ConfigSet(ctx, "maxmemory", strconv.FormatInt(used+256<<10, 10)).Result())(t)
	filler := strings.Repeat("x", 64<<10)
	for i := 0; ; i++ {
		left := 0
		for _, k := range gone {
			if c.Exists(ctx, k).Val() == 1 {
				left++
			}
		}
		if left == 0 {
			break
		}
		if i == 2000 {
			t.Fatalf("%d of %v not evicted after %d filler keys", left, gone, i)
		}
		// An OOM error is fine: the next command evicts.
		_ = c.Set(ctx, "filler:"+strconv.Itoa(i), filler, time.Hour).Err()
	}
	must(c.ConfigSet(ctx, "maxmemory", "0").Result())(t)
	for _, k := range kept {
		if c.Exists(ctx, k).Val() != 1 {
			t.Fatalf("volatile-random evicted %s, which has no TTL", k)
		}
	}
	return kept
}

// flavors are the server flavors the matrix runs on: COORD_MATRIX_FLAVOR
// (default redis8), or every available flavor for "all".
func flavors(t *testing.T) []string {
	v := os.Getenv("COORD_MATRIX_FLAVOR")
	if v == "all" {
		return testharness.AvailableFlavors(t)
	}
	if v == "" {
		v = "redis8"
	}
	if !slices.Contains(testharness.Flavors, v) {
		t.Fatalf("COORD_MATRIX_FLAVOR=%q: want one of %v or all", v, testharness.Flavors)
	}
	return []string{v}
}
