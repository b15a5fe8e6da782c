package failover_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/faultproxy"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// lostRun is one failover under a stream of lock acquisitions.
type lostRun struct {
	acked   int           // acquisitions acknowledged before the crash
	second  int           // of those, keys another client could take after the failover
	recover time.Duration // from the crash to the first acquisition on the new primary
	lag     int64         // bytes of the replication stream the replica had not applied just before the crash
	most    int           // the most second holders of one failover (totals)
}

// The replication stream is delayed by lag (a fault proxy on the replica's
// link; a slow or distant replica). Writers acquire locks on fresh keys
// through the failover client; then the primary's host "crashes": the
// process is killed and what was in flight on its replication link is lost
// (the proxy's connections are reset). After the Sentinels promote the
// replica, a second client tries every key whose acquisition was
// acknowledged: each one it gets is a second holder (the first still
// believes it holds the lock).
func sentinelLostWrites(t *testing.T, flavor string, lag time.Duration, acks bool) lostRun {
	var px *faultproxy.Proxy
	cfg := testharness.SentinelConfig{FailoverTimeout: 10 * time.Second}
	if lag > 0 {
		cfg.ReplicaLink = func(p *testharness.Server) string {
			px = faultproxy.Start(t, p.Addr)
			px.Latency(faultproxy.ToClient, lag, 0)
			return px.Addr()
		}
	}
	sn := testharness.StartSentinel(t, flavor, cfg)
	var opts []coordination.Option
	if acks {
		opts = append(opts, coordination.WithReplicaAcks(1, time.Second))
	}
	client := redis.NewFailoverClient(sn.FailoverOptions())
	t.Cleanup(func() { _ = client.Close() })
	coord := must(coordination.New(client, opts...))(t)
	checkClient := redis.NewFailoverClient(sn.FailoverOptions())
	t.Cleanup(func() { _ = checkClient.Close() })
	checker := must(coordination.New(checkClient))(t)

	primary := redis.NewClient(sn.Primary.Options())
	t.Cleanup(func() { _ = primary.Close() })
	replica := redis.NewClient(sn.Replica.Options())
	t.Cleanup(func() { _ = replica.Close() })
	replLag := func() int64 {
		n := infoInt(context.Background(), primary, "master_repl_offset") - infoInt(context.Background(), replica, "master_repl_offset")
		if px == nil && n > 100_000 {
			// Far behind on loopback: say where the replica replicates
			// from and how its link is.
			info, err := replica.Info(context.Background(), "replication").Result()
			t.Logf("replica %s is %d bytes behind the primary %s: %v %q", sn.Replica.Addr, n, sn.Primary.Addr, err, info)
		}
		return n
	}
	crash := func() {
		if px != nil {
			px.CutAll(faultproxy.RST)
		}
		sn.Primary.Kill()
	}
	promoted := func() { sn.WaitPromoted(t, sn.Replica.Addr, 60*time.Second) }
	return measure(t, coord, checker, func(w, i int) string { return fmt.Sprintf("lw:%d:%d", w, i) }, replLag, crash, promoted)
}

// measure runs 8 writers acquiring locks on fresh keys (key(writer, i))
// through coord for 400 ms, then takes the replication lag and crashes the
// primary, waits for promoted and the first acquisition through checker,
// and counts the acknowledged keys checker can take: the second holders.
func measure(t *testing.T, coord, checker *coordination.Coordinator, key func(w, i int) string, lag func() int64, crash func(), promoted func()) lostRun {
	var (
		mu      sync.Mutex
		acked   []string
		crashed bool
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := key(w, i)
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err := lockTryAcquire(ctx, coord, k, time.Minute)
				cancel()
				mu.Lock()
				if err == nil && !crashed {
					acked = append(acked, k)
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(5 * time.Millisecond)
				}
			}
		}()
	}
	time.Sleep(400 * time.Millisecond)
	// The lag is taken just before the crash, not between the last counted
	// acknowledgement and the kill: on a loaded machine those INFO calls
	// can take longer than the replication delay, and the acquisitions
	// counted would all be replicated by the time the primary dies.
	behind := lag()
	// The crash: no acknowledgement of the old primary counts after this
	// instant (it is dead; with a delayed link, the link is cut first).
	mu.Lock()
	crashed = true
	crash()
	mu.Unlock()
	at := time.Now()
	promoted()
	ok := firstSuccess(t, checker, 30*time.Second)
	close(stop)
	wg.Wait()
	// Operations that failed in the crash were ambiguous: their cleanups
	// finish once the new primary answers. Shutdown gives them their last
	// chance at once and returns when they are done.
	sctx, cancel := context.WithTimeout(context.Background(), 70*time.Second)
	err := coord.Shutdown(sctx)
	cancel()
	if err != nil {
		t.Fatalf("background cleanups still running 70 s after the failover: %v", err)
	}

	r := lostRun{acked: len(acked), recover: ok.Sub(at), lag: behind}
	for _, k := range acked {
		l, err := lockTryAcquire(context.Background(), checker, k, time.Minute)
		switch {
		case err == nil:
			r.second++
			_, _ = l.Release(context.Background())
		case !errors.Is(err, coordination.ErrNotAcquired):
			t.Fatalf("checking %s: %v", k, err)
		}
	}
	return r
}

// Second holders after a Sentinel failover that loses recent writes, with
// and without WithReplicaAcks(1, 1s). With acknowledgements no
// acknowledged acquisition is lost; without them, the acquisitions of the
// last replication lag are. COORD_FAILOVER_RUNS repeats each case.
func TestLostWritesSentinel(t *testing.T) {
	t.Parallel()
	flavor := testharness.FirstFlavor(t)
	n := runs(t)
	for _, c := range []struct {
		name string
		lag  time.Duration
		acks bool
	}{
		{"lag 50ms, no acks", 50 * time.Millisecond, false},
		{"lag 50ms, WithReplicaAcks", 50 * time.Millisecond, true},
		{"loopback, no acks", 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			total, lost := repeat(t, flavor+", "+c.name, n, func(t *testing.T) lostRun { return sentinelLostWrites(t, flavor, c.lag, c.acks) })
			switch {
			case c.acks && total.second != 0:
				t.Errorf("%d acquisitions acknowledged by a replica were lost in the failover", total.second)
			case !c.acks && c.lag > 0 && lost != n:
				t.Errorf("only %d of %d failovers lost the last 50 ms of acquisitions", lost, n)
			}
		})
	}
}

// repeat runs one measurement n times, logs the totals and returns them
// with the number of failovers that lost an acknowledged acquisition. Each
// run is a subtest, so that its deployment is stopped before the next one
// starts: a Sentinel or Cluster node left running after its failover keeps
// the killed primary's address, and reconfigures (REPLICAOF, gossip)
// whatever server a later run starts on that port.
func repeat(t *testing.T, what string, n int, run func(t *testing.T) lostRun) (total lostRun, lost int) {
	t.Helper()
	for i := range n {
		var r lostRun
		if !t.Run(fmt.Sprintf("failover %d", i+1), func(t *testing.T) {
			r = run(t)
			t.Logf("%d acknowledged, %d second holders, lag before the crash %d bytes, recovery %v",
				r.acked, r.second, r.lag, r.recover.Round(time.Millisecond))
		}) {
			t.FailNow()
		}
		total.acked += r.acked
		total.second += r.second
		total.recover += r.recover
		total.lag = max(total.lag, r.lag)
		total.most = max(total.most, r.second)
		if r.second > 0 {
			lost++
		}
	}
	t.Logf("%s: %d failovers, %d acknowledged acquisitions, %d second holders (%.2f%%) in %d of %d failovers (at most %d in one); "+
		"replication lag before the crash at most %d bytes; mean recovery %v",
		what, n, total.acked, total.second, 100*float64(total.second)/float64(max(total.acked, 1)), lost, n, total.most,
		total.lag, (total.recover / time.Duration(n)).Round(time.Millisecond))
	if total.acked == 0 {
		t.Fatal("no acquisition was acknowledged before the crash")
	}
	return total, lost
}

// Second holders after a Cluster failover (a primary killed, its replica
// promoted), on loopback, with and without WithReplicaAcks(1, 1s): on one
// cluster, the first case kills the primary of one slot, the second the
// primary of a slot on another shard.
func TestLostWritesCluster(t *testing.T) {
	t.Parallel()
	n := runs(t)
	for _, acks := range []bool{false, true} {
		name := "loopback, no acks"
		if acks {
			name = "loopback, WithReplicaAcks"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			total, _ := repeat(t, "cluster "+testharness.ClusterFlavor()+", "+name, n, func(t *testing.T) lostRun { return clusterLostWrites(t, acks) })
			if acks && total.second != 0 {
				t.Errorf("%d acquisitions acknowledged by a replica were lost in the failover", total.second)
			}
		})
	}
}

func clusterLostWrites(t *testing.T, acks bool) lostRun {
	c := testharness.StartCluster(t, testharness.ClusterFlavor())
	var opts []coordination.Option
	if acks {
		opts = append(opts, coordination.WithReplicaAcks(1, time.Second))
	}
	client := redis.NewClusterClient(c.Options())
	t.Cleanup(func() { _ = client.Close() })
	coord := must(coordination.New(client, opts...))(t)
	checkClient := redis.NewClusterClient(c.Options())
	t.Cleanup(func() { _ = checkClient.Close() })
	checker := must(coordination.New(checkClient))(t)
	primary := must(client.MasterForKey(context.Background(), "{lw}"))(t)
	victim := node(t, c, primary.Options().Addr)
	replica := redis.NewClient(&redis.Options{Addr: replicaOf(t, c, victim)})
	t.Cleanup(func() { _ = replica.Close() })
	replLag := func() int64 {
		return infoInt(context.Background(), primary, "master_repl_offset") - infoInt(context.Background(), replica, "master_repl_offset")
	}
	promoted := func() { waitSlotMoved(t, c, victim.Addr, "{lw}", 60*time.Second) }
	return measure(t, coord, checker, func(w, i int) string { return fmt.Sprintf("{lw}:%d:%d", w, i) }, replLag, victim.Kill, promoted)
}
