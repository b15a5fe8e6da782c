package failover_test

import (
	"context"
	"io/fs"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/lua"
)

// Cluster: sharded release notifications survive the death of a primary.
// Waiters watch keys spread over every primary's slots (one sharded
// Pub/Sub connection per primary); the primary of one of them is killed
// and its replica promoted; the hub re-subscribes the lost primary's
// channels on the new one, and a release of every key afterwards wakes
// its waiter (Watch never polls: only a notification, or a
// re-subscription, can wake it).
func TestClusterFailoverShardedWaiters(t *testing.T) {
	t.Parallel()
	c := testharness.StartCluster(t, testharness.ClusterFlavor())
	client := redis.NewClusterClient(c.Options())
	t.Cleanup(func() { _ = client.Close() })
	coord := must(coordination.New(client))(t)
	t.Cleanup(func() { _ = coord.Shutdown(context.Background()) })
	e := must(engine.Of(coord))(t)
	ctx := context.Background()

	keys := make([]string, 24)
	watches := make([]*engine.Watch, len(keys))
	for i := range keys {
		keys[i] = "shardwatch-" + strconv.Itoa(i)
		watches[i] = must(e.Watch(ctx, keys[i]))(t)
	}
	if _, n := e.Waiters(); n != 3 {
		t.Fatalf("%d Pub/Sub connections for waiters on every primary, want 3", n)
	}
	primary := must(client.MasterForKey(ctx, keys[0]))(t)
	victim := node(t, c, primary.Options().Addr)
	victim.Kill()
	waitSlotMoved(t, c, victim.Addr, keys[0], 60*time.Second)

	// Every key's shard channel is subscribed again on its primary (the
	// promoted replica for the victim's slots).
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; i < len(keys); {
		n, err := testharness.Subscribers(ctx, client, keys[i])
		if err == nil && n == 1 {
			i++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d subscribers (%v) 60 s after the failover, want 1", keys[i], n, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, w := range watches {
		select { // a re-subscription wakes the waiters: drain it
		case <-w.C():
		default:
		}
	}
	src := must(fs.ReadFile(lua.FS(), "lock_release.lua"))(t)
	script := redis.NewScript(string(src))
	for i, k := range keys {
		if err := client.Set(ctx, k, "tok+", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if n, err := script.Run(ctx, client, []string{k}, "tok").Int(); err != nil || n != 1 {
			t.Fatalf("lock_release(%s) = %d, %v; want 1", k, n, err)
		}
		select {
		case <-watches[i].C():
		case <-time.After(10 * time.Second):
			t.Errorf("%s: its release after the failover woke no waiter within 10 s", k)
		}
	}
	for _, w := range watches {
		w.Close()
	}
	if _, n := e.Waiters(); n != 0 {
		t.Errorf("%d Pub/Sub connections left after every waiter closed", n)
	}
}
