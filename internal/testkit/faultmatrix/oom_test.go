package faultmatrix_test

import (
	"context"
	"strings"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/fencing"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/fencingcore"
	"github.com/coordkit/coordination/rwlease"
	"github.com/coordkit/coordination/semaphore"
)

// handle is what the lease-shaped primitives share.
type handle interface {
	Refresh(ctx context.Context, ttl time.Duration) (bool, error)
	Release(ctx context.Context) (coordination.ReleaseOutcome, error)
}

// Under maxmemory with noeviction, a holder still releases (DEL, ZREM, HDEL
// are not refused whatever the memory) and renews its lock, fencing lock
// or field lease (PEXPIRE, HPEXPIRE); a semaphore permit's or read-write
// lease's renewal is refused with OOM (it moves the holder's deadline with
// ZADD, which the server refuses as a first write), so their keep-alive
// reports the lease lost. The releases leave nothing behind.
func TestRenewAndReleaseUnderOOM(t *testing.T) {
	for _, flavor := range flavors(t) {
		t.Run(flavor, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, flavor, 1)
			ctx := context.Background()
			c := w.coord[0]
			held := map[string]handle{
				"lock":      must(lockTryAcquire(ctx, c, "l", time.Minute))(t),
				"fencing":   must(must(fencing.New(c, "{f}:lease", "{f}:fence"))(t).TryAcquire(ctx, time.Minute))(t),
				"rwlease":   must(must(rwlease.New(c, "rw"))(t).TryWrite(ctx, time.Minute))(t),
				"semaphore": must(must(semaphore.New(c, "s", 2))(t).TryAcquire(ctx, time.Minute))(t),
			}
			if hasHashFieldTTL(flavor) {
				held["field lease"] = must(lockTryAcquireField(ctx, c, "h", "f", time.Minute))(t)
			}
			a := w.admin[0]
			must(a.ConfigSet(ctx, "maxmemory-policy", "noeviction").Result())(t)
			must(a.ConfigSet(ctx, "maxmemory", "1").Result())(t)
			defer a.ConfigSet(ctx, "maxmemory", "0")
			if err := a.Set(ctx, "probe", "x", 0).Err(); err == nil {
				t.Fatal("the server is not out of memory")
			}
			for name, h := range held {
				ok, err := h.Refresh(ctx, time.Minute)
				switch name {
				case "semaphore", "rwlease":
					if err == nil || !strings.Contains(err.Error(), "OOM") || engine.Classify(err) != engine.Terminal {
						t.Errorf("%s: Refresh under OOM = %v, %v; want a terminal OOM error", name, ok, err)
					}
				default:
					if !ok || err != nil {
						t.Errorf("%s: Refresh under OOM = %v, %v", name, ok, err)
					}
				}
				if out, err := h.Release(ctx); out != coordination.Released || err != nil {
					t.Errorf("%s: Release under OOM = %v, %v", name, out, err)
				}
			}
			// Left: the fencing counter's shared hash only (a release
			// leaves no key).
			if left := a.Keys(ctx, "*").Val(); len(left) != 1 || !strings.HasSuffix(left[0], fencingcore.SharedKeyOf("", "{f}:fence")) {
				t.Errorf("keys left after the releases %q, want the fencing counter only", left)
			}
		})
	}
}
