package fencing_test

import (
	"context"
	"testing"
	"time"

	"github.com/coordkit/coordination/fencing"
	"github.com/coordkit/coordination/internal/testkit/locktest"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// In a fencing lease's last millisecond (PTTL 0) Holder and Adopt read it
// as free, not as a corrupt key (locktest.LastMillisecond).
func TestHolderInTheLeaseLastMillisecond(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		m := must(fencing.New(b.Coordinator(t), "{lastms}:lease", "{lastms}:fence"))(t)
		locktest.LastMillisecond(t, b, locktest.HolderReads{
			TryAcquire: func(ctx context.Context, ttl time.Duration) (string, error) {
				l, err := m.TryAcquire(ctx, ttl)
				if err != nil {
					return "", err
				}
				return l.Token(), nil
			},
			Holder: m.Holder,
			Adopt: func(ctx context.Context, token string) error {
				_, err := m.Adopt(ctx, token)
				return err
			},
		})
	})
}
