package engine_test

import (
	"context"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/lua"
)

// releaseScript is lock_release as the library runs it (the fragment
// notify included).
func releaseScript(t *testing.T) *redis.Script {
	t.Helper()
	src, err := fs.ReadFile(lua.FS(), "lock_release.lua")
	if err != nil {
		t.Fatal(err)
	}
	return redis.NewScript(string(src))
}

// release releases the lock key full as a holder that a waiter found held
// (its value carries the waiter mark '+'), so that lock_release wakes the
// key's waiters.
func release(t *testing.T, ctx context.Context, c redis.UniversalClient, s *redis.Script, full string) {
	t.Helper()
	if err := c.Set(ctx, full, "tok+", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Run(ctx, c, []string{full}, "tok").Int(); err != nil || n != 1 {
		t.Fatalf("lock_release = %d, %v; want 1", n, err)
	}
}

// A release wakes the key's waiters through the key's shard where the
// server has sharded Pub/Sub (every real server here): the waiter is
// subscribed with SSUBSCRIBE on the shard channel, on the primary that
// owns the key's slot, and no classic channel is subscribed. A key whose
// braces form no hash tag, and every key on miniredis (no SPUBLISH), use
// classic Pub/Sub. The waiter wakes from the notification alone: Watch
// never polls.
func TestReleaseIsDeliveredByTheShard(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord, _ := coordination.New(b.Client(t), coordination.WithKeyPrefix(b.Prefix()))
		t.Cleanup(func() { _ = coord.Shutdown(context.Background()) })
		e := eng(t, coord)
		admin := b.Admin(t)
		script := releaseScript(t)
		for _, key := range []string{"plain", "{tag}:lease", "odd}key", "a{}b", "open{only"} {
			full := b.Key(key)
			sharded := !b.IsMini() && testharness.ShardChannel(full) != ""
			w, err := e.Watch(ctx, full)
			if err != nil {
				t.Fatal(err)
			}
			if !engine.Confirmed(w) {
				t.Fatalf("%s: subscription not confirmed within Watch's bound", key)
			}
			classic, shard := subscriptions(t, ctx, b, admin, full)
			switch {
			case sharded && (classic != 0 || shard != 1):
				t.Errorf("%s: %d classic and %d sharded subscriptions, want 0 and 1", key, classic, shard)
			case !sharded && (classic != 1 || shard != 0):
				t.Errorf("%s: %d classic and %d sharded subscriptions, want 1 and 0", key, classic, shard)
			}
			release(t, ctx, b.Client(t), script, full)
			select {
			case <-w.C():
			case <-time.After(10 * time.Second):
				t.Errorf("%s: the release woke no waiter within 10 s", key)
			}
			w.Close()
		}
	})
}

// subscriptions returns the number of classic and of sharded
// subscriptions to full's release channels: on a Cluster, summed over
// every primary (PUBSUB NUMSUB and SHARDNUMSUB count a node's own
// clients), and the sharded ones must all be on the primary that owns the
// key's slot.
func subscriptions(t *testing.T, ctx context.Context, b *testharness.Backend, admin redis.UniversalClient, full string) (classic, shard int64) {
	t.Helper()
	ch, sh := testharness.Channel(full), testharness.ShardChannel(full)
	count := func(c redis.UniversalClient) (int64, int64, error) {
		n, err := c.PubSubNumSub(ctx, ch).Result()
		if err != nil {
			return 0, 0, err
		}
		var s int64
		if sh != "" && !b.IsMini() {
			m, err := c.PubSubShardNumSub(ctx, sh).Result()
			if err != nil {
				return 0, 0, err
			}
			s = m[sh]
		}
		return n[ch], s, nil
	}
	cc, ok := admin.(*redis.ClusterClient)
	if !ok {
		c, s, err := count(admin)
		if err != nil {
			t.Fatal(err)
		}
		return c, s
	}
	var owner string
	if sh != "" {
		m, err := cc.MasterForKey(ctx, sh)
		if err != nil {
			t.Fatal(err)
		}
		owner = m.Options().Addr
	}
	var mu sync.Mutex
	err := cc.ForEachShard(ctx, func(ctx context.Context, node *redis.Client) error {
		c, s, err := count(node)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		classic += c
		shard += s
		if s != 0 && node.Options().Addr != owner {
			t.Errorf("%d sharded subscriptions on %s, which does not own the key's slot (%s does)", s, node.Options().Addr, owner)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return classic, shard
}

// Waiters on many keys spread over a Cluster's slots share one sharded
// Pub/Sub connection per primary at most (three here), and every
// connection ends with the last waiter.
func TestShardedWaitersShareOneConnectionPerPrimary(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord, _ := coordination.New(b.Client(t), coordination.WithKeyPrefix(b.Prefix()))
		t.Cleanup(func() { _ = coord.Shutdown(context.Background()) })
		e := eng(t, coord)
		var ws []interface{ Close() }
		for i := range 60 {
			w, err := e.Watch(ctx, b.Key("key-"+strings.Repeat("x", i%7)+string(rune('a'+i%26))))
			if err != nil {
				t.Fatal(err)
			}
			ws = append(ws, w)
		}
		want := 1
		if b.IsCluster() {
			want = 3 // 60 keys spread over the slots: every primary owns some
		}
		if _, n := e.Waiters(); n != want {
			t.Errorf("60 waiters use %d Pub/Sub connections, want %d", n, want)
		}
		for _, w := range ws {
			w.Close()
		}
		if _, n := e.Waiters(); n != 0 {
			t.Errorf("%d Pub/Sub connections left after every waiter closed", n)
		}
	}, testharness.RealOnly())
}
