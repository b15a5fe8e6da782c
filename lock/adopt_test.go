package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/adopttest"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/lock"
)

func lockHandle(l *lock.Lock, err error) (adopttest.Handle, error) {
	if err != nil {
		return nil, err
	}
	return l, nil
}

func fieldHandle(l *lock.FieldLease, err error) (adopttest.Handle, error) {
	if err != nil {
		return nil, err
	}
	return l, nil
}

func one(h coordination.Holder, err error) ([]coordination.Holder, error) {
	if errors.Is(err, coordination.ErrNotHeld) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return []coordination.Holder{h}, nil
}

// Adopt, Holder and ForceRelease of a Mutex (package adopttest).
func TestMutexAdoptHolderForceRelease(t *testing.T) {
	adopttest.Run(t, adopttest.Subject{
		New: func(t testing.TB, c *coordination.Coordinator, name string) adopttest.Ops {
			m := must(lock.New(c, name))(t)
			return adopttest.Ops{
				TryAcquire: func(ctx context.Context, ttl time.Duration) (adopttest.Handle, error) {
					return lockHandle(m.TryAcquire(ctx, ttl))
				},
				Acquire: func(ctx context.Context, ttl time.Duration) (adopttest.Handle, error) {
					return lockHandle(m.Acquire(ctx, ttl))
				},
				Adopt: func(ctx context.Context, token string) (adopttest.Handle, error) {
					return lockHandle(m.Adopt(ctx, token))
				},
				Holders:      func(ctx context.Context) ([]coordination.Holder, error) { return one(m.Holder(ctx)) },
				ForceRelease: m.ForceRelease,
			}
		},
		Keys:   func(name string) []string { return []string{name} },
		Expect: func(h adopttest.Handle) coordination.Holder { return coordination.Holder{Token: h.Token()} },
	})
}

// Adopt, Holder and ForceRelease of a FieldSet's field (package adopttest).
func TestFieldSetAdoptHolderForceRelease(t *testing.T) {
	adopttest.Run(t, adopttest.Subject{
		Skip: func(b *testharness.Backend) string {
			if !b.HasHashFieldTTL() {
				return "no hash-field expiration"
			}
			return ""
		},
		New: func(t testing.TB, c *coordination.Coordinator, name string) adopttest.Ops {
			s := must(lock.NewFieldSet(c, "fields"))(t)
			return adopttest.Ops{
				TryAcquire: func(ctx context.Context, ttl time.Duration) (adopttest.Handle, error) {
					return fieldHandle(s.TryAcquire(ctx, name, ttl))
				},
				Acquire: func(ctx context.Context, ttl time.Duration) (adopttest.Handle, error) {
					return fieldHandle(s.Acquire(ctx, name, ttl))
				},
				Adopt: func(ctx context.Context, token string) (adopttest.Handle, error) {
					return fieldHandle(s.Adopt(ctx, name, token))
				},
				Holders: func(ctx context.Context) ([]coordination.Holder, error) { return one(s.Holder(ctx, name)) },
				ForceRelease: func(ctx context.Context, token string) (bool, error) {
					return s.ForceRelease(ctx, name, token)
				},
			}
		},
		Keys:   func(string) []string { return []string{"fields"} },
		Expect: func(h adopttest.Handle) coordination.Holder { return coordination.Holder{Token: h.Token()} },
	})
}
