// Package testharness runs the library's behavioural tests once per backend:
// an embedded miniredis, real Redis 7.0 and 8.0 and Valkey 8.1 and 9.1
// servers, a local 6-node Redis Cluster, and a Sentinel deployment (a
// primary, a replica and three Sentinels, reached through go-redis'
// failover client), all on 127.0.0.1 with free ports. Real servers are
// started on first use by the test binary and stopped by [Main]; tests
// isolate themselves with a unique key prefix per test (never FLUSHDB).
//
// Server binaries come from the environment (REDIS7_SERVER, REDIS7_CLI, ...
// as written by scripts/get-servers.sh to its env.sh), from PATH
// (redis7-server, redis7-cli, ...), or from get-servers.sh's default cache
// folder. A missing server skips its subtests with a message saying how to
// get it; with CI=true it fails them.
//
// COORD_BACKENDS (comma-separated names, e.g. "miniredis,redis7") restricts
// the backends, for quick local runs; it is ignored when CI=true. The
// cluster's flavor is COORD_CLUSTER_FLAVOR (default redis8), the Sentinel
// deployment's COORD_SENTINEL_FLAVOR (default redis8).
package testharness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/engine"
)

// Kind is the kind of a backend.
type Kind int

const (
	// Embedded is miniredis, in the test process.
	Embedded Kind = iota
	// Standalone is one real server process.
	Standalone
	// ClusterKind is a real 6-node Redis Cluster.
	ClusterKind
	// SentinelKind is a real Sentinel deployment (a primary, a replica and
	// three Sentinels), reached through redis.NewFailoverClient.
	SentinelKind
)

// Backend is one place the behavioural tests run.
type Backend struct {
	// Name is "miniredis", a flavor ("redis7", "redis8", "valkey8",
	// "valkey9"), "cluster" or "sentinel".
	Name string
	Kind Kind
	// Flavor is the server build ("redis7", ...; "miniredis" for Embedded).
	Flavor string
	// Mini is the miniredis instance (Embedded only). Its TIME is frozen at
	// the test's start (SetTime) with ClockTTL on, so TTLs and TIME agree;
	// move both with [Backend.Advance].
	Mini *miniredis.Miniredis
	// Server is the shared server process (Standalone only). Do not stop it:
	// tests that need faults start their own with [StartStandalone].
	Server *Server
	// Cluster is the shared cluster (ClusterKind only).
	Cluster *Cluster
	// Sentinel is the shared Sentinel deployment (SentinelKind only). Do
	// not stop, kill, fail over or reconfigure any of its processes: every
	// test of the binary shares it. Its Sentinels never fail the primary
	// over on their own (down-after-milliseconds of [sharedDownAfter]).
	// Tests that fail a deployment over start their own with
	// [StartSentinel].
	Sentinel *Sentinel

	t      testing.TB
	prefix string

	clockMu sync.Mutex
	now     time.Time // miniredis' frozen TIME
}

// IsMini reports whether b is miniredis.
func (b *Backend) IsMini() bool { return b.Kind == Embedded }

// IsCluster reports whether b is the Redis Cluster.
func (b *Backend) IsCluster() bool { return b.Kind == ClusterKind }

// IsSentinel reports whether b is the Sentinel deployment (clients are
// go-redis failover clients; there is no [Backend.Server]).
func (b *Backend) IsSentinel() bool { return b.Kind == SentinelKind }

// HasHashFieldTTL reports whether the server has HPEXPIRE from Lua (Redis
// 7.4+ and Valkey 9+; not Redis 7.0, Valkey 8.1 or miniredis).
func (b *Backend) HasHashFieldTTL() bool { return hasHashFieldTTL(b.Flavor) }

func hasHashFieldTTL(flavor string) bool { return flavor == "redis8" || flavor == "valkey9" }

// flavorOf returns the server build a backend name runs: the name itself,
// or the cluster's or the Sentinel deployment's flavor.
func flavorOf(name string) string {
	switch name {
	case "cluster":
		return ClusterFlavor()
	case "sentinel":
		return SentinelFlavor()
	}
	return name
}

// HasPubSub reports whether PUBLISH from scripts reaches subscribers (true
// everywhere, including miniredis).
func (b *Backend) HasPubSub() bool { return true }

// Prefix returns the test's unique key prefix (no hash tag, so keys spread
// over Cluster slots).
func (b *Backend) Prefix() string { return b.prefix }

// Client returns a new go-redis client for the backend, closed when the
// test ends. Each call gives a separate client: use two to act as two
// processes. modify may adjust the options (go-redis Options for
// standalone and miniredis; for the cluster and the Sentinel deployment,
// the fields shared by ClusterOptions or FailoverOptions are copied from
// it; on the Sentinel deployment a Dialer dials the primary's address, and
// setting Addr fails the test: it has no one address). On the [ACLFlavor] backend it
// connects as the least-privilege user ([Backend.LeastPrivilege]): use
// [Backend.Admin] for anything but the library's own commands on keys
// under [Backend.Prefix].
func (b *Backend) Client(t testing.TB, modify ...func(*redis.Options)) redis.UniversalClient {
	t.Helper()
	if b.LeastPrivilege() {
		modify = append([]func(*redis.Options){func(o *redis.Options) { o.Username, o.Password = ACLUser, ACLPassword }}, modify...)
	}
	return b.client(t, modify...)
}

// LeastPrivilege reports whether [Backend.Client] connects as the
// least-privilege user of docs/acl.md (on the [ACLFlavor] backend).
func (b *Backend) LeastPrivilege() bool { return b.Server != nil && b.Server.aclUser }

// Admin returns a new client for the backend as the default (all-powerful)
// user, closed when the test ends: for inspecting keys, seeding bad state
// and server commands (CONFIG, CLIENT KILL, DEBUG ...). modify is applied
// as by [Backend.Client].
func (b *Backend) Admin(t testing.TB, modify ...func(*redis.Options)) redis.UniversalClient {
	t.Helper()
	return b.client(t, modify...)
}

func (b *Backend) client(t testing.TB, modify ...func(*redis.Options)) redis.UniversalClient {
	t.Helper()
	var c redis.UniversalClient
	switch b.Kind {
	case Embedded:
		o := &redis.Options{Addr: b.Mini.Addr()}
		for _, m := range modify {
			m(o)
		}
		c = redis.NewClient(o)
	case Standalone:
		o := b.Server.Options()
		for _, m := range modify {
			m(o)
		}
		c = redis.NewClient(o)
	case ClusterKind:
		co := b.Cluster.Options()
		if len(modify) > 0 {
			o := &redis.Options{DialTimeout: co.DialTimeout, ReadTimeout: co.ReadTimeout, WriteTimeout: co.WriteTimeout,
				MaxRetries: co.MaxRetries, PoolSize: co.PoolSize, Username: co.Username, Password: co.Password,
				ContextTimeoutEnabled: co.ContextTimeoutEnabled}
			for _, m := range modify {
				m(o)
			}
			co.DialTimeout, co.ReadTimeout, co.WriteTimeout = o.DialTimeout, o.ReadTimeout, o.WriteTimeout
			co.MaxRetries, co.PoolSize, co.Username, co.Password = o.MaxRetries, o.PoolSize, o.Username, o.Password
			co.ContextTimeoutEnabled = o.ContextTimeoutEnabled
		}
		c = redis.NewClusterClient(co)
	case SentinelKind:
		fo := b.failoverOptions(t, modify...)
		fc := redis.NewFailoverClient(fo)
		failoverClients.Store(fc, fo)
		t.Cleanup(func() { failoverClients.Delete(fc) })
		c = fc
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// failoverClients maps the failover clients of the sentinel backend to
// their options (a failover client's Options() has no address of the
// deployment), for [AdminOf].
var failoverClients sync.Map // *redis.Client -> *redis.FailoverOptions

// failoverOptions returns the options of a failover client of the Sentinel
// deployment, with the fields of redis.Options that modify set copied.
func (b *Backend) failoverOptions(t testing.TB, modify ...func(*redis.Options)) *redis.FailoverOptions {
	t.Helper()
	fo := b.Sentinel.FailoverOptions()
	if len(modify) == 0 {
		return fo
	}
	o := &redis.Options{Addr: "sentinel", DialTimeout: fo.DialTimeout, ReadTimeout: fo.ReadTimeout, WriteTimeout: fo.WriteTimeout}
	for _, m := range modify {
		m(o)
	}
	if o.Addr != "sentinel" {
		t.Fatalf("testharness: a client of the sentinel backend has no one address (modify set Addr %q): run the test with StandaloneOnly", o.Addr)
	}
	fo.Dialer, fo.OnConnect, fo.ClientName = o.Dialer, o.OnConnect, o.ClientName
	fo.Protocol, fo.Username, fo.Password, fo.DB = o.Protocol, o.Username, o.Password, o.DB
	fo.MaxRetries, fo.MinRetryBackoff, fo.MaxRetryBackoff = o.MaxRetries, o.MinRetryBackoff, o.MaxRetryBackoff
	fo.DialTimeout, fo.DialerRetries, fo.DialerRetryTimeout = o.DialTimeout, o.DialerRetries, o.DialerRetryTimeout
	fo.ReadTimeout, fo.WriteTimeout, fo.ContextTimeoutEnabled = o.ReadTimeout, o.WriteTimeout, o.ContextTimeoutEnabled
	fo.PoolFIFO, fo.PoolSize, fo.PoolTimeout = o.PoolFIFO, o.PoolSize, o.PoolTimeout
	fo.MinIdleConns, fo.MaxIdleConns, fo.MaxActiveConns = o.MinIdleConns, o.MaxIdleConns, o.MaxActiveConns
	fo.ConnMaxIdleTime, fo.ConnMaxLifetime = o.ConnMaxIdleTime, o.ConnMaxLifetime
	return fo
}

// Coordinator returns a coordinator over a new client (see [Backend.Client])
// with the test's unique key prefix followed by opts. It is shut down when
// the test ends, before its client is closed: its background cleanups get
// their last try then (for at most [ShutdownTimeout]), and nothing of it
// outlives the test.
func (b *Backend) Coordinator(t testing.TB, opts ...coordination.Option) *coordination.Coordinator {
	t.Helper()
	c, err := coordination.New(b.Client(t), append([]coordination.Option{coordination.WithKeyPrefix(b.prefix)}, opts...)...)
	if err != nil {
		t.Fatalf("coordination.New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
		defer cancel()
		if err := c.Shutdown(ctx); err != nil {
			t.Logf("testharness: the test's coordinator: %v", err)
		}
	})
	return c
}

// ShutdownTimeout bounds the Shutdown of a coordinator of
// [Backend.Coordinator] when its test ends.
const ShutdownTimeout = 10 * time.Second

// Advance moves the server's time forward by d. On miniredis it moves TIME
// and TTLs together (SetTime with ClockTTL) and returns at once; on real
// servers it sleeps d.
func (b *Backend) Advance(d time.Duration) {
	if b.Kind == Embedded {
		b.clockMu.Lock()
		b.now = b.now.Add(d)
		b.Mini.SetTime(b.now)
		b.clockMu.Unlock()
		return
	}
	time.Sleep(d)
}

// Now returns the server's notion of now: the frozen miniredis time, or the
// wall clock for real servers.
func (b *Backend) Now() time.Time {
	if b.Kind == Embedded {
		b.clockMu.Lock()
		defer b.clockMu.Unlock()
		return b.now
	}
	return time.Now()
}

// Key returns the full Redis key (with the test's prefix) for key.
func (b *Backend) Key(key string) string { return b.prefix + key }

// Raw returns an admin client ([Backend.Admin]) for direct inspection of
// keys; use [Backend.Key] to name them.
func (b *Backend) Raw(t testing.TB) redis.UniversalClient { return b.Admin(t) }

var (
	mu        sync.Mutex
	shared    = map[string]*Server{}
	failed    = map[string]error{}
	clusterS  *Cluster
	clusterE  error
	sentinelS *Sentinel
	sentinelE error
)

func sharedServer(flavor string) (*Server, error) {
	mu.Lock()
	defer mu.Unlock()
	if s := shared[flavor]; s != nil {
		return s, nil
	}
	if err := failed[flavor]; err != nil {
		return nil, err
	}
	s, err := startServer(flavor, false)
	if err == nil && flavor == ACLFlavor {
		if err = createACLUser(s); err != nil {
			s.close()
		}
	}
	if err != nil {
		failed[flavor] = err
		return nil, err
	}
	s.markShared()
	shared[flavor] = s
	return s, nil
}

// ClusterFlavor is the server build used for the cluster backend.
func ClusterFlavor() string {
	if f := os.Getenv("COORD_CLUSTER_FLAVOR"); f != "" {
		return f
	}
	return "redis8"
}

func sharedCluster() (*Cluster, error) {
	mu.Lock()
	defer mu.Unlock()
	if clusterS != nil || clusterE != nil {
		return clusterS, clusterE
	}
	clusterS, clusterE = startCluster(ClusterFlavor())
	if clusterE != nil {
		// Once more, on new ports: a cluster that did not form on a
		// loaded machine (or a full disk) fails every test of the binary.
		fmt.Fprintf(os.Stderr, "testharness: starting the shared cluster again after: %v\n", clusterE)
		clusterS, clusterE = startCluster(ClusterFlavor())
	}
	if clusterS != nil {
		for _, n := range clusterS.Nodes {
			n.markShared()
		}
	}
	return clusterS, clusterE
}

// SentinelFlavor is the server build used for the sentinel backend
// (COORD_SENTINEL_FLAVOR, default redis8: the newest Redis, whose
// hash-field expiration lets every test run on it, HashFieldTTLOnly ones
// included; its binary also runs the Sentinels).
func SentinelFlavor() string {
	if f := os.Getenv("COORD_SENTINEL_FLAVOR"); f != "" {
		return f
	}
	return "redis8"
}

// sharedDownAfter is the shared Sentinel deployment's
// down-after-milliseconds: longer than any test stalls the primary (DEBUG
// SLEEP, CLIENT PAUSE, a starved machine), so that its Sentinels never fail
// it over under the tests.
const sharedDownAfter = 10 * time.Minute

func sharedSentinel() (*Sentinel, error) {
	mu.Lock()
	defer mu.Unlock()
	if sentinelS != nil || sentinelE != nil {
		return sentinelS, sentinelE
	}
	cfg := SentinelConfig{DownAfter: sharedDownAfter, FailoverTimeout: 2 * sharedDownAfter}
	sentinelS, sentinelE = startSentinel(SentinelFlavor(), cfg)
	var m errMissing
	if sentinelE != nil && !errors.As(sentinelE, &m) {
		// Once more, on new ports: a deployment that did not form on a
		// loaded machine fails every test of the binary.
		fmt.Fprintf(os.Stderr, "testharness: starting the shared Sentinel deployment again after: %v\n", sentinelE)
		sentinelS, sentinelE = startSentinel(SentinelFlavor(), cfg)
	}
	if sentinelS != nil {
		sentinelS.relax()
		sentinelS.Primary.markShared()
		sentinelS.Replica.markShared()
		for _, sn := range sentinelS.Sentinels {
			sn.markShared()
		}
	}
	return sentinelS, sentinelE
}

// BackendNames lists every backend, in the order tests run them.
func BackendNames() []string {
	return append(append([]string{"miniredis"}, Flavors...), "cluster", "sentinel")
}

func enabled(name string) bool {
	if InCI() {
		return true
	}
	v := os.Getenv("COORD_BACKENDS")
	if v == "" {
		return true
	}
	return slices.Contains(strings.Split(v, ","), name)
}

// Options of ForEach.
type Option func(*forEach)

type forEach struct {
	serial       bool
	only         []string
	skip         []string
	hashFieldTTL bool
}

// Serial runs the backends one after another instead of in parallel (for
// latency measurements).
func Serial() Option { return func(f *forEach) { f.serial = true } }

// Only restricts the run to the named backends.
func Only(names ...string) Option { return func(f *forEach) { f.only = names } }

// RealOnly runs only on real servers (standalone and cluster), never
// miniredis.
func RealOnly() Option { return func(f *forEach) { f.skip = append(f.skip, "miniredis") } }

// StandaloneOnly runs on miniredis and the standalone servers, not the
// cluster nor the Sentinel deployment: for a test that needs
// [Backend.Server] (its one address, for a fault proxy in front of it or a
// plain client of its own) or a server of its own to stop.
func StandaloneOnly() Option {
	return func(f *forEach) { f.skip = append(f.skip, "cluster", "sentinel") }
}

// HashFieldTTLOnly runs only on the backends whose server has hash-field
// expiration ([Backend.HasHashFieldTTL]: redis8, valkey9, and the cluster
// and the Sentinel deployment when their flavor has it).
func HashFieldTTLOnly() Option { return func(f *forEach) { f.hashFieldTTL = true } }

// ForEach runs fn as a subtest per backend (named after it), in parallel by
// default. Each subtest gets its own miniredis or a unique key prefix on the
// shared real server.
func ForEach(t *testing.T, fn func(t *testing.T, b *Backend), opts ...Option) {
	t.Helper()
	var f forEach
	for _, o := range opts {
		o(&f)
	}
	for _, name := range BackendNames() {
		if len(f.only) > 0 && !slices.Contains(f.only, name) {
			continue
		}
		if slices.Contains(f.skip, name) || (f.hashFieldTTL && !hasHashFieldTTL(flavorOf(name))) {
			continue
		}
		t.Run(name, func(t *testing.T) {
			if !f.serial {
				t.Parallel()
			}
			b := Get(t, name)
			fn(t, b)
		})
	}
}

// Get returns the backend of that name for t, starting shared servers on
// first use. When the server is missing it skips t (fails it when CI=true).
func Get(t testing.TB, name string) *Backend {
	t.Helper()
	if !enabled(name) {
		t.Skipf("backend %s not in COORD_BACKENDS", name)
	}
	b := &Backend{Name: name, t: t, prefix: uniquePrefix(t)}
	switch name {
	case "miniredis":
		m := miniredis.NewMiniRedis()
		if err := m.Start(); err != nil {
			t.Fatalf("miniredis: %v", err)
		}
		t.Cleanup(m.Close)
		b.now = time.Now()
		m.SetTime(b.now)
		m.ClockTTL(true)
		b.Kind, b.Flavor, b.Mini = Embedded, "miniredis", m
	case "cluster":
		c, err := sharedCluster()
		if err != nil {
			missing(t, "cluster", err)
		}
		b.Kind, b.Flavor, b.Cluster = ClusterKind, c.Flavor, c
	case "sentinel":
		s, err := sharedSentinel()
		if err != nil {
			missing(t, "sentinel", err)
		}
		b.Kind, b.Flavor, b.Sentinel = SentinelKind, s.Flavor, s
	default:
		s, err := sharedServer(name)
		if err != nil {
			missing(t, name, err)
		}
		b.Kind, b.Flavor, b.Server = Standalone, name, s
	}
	return b
}

func missing(t testing.TB, name string, err error) {
	t.Helper()
	if InCI() {
		t.Fatalf("backend %s: %v (CI=true: a missing server is a failure)", name, err)
	}
	t.Skipf("backend %s: %v", name, err)
}

func uniquePrefix(t testing.TB) string {
	var r [4]byte
	_, _ = rand.Read(r[:])
	name := strings.NewReplacer("{", "(", "}", ")", " ", "_").Replace(t.Name())
	if len(name) > 60 {
		name = name[len(name)-60:]
	}
	return "t:" + name + ":" + hex.EncodeToString(r[:]) + ":"
}

// StartStandalone starts a dedicated server of flavor for one test (to stop,
// kill, pause or restart it), stopped when the test ends. A missing binary
// skips the test (fails it when CI=true).
func StartStandalone(t testing.TB, flavor string, extra ...string) *Server {
	t.Helper()
	s, err := startServer(flavor, false, extra...)
	if err != nil {
		missing(t, flavor, err)
	}
	t.Cleanup(s.close)
	return s
}

// StartReplicaPair starts a dedicated primary and a replica of it (both of
// flavor) and waits until the replica's link is up.
func StartReplicaPair(t testing.TB, flavor string) (primary, replica *Server) {
	t.Helper()
	primary = StartStandalone(t, flavor)
	replica = StartStandalone(t, flavor)
	ctx := context.Background()
	c := redis.NewClient(replica.Options())
	defer c.Close()
	if err := c.Do(ctx, "REPLICAOF", "127.0.0.1", primary.Port).Err(); err != nil {
		t.Fatalf("REPLICAOF: %v", err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		info, _ := c.Info(ctx, "replication").Result()
		if strings.Contains(info, "master_link_status:up") {
			return primary, replica
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("replica of %s did not sync", flavor)
	return nil, nil
}

// StartCluster starts a dedicated 6-node cluster for one test (to fail nodes
// over), stopped when the test ends.
func StartCluster(t testing.TB, flavor string) *Cluster {
	t.Helper()
	c, err := startCluster(flavor)
	if err != nil {
		missing(t, "cluster", err)
	}
	t.Cleanup(c.close)
	return c
}

// FirstFlavor returns the first available real server flavor (for tests
// that need one dedicated real server), skipping or failing t when none is.
func FirstFlavor(t testing.TB) string {
	t.Helper()
	if fs := AvailableFlavors(t); len(fs) > 0 {
		return fs[0]
	}
	return ""
}

// AvailableFlavors returns the real server flavors that are installed and
// enabled (COORD_BACKENDS), in [Flavors] order, skipping or failing t when
// there is none (for tests that start several dedicated servers and mix
// flavors).
func AvailableFlavors(t testing.TB) []string {
	t.Helper()
	var out []string
	for _, f := range Flavors {
		if _, _, ok := binaries(f); ok && enabled(f) {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		missing(t, "any real server", fmt.Errorf("%s", howToGet("redis7")))
	}
	return out
}

// Main runs the package's tests, stops the shared servers, and then fails
// the run if goroutines leaked ([FindLeaks]: goleak's check and defaults),
// ignoring goroutines with one of ignoreFuncs on their stack. Call it from
// TestMain: func TestMain(m *testing.M) { testharness.Main(m) }.
func Main(m *testing.M, ignoreFuncs ...string) {
	code := m.Run()
	// Background cleanups (an ambiguous operation's undo, a failed
	// release's retry) outlive the test that started them by design, each
	// bounded by its limit (engine.CleanupLimit at most) and ended by its
	// next try once its client is closed: wait for them, with the shared
	// servers still up, before looking for leaked goroutines.
	waitCleanups()
	mu.Lock()
	for _, s := range shared {
		s.close()
	}
	if clusterS != nil {
		clusterS.close()
	}
	if sentinelS != nil {
		sentinelS.Stop()
	}
	mu.Unlock()
	if code == 0 {
		if err := FindLeaks(ignoreFuncs...); err != nil {
			fmt.Fprintf(os.Stderr, "testharness: goroutines leaked after the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// waitCleanups waits until no engine cleanup runs in the process, for at
// most engine.CleanupLimit and one try's bound more; one that runs longer
// is left for the leak check to report. A wait longer than a second is reported on
// stderr: some test left a cleanup retrying.
func waitCleanups() {
	start := time.Now()
	deadline := start.Add(engine.CleanupLimit + 6*time.Second)
	for engine.RunningCleanups() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if took := time.Since(start); took > time.Second {
		fmt.Fprintf(os.Stderr, "testharness: waited %v for %d background cleanups to end after the tests\n", took.Round(time.Millisecond), engine.RunningCleanups())
	}
}
