package lock_test

import (
	"context"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/lockcore"
	"github.com/coordkit/coordination/internal/testkit/locktest"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/lock"
)

// The first-in first-out Mutex is lock-shaped like the default one: the
// contract suite and the lock-shaped suite, with every attempt a script.
func TestLockFIFO(t *testing.T) {
	locktest.Run(t, locktest.Subject{
		Primitive: "lock",
		AcquireOp: hooks.LockAcquire, RenewOp: hooks.LockRenew, VerifyOp: hooks.LockVerify, ReleaseOp: hooks.LockRelease,
		AcquireSHA: lock.FIFOAcquireSHA, RefreshSHA: lockcore.Refresh.Hash(),
		Metrics: []string{"coordination.lock.contention", "coordination.lock.hold_time", "coordination.lock.acquire_wait"},
		Acquire: func(ctx context.Context, c *coordination.Coordinator, name string, ttl time.Duration, block bool) (locktest.Handle, error) {
			m, err := lock.New(c, name, lock.WithFIFO(true))
			if err != nil {
				return nil, err
			}
			var l *lock.Lock
			if block {
				l, err = m.Acquire(ctx, ttl)
			} else {
				l, err = m.TryAcquire(ctx, ttl)
			}
			if l == nil {
				return nil, err
			}
			return l, err
		},
		LeaseKey: func(name string) string { return name },
		// The handle is the default Mutex's (TestLock runs these).
		Skip: []string{"KeepAliveHoldsAndDetectsLoss", "KeepAliveStartedLateRenewsAtOnce", "RenewalInFlightDuringRelease", "LocalExpiryCancelsContext"},
		// The scripts run alike on every server version: miniredis, the
		// least-privilege user's server and the cluster (the FIFO tests run
		// on every backend).
		Backends: []testharness.Option{testharness.Only("miniredis", "redis8", "cluster")},
	})
}
