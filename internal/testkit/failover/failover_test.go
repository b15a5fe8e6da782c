package failover_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/fencing"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/leader"
	"github.com/coordkit/coordination/lock"
	"github.com/coordkit/coordination/ratelimit"
	"github.com/coordkit/coordination/semaphore"
)

// go-redis keeps re-dialing a dead server in the background for a second
// after its client is closed (pool.tryDial): not ours, and bounded. Its
// log lines about the dead servers (failed dials, new Sentinel masters)
// are dropped.
func TestMain(m *testing.M) {
	testharness.DropGoRedisLogs()
	testharness.Main(m, "github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial")
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

// runs is how many failovers each lost-write case measures:
// COORD_FAILOVER_RUNS, 1 by default (the bounded pass of make test).
func runs(t testing.TB) int {
	if v := os.Getenv("COORD_FAILOVER_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("COORD_FAILOVER_RUNS=%q: want a positive integer", v)
		}
		return n
	}
	return 1
}

// The state the failover must keep, taken before it (all keys in one slot).
type before struct {
	lk      *lock.Lock
	fl      *fencing.Lock
	token   int64
	sem     *semaphore.Semaphore
	permit  *semaphore.Permit
	lim     *ratelimit.Limiter
	elected chan *leader.Term
	term    *leader.Term
	stop    func()
}

const (
	lockKey  = "{fo}:lock"
	leaseKey = "{fo}:fencing"
	fenceKey = "{fo}:fence"
	semKey   = "{fo}:sem"
	rlKey    = "{fo}:rl"
	elLease  = "{fo}:leader"
	elFence  = "{fo}:leader-fence"
)

// take acquires a lock, a fencing lock, one permit of two, 3 of 5 permits
// of a fixed window, and elects a leader with a lease that outlasts the
// failover.
func take(t *testing.T, coord *coordination.Coordinator) *before {
	ctx := context.Background()
	b := &before{elected: make(chan *leader.Term, 8)}
	b.lk = must(lockTryAcquire(ctx, coord, lockKey, time.Minute))(t)
	b.fl = must(must(fencing.New(coord, leaseKey, fenceKey))(t).TryAcquire(ctx, time.Minute))(t)
	b.token = b.fl.FencingToken()
	b.sem = must(semaphore.New(coord, semKey, 2))(t)
	b.permit = must(b.sem.TryAcquire(ctx, time.Minute))(t)
	b.lim = must(ratelimit.New(coord, rlKey, ratelimit.FixedWindow{Limit: 5, Window: time.Minute}))(t)
	t.Cleanup(func() { _ = b.lim.Close() })
	if l := must(b.lim.Allow(ctx, 3))(t); !l.Allowed() {
		t.Fatal("the limiter refused 3 of 5 permits")
	}
	el := must(leader.New(coord, elLease, elFence, "a", leader.WithLeaseDuration(20*time.Second),
		leader.WithRetryDelay(100*time.Millisecond),
		leader.OnElected(func(ctx context.Context, term *leader.Term) error {
			b.elected <- term
			<-ctx.Done()
			return nil
		})))(t)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = el.Run(runCtx) }()
	b.stop = func() { cancel(); <-done }
	t.Cleanup(b.stop)
	select {
	case b.term = <-b.elected:
	case <-time.After(10 * time.Second):
		t.Fatal("no leader elected")
	}
	return b
}

// check asserts what the package docs name for a failover that kept the
// replicated writes: the lock is still held (others are refused, the
// holder renews and releases it), the fencing counter moved on (the next
// token is the old one plus one), the permit is still counted, the
// limiter's consumption is kept, and the leader kept its term (its lease
// outlasted the failover).
func (b *before) check(t *testing.T, coord *coordination.Coordinator) {
	ctx := context.Background()
	if _, err := lockTryAcquire(ctx, coord, lockKey, time.Minute); !errors.Is(err, coordination.ErrNotAcquired) {
		t.Errorf("lock after the failover: a second holder (%v)", err)
	}
	if ok, err := b.lk.Refresh(ctx, time.Minute); !ok || err != nil {
		t.Errorf("the holder's Refresh after the failover = %v, %v", ok, err)
	}
	if out, err := b.lk.Release(ctx); out != coordination.Released || err != nil {
		t.Errorf("the holder's Release after the failover = %v, %v", out, err)
	}
	if out, err := b.fl.Release(ctx); out != coordination.Released || err != nil {
		t.Errorf("fencing Release after the failover = %v, %v", out, err)
	}
	fl := must(must(fencing.New(coord, leaseKey, fenceKey))(t).TryAcquire(ctx, time.Minute))(t)
	if fl.FencingToken() != b.token+1 {
		t.Errorf("fencing token after the failover = %d, want %d", fl.FencingToken(), b.token+1)
	}
	_, _ = fl.Release(ctx)
	p := must(b.sem.TryAcquire(ctx, time.Minute))(t) // the second of two
	if _, err := b.sem.TryAcquire(ctx, time.Minute); !errors.Is(err, coordination.ErrNotAcquired) {
		t.Errorf("semaphore after the failover: a third permit of two (%v)", err)
	}
	for _, q := range []*semaphore.Permit{p, b.permit} {
		if out, err := q.Release(ctx); out != coordination.Released || err != nil {
			t.Errorf("permit Release after the failover = %v, %v", out, err)
		}
	}
	if l := must(b.lim.Allow(ctx, 3))(t); l.Allowed() {
		t.Error("the limiter granted 3 more of 5 after the failover: the consumption was forgotten")
	}
	if l := must(b.lim.Allow(ctx, 2))(t); !l.Allowed() {
		t.Error("the limiter refused the 2 permits left after the failover")
	}
	select {
	case <-b.term.Context().Done():
		t.Errorf("the leader's term ended in the failover (its lease outlasts it): %v", context.Cause(b.term.Context()))
	default:
	}
	info := must(leader.Get(ctx, coord, elLease))(t)
	if info.Identity != "a" || info.FencingToken != b.term.FencingToken() {
		t.Errorf("leader after the failover %+v, want a with token %d", info, b.term.FencingToken())
	}
	b.stop()
	// A new election continues the term tokens.
	el := must(leader.New(coord, elLease, elFence, "b", leader.WithLeaseDuration(2*time.Second),
		leader.OnElected(func(ctx context.Context, term *leader.Term) error {
			b.elected <- term
			return errElected // ends Run
		})))(t)
	ctx2, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := el.Run(ctx2); !errors.Is(err, errElected) {
		t.Errorf("Run = %v, want the callback's error", err)
	}
	select {
	case term := <-b.elected:
		if term.FencingToken() != b.term.FencingToken()+1 {
			t.Errorf("next term token %d, want %d", term.FencingToken(), b.term.FencingToken()+1)
		}
	default:
		t.Error("no new leader after the failover")
	}
}

// replicated waits until the replica has every write of the primary (so
// that the failover under test loses nothing; lost writes are measured in
// TestLostWrites*).
func replicated(t *testing.T, primary, replica *redis.Client) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p := infoInt(ctx, primary, "master_repl_offset")
		r := infoInt(ctx, replica, "master_repl_offset")
		if p > 0 && r >= p {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica at offset %d, primary at %d", r, p)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func infoInt(ctx context.Context, c *redis.Client, field string) int64 {
	n, err := testharness.InfoInt(ctx, c, "replication", field)
	if err != nil {
		return -1
	}
	return n
}

// firstSuccess retries a lock acquisition on a fresh key until one succeeds
// and returns when it did.
func firstSuccess(t *testing.T, coord *coordination.Coordinator, limit time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(limit)
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		l, err := lockTryAcquire(ctx, coord, fmt.Sprintf("{fo}:probe:%d", i), time.Minute)
		cancel()
		if err == nil {
			_, _ = l.Release(context.Background())
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("no operation succeeded within %v of the failover: %v", limit, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Sentinel: the primary dies (SIGKILL); the Sentinels promote the replica;
// go-redis' failover client follows; everything replicated before is kept.
func TestSentinelFailover(t *testing.T) {
	t.Parallel()
	for _, flavor := range testharness.AvailableFlavors(t) {
		t.Run(flavor, func(t *testing.T) {
			t.Parallel()
			sn := testharness.StartSentinel(t, flavor, testharness.SentinelConfig{})
			client := redis.NewFailoverClient(sn.FailoverOptions())
			t.Cleanup(func() { _ = client.Close() })
			coord := must(coordination.New(client))(t)
			b := take(t, coord)
			admin := redis.NewClient(sn.Primary.Options())
			t.Cleanup(func() { _ = admin.Close() })
			replica := redis.NewClient(sn.Replica.Options())
			t.Cleanup(func() { _ = replica.Close() })
			replicated(t, admin, replica)

			killed := time.Now()
			sn.Primary.Kill()
			promoted := sn.WaitPromoted(t, sn.Replica.Addr, 60*time.Second)
			ok := firstSuccess(t, coord, 30*time.Second)
			t.Logf("%s: Sentinel promoted the replica %v after the kill; first acquisition through the failover client %v after the kill",
				flavor, promoted.Round(time.Millisecond), ok.Sub(killed).Round(time.Millisecond))
			b.check(t, coord)
		})
	}
}

// Cluster: the primary of the slot dies (SIGKILL); the cluster promotes its
// replica; go-redis' cluster client follows; everything replicated before
// is kept.
func TestClusterFailover(t *testing.T) {
	t.Parallel()
	c := testharness.StartCluster(t, testharness.ClusterFlavor())
	client := redis.NewClusterClient(c.Options())
	t.Cleanup(func() { _ = client.Close() })
	coord := must(coordination.New(client))(t)
	b := take(t, coord)
	ctx := context.Background()
	primary := must(client.MasterForKey(ctx, lockKey))(t)
	victim := node(t, c, primary.Options().Addr)
	replicaAddr := replicaOf(t, c, victim)
	replica := redis.NewClient(&redis.Options{Addr: replicaAddr})
	t.Cleanup(func() { _ = replica.Close() })
	replicated(t, primary, replica)

	killed := time.Now()
	victim.Kill()
	promoted := waitSlotMoved(t, c, victim.Addr, lockKey, 60*time.Second)
	ok := firstSuccess(t, coord, 30*time.Second)
	t.Logf("cluster (%s): the replica was promoted %v after the kill; first acquisition through the cluster client %v after the kill",
		c.Flavor, promoted.Round(time.Millisecond), ok.Sub(killed).Round(time.Millisecond))
	b.check(t, coord)
}

func node(t *testing.T, c *testharness.Cluster, addr string) *testharness.Server {
	t.Helper()
	for _, n := range c.Nodes {
		if n.Addr == addr {
			return n
		}
	}
	t.Fatalf("no node at %s", addr)
	return nil
}

// replicaOf returns the address of the replica of the primary n.
func replicaOf(t *testing.T, c *testharness.Cluster, n *testharness.Server) string {
	t.Helper()
	cl := redis.NewClient(&redis.Options{Addr: n.Addr})
	defer cl.Close()
	ctx := context.Background()
	id := must(cl.Do(ctx, "CLUSTER", "MYID").Text())(t)
	nodes := must(cl.ClusterNodes(ctx).Result())(t)
	for _, line := range strings.Split(strings.TrimSpace(nodes), "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && strings.Contains(f[2], "slave") && f[3] == id {
			addr, _, _ := strings.Cut(f[1], "@")
			return addr
		}
	}
	t.Fatalf("no replica of %s in %s", n.Addr, nodes)
	return ""
}

// waitSlotMoved waits until every surviving node reports cluster_state:ok
// and a primary other than dead for key's slot, and returns how long it
// took.
func waitSlotMoved(t *testing.T, c *testharness.Cluster, dead, key string, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	ctx := context.Background()
	for {
		why := ""
		for _, n := range c.Nodes {
			if n.Addr == dead {
				continue
			}
			cl := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
			info, err := cl.ClusterInfo(ctx).Result()
			var owner string
			if err == nil {
				owner, err = slotOwner(ctx, cl, key)
			}
			_ = cl.Close()
			switch {
			case err != nil:
				why = err.Error()
			case !strings.Contains(info, "cluster_state:ok"):
				why = n.Addr + ": cluster_state not ok"
			case owner == dead || owner == "":
				why = n.Addr + ": slot still at " + owner
			}
			if why != "" {
				break
			}
		}
		if why == "" {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			t.Fatalf("the slot of %s did not move off %s within %v: %s", key, dead, limit, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func slotOwner(ctx context.Context, cl *redis.Client, key string) (string, error) {
	slot, err := cl.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		return "", err
	}
	slots, err := cl.ClusterSlots(ctx).Result()
	if err != nil {
		return "", err
	}
	for _, s := range slots {
		if int64(s.Start) <= slot && slot <= int64(s.End) && len(s.Nodes) > 0 {
			return s.Nodes[0].Addr, nil
		}
	}
	return "", nil
}

var errElected = errors.New("elected")

// lockTryAcquire is lock.New(coord, key) then TryAcquire(ctx, ttl).
func lockTryAcquire(ctx context.Context, coord *coordination.Coordinator, key string, ttl time.Duration) (*lock.Lock, error) {
	m, err := lock.New(coord, key)
	if err != nil {
		return nil, err
	}
	return m.TryAcquire(ctx, ttl)
}
