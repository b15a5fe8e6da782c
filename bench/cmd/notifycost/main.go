// Command notifycost measures what a release notification costs a Redis
// Cluster, by cluster size: the cluster-bus messages every node sends for
// it (CLUSTER INFO cluster_stats_messages_publish_sent and
// cluster_stats_messages_publishshard_sent, summed over the nodes) and the
// servers' CPU time (INFO used_cpu_sys + used_cpu_user, summed), per
// release that woke a waiter.
//
// For each size it starts a cluster (-primaries, each with -replicas
// replicas), then runs -n releases through the library, as a user would:
// a holder takes a lock (package lock) on one of 64 keys spread over the
// slots, a second coordinator's blocking Acquire finds it held and waits,
// the holder releases (lock_release notifies the waiter), the waiter wakes,
// acquires and releases (no waiter: no notification). Each size is run in
// two modes:
//
//   - sharded: the library as it is (SPUBLISH on the key's shard channel,
//     SSUBSCRIBE on the primary that owns the key's slot);
//
//   - classic: the same, as a user whose ACL lacks +spublish, so the
//     scripts PUBLISH and the waiters SUBSCRIBE on "coordination:" + the key:
//     what every release did before sharded notifications (the channel and
//     commands of the earlier scripts).
//
//     . ~/.cache/redis-servers/env.sh
//     cd bench && go run ./cmd/notifycost                    # 3, 6 and 9 primaries, 1 replica each
//     cd bench && go run ./cmd/notifycost -primaries 3 -n 2000 -flavor valkey9
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/lock"
)

func main() {
	flavor := flag.String("flavor", "redis8", "server build (testharness flavor: redis7, redis8, valkey8, valkey9)")
	sizes := flag.String("primaries", "3,6,9", "cluster sizes to measure, in primaries")
	replicas := flag.Int("replicas", 1, "replicas of each primary")
	n := flag.Int("n", 500, "notifying releases per size and mode")
	flag.Parse()

	fmt.Printf("flavor %s, %d replica(s) per primary, %d notifying releases per row\n\n", *flavor, *replicas, *n)
	fmt.Println("| primaries | nodes | mode | bus messages / release | publish / publishshard sent | server CPU µs / release | waiter wake p50 |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, s := range strings.Split(*sizes, ",") {
		p, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			fail(err)
		}
		c, err := testharness.NewCluster(*flavor, p, *replicas)
		if err != nil {
			fail(err)
		}
		for _, mode := range []string{"classic", "sharded"} {
			r, err := run(c, mode, *n)
			if err != nil {
				c.Close()
				fail(err)
			}
			fmt.Printf("| %d | %d | %s | %.2f | %d / %d | %.0f | %v |\n", p, len(c.Nodes), mode,
				float64(r.publish+r.publishShard)/float64(*n), r.publish, r.publishShard,
				r.cpu.Seconds()*1e6/float64(*n), r.wake.Round(10*time.Microsecond))
		}
		c.Close()
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "notifycost:", err)
	os.Exit(1)
}

type result struct {
	publish, publishShard int64
	cpu                   time.Duration
	wake                  time.Duration
}

const password = "notifycost"

func run(c *testharness.Cluster, mode string, n int) (result, error) {
	ctx := context.Background()
	opts := c.Options()
	opts.ReadTimeout, opts.WriteTimeout = 5*time.Second, 5*time.Second
	if mode == "classic" {
		// A user without SPUBLISH: the scripts fall back to PUBLISH and the
		// hub to SUBSCRIBE, as before sharded notifications.
		for _, node := range c.Nodes {
			cl := redis.NewClient(&redis.Options{Addr: node.Addr})
			err := cl.Do(ctx, "ACL", "SETUSER", "classic", "on", ">"+password, "~*", "&*", "+@all", "-spublish").Err()
			_ = cl.Close()
			if err != nil {
				return result{}, err
			}
		}
		opts.Username, opts.Password = "classic", password
	}
	prefix := fmt.Sprintf("notifycost:%s:%d:", mode, time.Now().UnixNano())
	holderClient, waiterClient := redis.NewClusterClient(opts), redis.NewClusterClient(opts)
	defer holderClient.Close()
	defer waiterClient.Close()
	holderCoord, err := coordination.New(holderClient, coordination.WithKeyPrefix(prefix))
	if err != nil {
		return result{}, err
	}
	defer holderCoord.Shutdown(ctx)
	waiterCoord, err := coordination.New(waiterClient, coordination.WithKeyPrefix(prefix))
	if err != nil {
		return result{}, err
	}
	defer waiterCoord.Shutdown(ctx)

	const keys = 64
	holders, waiters := make([]*lock.Mutex, keys), make([]*lock.Mutex, keys)
	for i := range keys {
		k := "key-" + strconv.Itoa(i)
		if holders[i], err = lock.New(holderCoord, k); err != nil {
			return result{}, err
		}
		if waiters[i], err = lock.New(waiterCoord, k); err != nil {
			return result{}, err
		}
	}
	admin := redis.NewClusterClient(c.Options())
	defer admin.Close()
	// A warm-up round (scripts loaded, connections and subscriptions open).
	if _, err := cycle(ctx, admin, prefix, holders[0], waiters[0]); err != nil {
		return result{}, err
	}
	before, err := snapshot(ctx, c)
	if err != nil {
		return result{}, err
	}
	wakes := make([]time.Duration, 0, n)
	for i := range n {
		d, err := cycle(ctx, admin, prefix, holders[i%keys], waiters[i%keys])
		if err != nil {
			return result{}, err
		}
		wakes = append(wakes, d)
	}
	after, err := snapshot(ctx, c)
	if err != nil {
		return result{}, err
	}
	slices.Sort(wakes)
	return result{
		publish:      after.publish - before.publish,
		publishShard: after.publishShard - before.publishShard,
		cpu:          after.cpu - before.cpu,
		wake:         wakes[len(wakes)/2],
	}, nil
}

// cycle runs one notifying release on m's key and returns how long the
// waiter took to acquire after the release was sent.
func cycle(ctx context.Context, admin *redis.ClusterClient, prefix string, holder, waiter *lock.Mutex) (time.Duration, error) {
	l, err := holder.TryAcquire(ctx, time.Minute)
	if err != nil {
		return 0, err
	}
	type got struct {
		l   *lock.Lock
		at  time.Time
		err error
	}
	ch := make(chan got, 1)
	go func() {
		wl, err := waiter.Acquire(ctx, time.Minute)
		ch <- got{wl, time.Now(), err}
	}()
	// Wait until the waiter found the lock held (the value's '+' mark) and
	// had time to subscribe, so that the release notifies it.
	key := prefix + waiter.Key()
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, err := admin.Get(ctx, key).Result()
		if err != nil {
			return 0, err
		}
		if strings.HasSuffix(v, "+") {
			break
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("the waiter did not find %q held within 10 s", key)
		}
		time.Sleep(200 * time.Microsecond)
	}
	time.Sleep(5 * time.Millisecond)
	t0 := time.Now()
	if _, err := l.Release(ctx); err != nil {
		return 0, err
	}
	r := <-ch
	if r.err != nil {
		return 0, r.err
	}
	_, err = r.l.Release(ctx)
	return r.at.Sub(t0), err
}

type stats struct {
	publish, publishShard int64
	cpu                   time.Duration
}

// snapshot sums the nodes' publish counters and CPU time.
func snapshot(ctx context.Context, c *testharness.Cluster) (stats, error) {
	var (
		mu  sync.Mutex
		s   stats
		wg  sync.WaitGroup
		err error
	)
	for _, node := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := redis.NewClient(&redis.Options{Addr: node.Addr})
			defer cl.Close()
			ci, e1 := cl.ClusterInfo(ctx).Result()
			info, e2 := cl.Info(ctx, "cpu").Result()
			mu.Lock()
			defer mu.Unlock()
			if e1 != nil || e2 != nil {
				err = fmt.Errorf("%s: %v %v", node.Addr, e1, e2)
				return
			}
			s.publish += field(ci, "cluster_stats_messages_publish_sent")
			s.publishShard += field(ci, "cluster_stats_messages_publishshard_sent")
			sys, user := fieldF(info, "used_cpu_sys"), fieldF(info, "used_cpu_user")
			s.cpu += time.Duration((sys + user) * float64(time.Second))
		}()
	}
	wg.Wait()
	return s, err
}

func field(info, name string) int64 {
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

func fieldF(info, name string) float64 {
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return 0
}
