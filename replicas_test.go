package coordination_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/lockcore"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// pipelines records the command names of every pipeline a client sends
// and of every single command.
type pipelines struct {
	mu    sync.Mutex
	sent  [][]string
	alone []string
}

func (p *pipelines) DialHook(next redis.DialHook) redis.DialHook { return next }

func (p *pipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		p.mu.Lock()
		p.alone = append(p.alone, strings.ToUpper(cmd.Name()))
		p.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (p *pipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		names := make([]string, len(cmds))
		for i, c := range cmds {
			names[i] = strings.ToUpper(c.Name())
		}
		p.mu.Lock()
		p.sent = append(p.sent, names)
		p.mu.Unlock()
		return next(ctx, cmds)
	}
}

func (p *pipelines) reset() {
	p.mu.Lock()
	p.sent, p.alone = nil, nil
	p.mu.Unlock()
}

func (p *pipelines) get() ([][]string, []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.sent), slices.Clone(p.alone)
}

func TestReplicaAcksOptionValidation(t *testing.T) {
	b := testharness.Get(t, "miniredis")
	c := b.Client(t)
	k := testharness.CountCommands(c)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": b.Mini.Addr()}})
	t.Cleanup(func() { _ = ring.Close() })
	for _, tc := range []struct {
		client   redis.UniversalClient
		replicas int
		timeout  time.Duration
		arg      string
	}{
		{c, 0, time.Second, "replicas"},
		{c, 1, 0, "timeout"},
		{c, 1, 5 * time.Second, "timeout"}, // go-redis' default ReadTimeout
		{b.Client(t, func(o *redis.Options) { o.ReadTimeout = 500 * time.Millisecond }), 1, 500 * time.Millisecond, "timeout"},
		{ring, 1, time.Second, "client"},
	} {
		_, err := coordination.New(tc.client, coordination.WithReplicaAcks(tc.replicas, tc.timeout))
		if got, ok := check.ArgumentName(err); !errors.Is(err, coordination.ErrInvalidArgument) || !ok || got != tc.arg {
			t.Errorf("WithReplicaAcks(%d, %v) on %T: %v, want ErrInvalidArgument naming %q", tc.replicas, tc.timeout, tc.client, err, tc.arg)
		}
	}
	if k.Count() != 0 {
		t.Errorf("New sent %v", k.Names())
	}
}

// With a replica, every operation is the script and WAIT in one pipeline
// (one round trip) and succeeds once the replica acknowledged it. A
// replica that does not acknowledge in time (stopped with SIGSTOP) makes
// the operation fail with ErrNotReplicated, transient and ambiguous, and
// the acquisition is undone in the background without waiting for the
// replica.
func TestReplicaAcks(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		primary, replica := testharness.StartReplicaPair(t, b.Flavor)
		rdb := redis.NewClient(primary.Options())
		t.Cleanup(func() { _ = rdb.Close() })
		rec := &pipelines{}
		rdb.AddHook(rec)
		// A generous timeout where the replica is up (a loaded machine
		// delays its acknowledgement), 300 ms where it is stopped.
		coord, err := coordination.New(rdb, coordination.WithReplicaAcks(1, 1500*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		short, err := coordination.New(rdb, coordination.WithReplicaAcks(1, 300*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		l, err := lockTryAcquire(ctx, coord, "warm", time.Minute) // loads the script (NOSCRIPT, then EVAL)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		rec.reset()
		l, err = lockTryAcquire(ctx, coord, "k", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		// The lock's first attempt is a plain command (SET NX GET PX): it
		// waits for the replica like a script.
		sent, alone := rec.get()
		if len(sent) != 1 || !slices.Equal(sent[0], []string{"SET", "WAIT"}) || len(alone) != 0 {
			t.Fatalf("an acquisition sent pipelines %v and commands %v, want one pipeline [SET WAIT]", sent, alone)
		}
		rc := redis.NewClient(replica.Options())
		t.Cleanup(func() { _ = rc.Close() })
		if rc.Exists(ctx, "k").Val() != 1 {
			t.Error("the acknowledged lock is not on the replica")
		}
		rec.reset()
		if out, err := l.Release(ctx); out != coordination.Released || err != nil {
			t.Fatalf("Release = %v, %v", out, err)
		}
		if sent, alone := rec.get(); len(sent) != 1 || !slices.Equal(sent[0], []string{"EVALSHA", "WAIT"}) || len(alone) != 0 {
			t.Fatalf("a release sent pipelines %v and commands %v, want one pipeline [EVALSHA WAIT]", sent, alone)
		}

		replica.Pause()
		start := time.Now()
		_, err = lockTryAcquire(ctx, short, "unacked", time.Minute)
		took := time.Since(start)
		replica.Resume()
		if !errors.Is(err, coordination.ErrNotReplicated) || !coordination.IsAmbiguous(err) ||
			!coordination.IsTransient(err) {
			t.Fatalf("TryAcquire with the replica stopped: %v (class %v), want ErrNotReplicated, transient and ambiguous",
				err, engine.Classify(err))
		}
		if took < 300*time.Millisecond {
			t.Errorf("the acquisition failed after %v, before the 300ms WAIT timeout", took)
		}
		// Undone: the cleanup leaves its tombstone (lockcore), a free lock.
		deadline := time.Now().Add(5 * time.Second)
		for v := rdb.Get(ctx, "unacked").Val(); v != "" && !lockcore.IsTombstone(v); v = rdb.Get(ctx, "unacked").Val() {
			if time.Now().After(deadline) {
				t.Fatal("the unacknowledged acquisition was not undone within 5 s")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}, testharness.RealOnly(), testharness.StandaloneOnly())
}

// miniredis' WAIT answers 0: a server without replicas fails every
// operation with ErrNotReplicated.
func TestReplicaAcksWithoutReplicas(t *testing.T) {
	b := testharness.Get(t, "miniredis")
	coord, err := coordination.New(b.Client(t), coordination.WithReplicaAcks(1, 100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockTryAcquire(context.Background(), coord, "k", time.Minute); !errors.Is(err, coordination.ErrNotReplicated) {
		t.Fatalf("TryAcquire without replicas: %v, want ErrNotReplicated", err)
	}
}

// On a Cluster client the pipeline goes to the primary of the key's slot,
// whose replica acknowledges it.
func TestReplicaAcksCluster(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		cc := redis.NewClusterClient(b.Cluster.Options())
		t.Cleanup(func() { _ = cc.Close() })
		coord, err := coordination.New(cc, coordination.WithKeyPrefix(b.Prefix()), coordination.WithReplicaAcks(1, time.Second))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		for _, key := range []string{"a", "b", "c", "d", "e", "f"} { // keys on every shard
			l, err := lockTryAcquire(ctx, coord, key, time.Minute)
			if err != nil {
				t.Fatalf("TryAcquire(%s): %v", key, err)
			}
			if out, err := l.Release(ctx); out != coordination.Released || err != nil {
				t.Fatalf("Release(%s) = %v, %v", key, out, err)
			}
		}
	}, testharness.Only("cluster"))
}

// Through a Sentinel failover client the pipeline goes to the primary the
// Sentinels name, whose replica acknowledges it: the acknowledged lock is
// on the replica, and its release too.
func TestReplicaAcksSentinel(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		coord := b.Coordinator(t, coordination.WithReplicaAcks(1, time.Second))
		replica := redis.NewClient(b.Sentinel.Replica.Options())
		t.Cleanup(func() { _ = replica.Close() })
		ctx := context.Background()
		counter := testharness.CountCommands(coord.Client())
		l, err := lockTryAcquire(ctx, coord, "k", time.Minute)
		if err != nil {
			t.Fatalf("TryAcquire: %v", err)
		}
		if got := counter.Names(); !slices.Equal(got, []string{"SET", "WAIT"}) {
			t.Fatalf("TryAcquire sent %v, want SET and WAIT", got)
		}
		if n := replica.Exists(ctx, b.Key("k")).Val(); n != 1 {
			t.Fatal("the acknowledged lock is not on the replica")
		}
		if out, err := l.Release(ctx); out != coordination.Released || err != nil {
			t.Fatalf("Release = %v, %v", out, err)
		}
		if n := replica.Exists(ctx, b.Key("k")).Val(); n != 0 {
			t.Fatal("the acknowledged release did not reach the replica")
		}
	}, testharness.Only("sentinel"))
}
