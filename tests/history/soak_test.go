package history

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/fencingcore"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/ratelimit"
)

// Bounds of the soak: after it, with every client and proxy closed, the
// process holds at most soakGoroutines more goroutines and soakHeap more
// live heap than before it.
const (
	soakGoroutines = 10
	soakHeap       = 16 << 20
)

// TestSoak runs every primitive's workload at once (each on its own
// proxies, with its faults) for COORD_SOAK (10s by default; on one real
// server, or on every backend in turn when COORD_SOAK_ALL is set), checks
// every history against its model, and then the process and the servers:
// goroutines and heap back within bounds, and the only keys left the
// documented persistent ones: fencing counters and fenced resources
// written without TTL, latch keys created without a key TTL, and the deny
// list. Everything with a TTL (leases, claims, results, rate-limit state,
// concurrency leases) must be gone once its TTL and the background
// cleanups are over.
func TestSoak(t *testing.T) {
	d := envDuration(t, "COORD_SOAK", 10*time.Second)
	names := []string{testharness.FirstFlavor(t)}
	if v := envInt(t, "COORD_SOAK_ALL", 1); v > 1 || d >= time.Minute {
		names = slices.DeleteFunc(testharness.BackendNames(), func(n string) bool { return n == "miniredis" })
	}
	g0, h0 := settle(0, 0)
	var total stats
	var left, denials int
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			b := testharness.Get(t, name)
			s, l, dn := soakOn(t, b, d)
			total.add(s)
			left += l
			denials += dn
		})
	}
	g1, h1 := settle(g0+soakGoroutines, h0+soakHeap)
	t.Logf("soak %v on %v: %d histories checked (%d with faults, %d set aside, %d inconclusive), %d operations (%d unknown), %d faults (%d lost replies, %d replaced, %d errors instead, %d delayed, %d cuts, %d kills), %d violations; %d deny-list refusals; goroutines %d -> %d (bound +%d), heap %.1f -> %.1f MiB (bound +%d MiB); %d persistent keys left, nothing else",
		d, names, total.checked, total.faulted, total.setAside, total.timeouts, total.ops, total.unknown, total.faults,
		total.dropped, total.replaced, total.injected, total.delayed, total.cuts, total.kills, total.violations, denials,
		g0, g1, soakGoroutines, float64(h0)/(1<<20), float64(h1)/(1<<20), soakHeap>>20, left)
	if g1 > g0+soakGoroutines {
		buf := make([]byte, 1<<20)
		t.Errorf("goroutines grew from %d to %d during the soak (bound +%d):\n%s", g0, g1, soakGoroutines, buf[:runtime.Stack(buf, true)])
	}
	if h1 > h0+soakHeap {
		t.Errorf("live heap grew from %d to %d bytes during the soak (bound +%d)", h0, h1, soakHeap)
	}
	if total.checked == 0 || total.violations > 0 {
		t.Errorf("%d histories checked, %d violations", total.checked, total.violations)
	}
}

// settle collects garbage until the goroutines and the live heap are
// within the bounds given (or for 10 s) and returns them; with zero
// bounds, it returns them at once.
func settle(goroutines int, heap uint64) (int, uint64) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		g := runtime.NumGoroutine()
		if goroutines == 0 || (g <= goroutines && m.HeapAlloc <= heap) || time.Now().After(deadline) {
			return g, m.HeapAlloc
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// soakOn runs the soak on b: every workload's stream until d has passed,
// plus limiters bound to a deny list, then checks the keys left. It
// returns the streams' figures, the persistent keys left and the deny-list
// refusals seen.
func soakOn(t *testing.T, b *testharness.Backend, d time.Duration) (stats, int, int) {
	until := time.Now().Add(d)
	var mu sync.Mutex
	var total stats
	var wg sync.WaitGroup
	rigs := map[string]*rig{}
	ws := slices.DeleteFunc(workloads(), func(w workload) bool { return w.needs != nil && !w.needs(b) })
	for _, w := range ws {
		r := newRig(t, b, w.name)
		rigs[w.name] = r
		wg.Go(func() {
			s := runStream(t, b, w, 0, until, r)
			mu.Lock()
			total.add(s)
			mu.Unlock()
		})
	}
	// A deny list refuses its identity under faults too: every answer
	// for the denied identity is a refusal (or an error), never a grant.
	deny := newRig(t, b, "deny")
	var denials atomic.Int64
	wg.Go(func() {
		coord := deny.coord()
		list, err := ratelimit.NewDenyList(coord, "list", ratelimit.WithDenyCache(16, 20*time.Millisecond))
		if err != nil {
			t.Error(err)
			return
		}
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err := list.Deny(ctx, "blocked")
			cancel()
			if err == nil {
				break
			}
			if time.Now().After(until) {
				t.Errorf("deny list: %v", err)
				return
			}
		}
		lim, err := ratelimit.New(coord, "limited", ratelimit.GCRA{Burst: 5, Interval: 10 * time.Millisecond},
			ratelimit.WithDenyList(list, "blocked"))
		if err != nil {
			t.Error(err)
			return
		}
		defer lim.Close()
		inj := deny.inject(rngFor(b.Name, "deny"))
		defer inj.end()
		for time.Now().Before(until) {
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			l, err := lim.Allow(ctx, 1)
			cancel()
			switch {
			case err != nil:
			case l.Allowed() || !l.Denied():
				t.Errorf("a denied identity was answered acquired=%v denied=%v", l.Allowed(), l.Denied())
			default:
				denials.Add(1)
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	wg.Wait()
	t.Logf("%s: %d histories checked, %d operations, %d violations", b.Name, total.checked, total.ops, total.violations)

	// Every key with a TTL goes, once its TTL and the background cleanups
	// are over; what stays must be persistent by design.
	persistent := func(what, key string) bool {
		if what == "deny" {
			return key == "list"
		}
		if strings.HasPrefix(key, fencingcore.SharedBase) {
			return true // a shared fence counter hash (issue 24)
		}
		for _, w := range ws {
			if w.name != what || w.keys == nil {
				continue
			}
			hk, _, _ := strings.Cut(key, "}")
			return slices.Contains(w.keys(hk+"}"), key)
		}
		return false
	}
	rigs["deny"] = deny
	var kept int
	var others []string
	deadline := time.Now().Add(15 * time.Second)
	for {
		kept, others = 0, nil
		for what, r := range rigs {
			for _, k := range scan(t, r.raw, r.prefix) {
				key := strings.TrimPrefix(k, r.prefix)
				ttl, err := r.raw.PTTL(context.Background(), k).Result()
				switch {
				case err != nil:
					t.Errorf("PTTL: %v", err)
				case persistent(what, key) && ttl == -1:
					kept++
				case ttl == -2: // gone meanwhile
				default:
					others = append(others, fmt.Sprintf("%s %q (ttl %v)", what, key, ttl))
				}
			}
		}
		if len(others) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(others) > 0 {
		t.Errorf("keys left behind that are not persistent by design: %v", others)
	}
	for _, r := range rigs {
		cleanups := 0
		for _, c := range r.coords {
			if e, err := engine.Of(c); err == nil {
				cleanups += e.Cleanups()
			}
		}
		if cleanups > 0 {
			t.Errorf("%d background cleanups still running", cleanups)
		}
	}
	return total, kept, int(denials.Load())
}

// scan returns the keys under prefix, on every primary of a cluster.
func scan(t *testing.T, c redis.UniversalClient, prefix string) []string {
	var mu sync.Mutex
	var out []string
	each := func(ctx context.Context, c *redis.Client) error {
		it := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for it.Next(ctx) {
			mu.Lock()
			out = append(out, it.Val())
			mu.Unlock()
		}
		return it.Err()
	}
	var err error
	if cc, ok := c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(context.Background(), each)
	} else {
		err = each(context.Background(), c.(*redis.Client))
	}
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Errorf("SCAN: %v", err)
	}
	return out
}
