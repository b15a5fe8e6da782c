package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
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
var mutexSubject = adopttest.Subject{
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
}

func TestMutexAdoptHolderForceRelease(t *testing.T) { adopttest.Run(t, mutexSubject) }

// The contract suite on Adopt, Holder(s) and ForceRelease.
func TestMutexAdoptContract(t *testing.T) {
	adopttest.Contract(t, adopttest.Names{
		Primitive:       "lock",
		AcquireOp:       hooks.LockAcquire,
		AcquireCommand:  "SET",
		AdoptOp:         hooks.LockAdopt,
		ReadOp:          hooks.LockRead,
		ForceOp:         hooks.LockForceRelease,
		ForceOneCommand: true,
		New:             mutexSubject.New, KeysOf: mutexSubject.Keys, Expect: mutexSubject.Expect,
	})
}

// Adopt, Holder and ForceRelease of a FieldSet's field (package adopttest).
var fieldSubject = adopttest.Subject{
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
}

func TestFieldSetAdoptHolderForceRelease(t *testing.T) { adopttest.Run(t, fieldSubject) }

// The contract suite on Adopt, Holder(s) and ForceRelease.
func TestFieldSetAdoptContract(t *testing.T) {
	adopttest.Contract(t, adopttest.Names{
		Primitive:       "lock",
		AcquireOp:       hooks.LeaseAcquire,
		AdoptOp:         hooks.LeaseAdopt,
		ReadOp:          hooks.LeaseRead,
		ForceOp:         hooks.LeaseForceRelease,
		ForceOneCommand: true,
		Backends:        []testharness.Option{testharness.HashFieldTTLOnly()},
		New:             fieldSubject.New, KeysOf: fieldSubject.Keys, Expect: fieldSubject.Expect,
	})
}
