package engine_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// The errors go-redis itself returns when nothing was sent (a refused
// dial, a host name that does not resolve, a connection-pool timeout) are
// transient and not ambiguous, on a client that re-sends (the default).
func TestUnsentErrorsFromGoRedis(t *testing.T) {
	ctx := context.Background()
	closed := testharness.RefusedAddr(t)
	for _, c := range []struct{ name, addr string }{
		{"connection refused", closed},
		{"no such host", "no-such-host.invalid:6379"},
	} {
		t.Run(c.name, func(t *testing.T) {
			client := redis.NewClient(&redis.Options{Addr: c.addr, DialerRetries: 1, DialTimeout: 2 * time.Second})
			defer client.Close()
			err := client.Ping(ctx).Err()
			var op *net.OpError
			if !errors.As(err, &op) || op.Op != "dial" {
				t.Fatalf("Ping at %s: %v (%T), want a *net.OpError of a dial", c.addr, err, err)
			}
			if !engine.Unsent(err) || coordination.IsAmbiguous(err) || !coordination.IsTransient(err) {
				t.Errorf("%v: Unsent %v, IsAmbiguous %v, Classify %v; want true, false, transient",
					err, engine.Unsent(err), coordination.IsAmbiguous(err), engine.Classify(err))
			}
		})
	}
	t.Run("pool timeout", func(t *testing.T) {
		b := testharness.Get(t, "miniredis")
		client := b.Client(t, func(o *redis.Options) { o.PoolSize, o.PoolTimeout = 1, 100*time.Millisecond })
		blocked := make(chan error, 1)
		go func() { blocked <- client.BLPop(ctx, 30*time.Second, b.Key("list")).Err() }()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			if s := client.PoolStats(); s.TotalConns == 1 && s.IdleConns == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("BLPOP never took the pool's one connection")
			}
		}
		err := client.Ping(ctx).Err()
		if !errors.Is(err, redis.ErrPoolTimeout) || coordination.IsAmbiguous(err) || !coordination.IsTransient(err) {
			t.Errorf("Ping with the pool's one connection busy: %v, IsAmbiguous %v, Classify %v; want a pool timeout, false, transient",
				err, coordination.IsAmbiguous(err), engine.Classify(err))
		}
		if err := b.Admin(t).RPush(ctx, b.Key("list"), "x").Err(); err != nil {
			t.Fatal(err)
		}
		if err := <-blocked; err != nil {
			t.Fatalf("BLPOP: %v", err)
		}
	})
}
