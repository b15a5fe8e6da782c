package testharness

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The sentinel backend: one shared deployment per test binary, reached
// through go-redis' failover client (with the options a test sets), whose
// Sentinels report the primary the tests write to and would not fail it
// over for minutes; AdminOf follows its failover clients.
func TestSentinelBackend(t *testing.T) {
	if !slices.Contains(BackendNames(), "sentinel") {
		t.Fatalf("BackendNames() = %v, without sentinel", BackendNames())
	}
	b := Get(t, "sentinel")
	if !b.IsSentinel() || b.Server != nil || b.Cluster != nil || b.Flavor != SentinelFlavor() || b.LeastPrivilege() {
		t.Fatalf("backend %+v", b)
	}
	if again := Get(t, "sentinel"); again.Sentinel != b.Sentinel || again.Prefix() == b.Prefix() {
		t.Fatal("a second Get started another deployment or reused the prefix")
	}
	ctx := context.Background()
	c := b.Client(t, func(o *redis.Options) { o.ClientName, o.MaxRetries = "sentinel-backend-test", -1 })
	rc, ok := c.(*redis.Client)
	// go-redis keeps MaxRetries -1 as 0 (its default is 3).
	if !ok || rc.Options().Addr != "FailoverClient" || rc.Options().MaxRetries != 0 {
		t.Fatalf("client %T %+v, want a failover client without retries", c, rc.Options())
	}
	if name, err := rc.ClientGetName(ctx).Result(); err != nil || name != "sentinel-backend-test" {
		t.Fatalf("CLIENT GETNAME = %q, %v", name, err)
	}
	if err := c.Set(ctx, b.Key("k"), "v", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	direct := redis.NewClient(b.Sentinel.Primary.Options())
	defer direct.Close()
	if v, err := direct.Get(ctx, b.Key("k")).Result(); v != "v" || err != nil {
		t.Fatalf("GET on the primary = %q, %v", v, err)
	}
	if addr, err := b.Sentinel.MasterAddr(ctx); addr != b.Sentinel.Primary.Addr || err != nil {
		t.Fatalf("the Sentinels report the primary %s (%v), want %s", addr, err, b.Sentinel.Primary.Addr)
	}
	for _, sn := range b.Sentinel.Sentinels {
		m, err := b.Sentinel.sentinelMaster(ctx, sn)
		if err != nil || m["down-after-milliseconds"] != "600000" || m["num-slaves"] != "1" || m["num-other-sentinels"] != "2" {
			t.Fatalf("sentinel %s: %v, %v; want down-after 600000 ms, one replica, two other Sentinels", sn.Addr, m, err)
		}
	}
	admin := AdminOf(t, c)
	if ac, ok := admin.(*redis.Client); !ok || ac.Options().Addr != "FailoverClient" {
		t.Fatalf("AdminOf gave %T", admin)
	}
	if v, err := admin.Get(ctx, b.Key("k")).Result(); v != "v" || err != nil {
		t.Fatalf("GET through AdminOf = %q, %v", v, err)
	}
}

// StandaloneOnly leaves out the sentinel backend (it has no Server).
func TestStandaloneOnlySkipsSentinel(t *testing.T) {
	var ran atomic.Int64
	ForEach(t, func(t *testing.T, b *Backend) { ran.Add(1) }, Only("sentinel", "cluster"), StandaloneOnly(), Serial())
	if ran.Load() != 0 {
		t.Fatalf("StandaloneOnly ran %d subtests on sentinel or cluster", ran.Load())
	}
}
