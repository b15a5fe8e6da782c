package history

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/faultproxy"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

func TestMain(m *testing.M) { testharness.Main(m) }

// opTimeout bounds every recorded call (the clients have
// ContextTimeoutEnabled): a reply delayed longer makes the call ambiguous.
// It also bounds how long a call can take, which must stay below the
// shortest TTL of a workload (see lincheck.History.Longest).
const opTimeout = 100 * time.Millisecond

// envInt reads a positive integer from the environment, or def.
func envInt(t testing.TB, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// envDuration reads a positive Go duration from the environment, or def.
func envDuration(t testing.TB, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive Go duration", name, v)
	}
	return d
}

// rig is one backend's servers behind fault proxies, for one stream of
// histories: a proxy per server (per node on the Cluster), direct clients
// for CLIENT KILL and cleanup, and clients through the proxies, each
// named so that CLIENT KILL finds their connections.
type rig struct {
	t       testing.TB
	b       *testharness.Backend
	name    string // CLIENT SETNAME of the rig's clients
	prefix  string
	proxies []*faultproxy.Proxy
	direct  []*redis.Client // one per server, not through a proxy
	raw     redis.UniversalClient
	coords  []*coordination.Coordinator

	cuts, kills atomic.Int64
}

var rigs atomic.Int64

// newRig starts proxies in front of b's servers.
func newRig(t testing.TB, b *testharness.Backend, what string) *rig {
	t.Helper()
	r := &rig{t: t, b: b, name: fmt.Sprintf("hist-%d", rigs.Add(1)), prefix: b.Prefix() + what + ":", raw: b.Admin(t)}
	var addrs []string
	switch {
	case b.IsCluster():
		addrs = b.Cluster.Addrs()
	case b.IsSentinel():
		// The shared deployment's primary is never failed over: the proxy
		// stands in front of it, and the failover client dials the proxy
		// for the address the Sentinels give (see client).
		addrs = []string{b.Sentinel.Primary.Addr}
	default:
		addrs = []string{b.Server.Addr}
	}
	for _, a := range addrs {
		r.proxies = append(r.proxies, faultproxy.Start(t, a))
		d := redis.NewClient(&redis.Options{Addr: a, DialTimeout: time.Second})
		t.Cleanup(func() { _ = d.Close() })
		r.direct = append(r.direct, d)
	}
	return r
}

// client returns a new go-redis client through the proxies: re-sends on
// (go-redis' default 3), with short backoffs so that a re-sent call stays
// short, and context deadlines applied to network I/O.
func (r *rig) client() redis.UniversalClient {
	var c redis.UniversalClient
	if r.b.IsCluster() {
		byAddr := map[string]string{}
		for i, d := range r.direct {
			byAddr[d.Options().Addr] = r.proxies[i].Addr()
		}
		c = redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: r.b.Cluster.Addrs(), ClientName: r.name, ContextTimeoutEnabled: true,
			DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
			MinRetryBackoff: time.Millisecond, MaxRetryBackoff: 4 * time.Millisecond, PoolSize: 4,
			Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
				if p, ok := byAddr[addr]; ok {
					addr = p
				}
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			},
		})
	} else if r.b.IsSentinel() {
		primary, proxy := r.direct[0].Options().Addr, r.proxies[0].Addr()
		o := r.b.Sentinel.FailoverOptions()
		o.ClientName, o.ContextTimeoutEnabled = r.name, true
		o.MinRetryBackoff, o.MaxRetryBackoff, o.PoolSize = time.Millisecond, 4*time.Millisecond, 4
		// The Dialer dials the Sentinels too: only the primary's address
		// goes through the proxy.
		o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr == primary {
				addr = proxy
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}
		c = redis.NewFailoverClient(o)
	} else {
		c = redis.NewClient(&redis.Options{
			Addr: r.proxies[0].Addr(), ClientName: r.name, ContextTimeoutEnabled: true,
			DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
			MinRetryBackoff: time.Millisecond, MaxRetryBackoff: 4 * time.Millisecond, PoolSize: 4,
		})
	}
	r.t.Cleanup(func() { _ = c.Close() })
	return c
}

// coord returns a coordinator over a new client through the proxies.
func (r *rig) coord() *coordination.Coordinator {
	c, err := coordination.New(r.client(), coordination.WithKeyPrefix(r.prefix))
	if err != nil {
		r.t.Fatalf("coordination.New: %v", err)
	}
	r.coords = append(r.coords, c)
	return c
}

// rngFor returns a random source for one stream, seeded from the clock
// and the names given.
func rngFor(names ...string) *rand.Rand {
	h := fnv.New64a()
	_, _ = h.Write([]byte(strings.Join(names, "/")))
	return rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), h.Sum64()))
}

// killClients closes, on every server, the connections of the rig's
// clients (CLIENT KILL by id, found by name in CLIENT LIST), and returns
// how many it closed.
func (r *rig) killClients() int {
	ctx := context.Background()
	n := 0
	for _, d := range r.direct {
		list, err := d.ClientList(ctx).Result()
		if err != nil {
			continue
		}
		for _, line := range strings.Split(list, "\n") {
			var id, name string
			for _, f := range strings.Fields(line) {
				if v, ok := strings.CutPrefix(f, "id="); ok {
					id = v
				} else if v, ok := strings.CutPrefix(f, "name="); ok {
					name = v
				}
			}
			if name == r.name && id != "" {
				if d.Do(ctx, "CLIENT", "KILL", "ID", id).Err() == nil {
					n++
				}
			}
		}
	}
	return n
}

// faults is the fault schedule of one history.
type faults struct {
	r       *rig
	applied []*faultproxy.Applied // set by inject, then read by end only
	stop    chan struct{}
	done    sync.WaitGroup
	what    string

	// mu guards rng, forced and resent. It is taken inside the proxies'
	// lock (by the Match of chance and nth), so it is never held while
	// calling a proxy or an Applied.
	mu     sync.Mutex
	rng    *rand.Rand
	forced int
	resent []time.Time // when a command ran whose reply the client did not get (go-redis re-sends it)
}

// chance returns a Match that selects a script call with probability p,
// recording the instant when resend is set (the fault makes go-redis
// re-send a command that ran).
func (f *faults) chance(p float64, resend bool) faultproxy.Match {
	scripts := faultproxy.Scripts()
	return func(c faultproxy.Command) bool {
		if !scripts(c) {
			return false
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.rng.Float64() >= p {
			return false
		}
		if resend {
			f.resent = append(f.resent, time.Now())
		}
		return true
	}
}

// nth returns a Match that selects the k-th script call (from 1), once,
// recording the instant when resend is set.
func (f *faults) nth(k int, resend bool) faultproxy.Match {
	scripts := faultproxy.Scripts()
	seen := 0
	return func(c faultproxy.Command) bool {
		if !scripts(c) {
			return false
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if seen++; seen != k {
			return false
		}
		if resend {
			f.resent = append(f.resent, time.Now())
		}
		return true
	}
}

// inject starts a history's faults: on every proxy, random faults on
// scripts (lost replies that go-redis re-sends, LOADING after a command
// ran, which go-redis re-sends too, or instead of it, delayed replies, some
// longer than opTimeout); and one forced fault: a lost reply, an error
// after the command ran, a reply delayed past opTimeout, a cut of every
// connection, or CLIENT KILL of the rig's connections, at a random point
// of the history.
func (r *rig) inject(rng *rand.Rand) *faults {
	f := &faults{r: r, stop: make(chan struct{}), rng: rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))}
	delay := []time.Duration{20 * time.Millisecond, 60 * time.Millisecond, opTimeout + 50*time.Millisecond}[rng.IntN(3)]
	for _, p := range r.proxies {
		f.applied = append(f.applied,
			p.Apply(faultproxy.DropReply(f.chance(0.03, true), faultproxy.Forever)),
			p.Apply(faultproxy.ErrorReply(f.chance(0.03, true), faultproxy.Loading, true, faultproxy.Forever)),
			p.Apply(faultproxy.ErrorReply(f.chance(0.02, false), faultproxy.Loading, false, faultproxy.Forever)),
			p.Apply(faultproxy.DelayReply(f.chance(0.03, false), delay, faultproxy.Forever)))
	}
	k := 2 + rng.IntN(8)
	switch forced := rng.IntN(5); forced {
	case 0, 1, 2:
		f.what = []string{"drop", "error-after", "delay"}[forced]
		for _, p := range r.proxies {
			m := f.nth(k, forced < 2)
			f.applied = append(f.applied, p.Apply([]faultproxy.Rule{
				faultproxy.DropReply(m, 1),
				faultproxy.ErrorReply(m, faultproxy.Loading, true, 1),
				faultproxy.DelayReply(m, opTimeout+50*time.Millisecond, 1),
			}[forced]))
		}
	default:
		f.what = []string{"cut", "kill"}[forced-3]
		wait := time.Duration(10+rng.IntN(150)) * time.Millisecond
		f.done.Go(func() {
			select {
			case <-f.stop:
				return
			case <-time.After(wait):
			}
			f.mu.Lock()
			f.resent = append(f.resent, time.Now())
			f.mu.Unlock()
			if forced == 3 {
				for _, p := range r.proxies {
					p.CutAll(faultproxy.RST)
				}
				r.cuts.Add(1)
			} else {
				r.killClients()
				r.kills.Add(1)
			}
			f.mu.Lock()
			f.forced++
			f.resent = append(f.resent, time.Now())
			f.mu.Unlock()
		})
	}
	return f
}

// end stops the faults and returns how many were injected, and the
// instants at which a command may have run without its client getting the
// reply (lost replies, errors after the command, cuts, kills).
func (f *faults) end() (int, []time.Time) {
	close(f.stop)
	f.done.Wait()
	// Remove and Fired take the proxy's lock, under which the proxy calls
	// the rules' Match (chance, nth), which take f.mu: so call them without
	// f.mu, or the two locks are taken in both orders and a command matched
	// meanwhile deadlocks end. Once Remove has returned, no Match of that
	// rule runs any more, so Fired is final and f.resent complete.
	n := 0
	for _, a := range f.applied {
		a.Remove()
		n += a.Fired()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return n + f.forced, f.resent
}
