package lock_test

import (
	"github.com/redis/go-redis/v9"

	"context"
	"errors"
	"math"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/engine"
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
	Garbage: func(ctx context.Context, admin redis.UniversalClient, prefix, name string) error {
		return admin.Set(ctx, prefix+name, "hello world", time.Minute).Err()
	},
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
	Garbage: func(ctx context.Context, admin redis.UniversalClient, prefix, name string) error {
		if err := admin.HSet(ctx, prefix+"fields", name, "hello world").Err(); err != nil {
			return err
		}
		return admin.HPExpire(ctx, prefix+"fields", time.Minute, name).Err()
	},
}

func TestFieldSetAdoptHolderForceRelease(t *testing.T) { adopttest.Run(t, fieldSubject) }

// The contract suite on Adopt, Holder(s) and ForceRelease.
func TestFieldSetAdoptContract(t *testing.T) {
	adopttest.Contract(t, adopttest.Names{
		Primitive: "lock",
		AcquireOp: hooks.LeaseAcquire,
		AdoptOp:   hooks.LeaseAdopt,
		ReadOp:    hooks.LeaseRead,
		ForceOp:   hooks.LeaseForceRelease,
		Backends:  []testharness.Option{testharness.HashFieldTTLOnly()},
		New:       fieldSubject.New, KeysOf: fieldSubject.Keys, Expect: fieldSubject.Expect,
	})
}

// A lock whose owner token lost its TTL (PERSISTed by hand) is read with
// the largest Remaining and cannot be adopted (ErrBadState); a key holding
// something else than an owner token is ErrBadState for the three (and
// ForceRelease leaves it as it was).
func TestAdoptBadState(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		m := must(lock.New(b.Coordinator(t), "bad"))(t)
		l := must(m.TryAcquire(ctx, time.Minute))(t)
		admin := b.Admin(t)
		if err := admin.Persist(ctx, b.Key("bad")).Err(); err != nil {
			t.Fatal(err)
		}
		h, err := m.Holder(ctx)
		if err != nil || h.Token != l.Token() || h.Remaining != time.Duration(math.MaxInt64) {
			t.Fatalf("Holder = %+v, %v; want the token without expiry", h, err)
		}
		if _, err := m.Adopt(ctx, l.Token()); !errors.Is(err, coordination.ErrBadState) {
			t.Fatalf("Adopt without TTL = %v, want ErrBadState", err)
		}
		if err := admin.Set(ctx, b.Key("bad"), "someone else's value", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Holder(ctx); !errors.Is(err, coordination.ErrBadState) {
			t.Fatalf("Holder of a foreign value = %v, want ErrBadState", err)
		}
		if _, err := m.Adopt(ctx, l.Token()); !errors.Is(err, coordination.ErrBadState) {
			t.Fatalf("Adopt of a foreign value = %v, want ErrBadState", err)
		}
		if ok, err := m.ForceRelease(ctx, l.Token()); !errors.Is(err, coordination.ErrBadState) || ok {
			t.Fatalf("ForceRelease of a foreign value = %v, %v; want false and ErrBadState", ok, err)
		}
		if v, err := admin.Get(ctx, b.Key("bad")).Result(); err != nil || v != "someone else's value" {
			t.Fatalf("the foreign value after ForceRelease = %q, %v; want it left as it was", v, err)
		}
	})
}

// Adopt, Holder and ForceRelease of a Mutex made WithFIFO: the adopted
// lock's release and the forced release hand the lock to the queue's head.
func TestFIFOMutexAdoptHolderForceRelease(t *testing.T) {
	s := mutexSubject
	s.New = func(t testing.TB, c *coordination.Coordinator, name string) adopttest.Ops {
		m := must(lock.New(c, name, lock.WithFIFO(true)))(t)
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
	}
	adopttest.Run(t, s)
}

// A hash with a key-level TTL is not a field-lease hash: Holder and
// ForceRelease refuse it with ErrBadState, as an acquisition does, and
// leave it as it was (a new user's finding: ForceRelease emptied such a
// hash, a fencing lease's among them).
func TestFieldSetRefusesAHashWithAKeyTTL(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		admin, key := b.Admin(t), b.Key("ttlhash")
		tok, _ := engine.NewToken()
		if err := admin.HSet(ctx, key, "f", tok).Err(); err != nil {
			t.Fatal(err)
		}
		if err := admin.PExpire(ctx, key, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		s := must(lock.NewFieldSet(b.Coordinator(t), "ttlhash"))(t)
		if h, err := s.Holder(ctx, "f"); !errors.Is(err, coordination.ErrBadState) {
			t.Fatalf("Holder = %+v, %v; want ErrBadState", h, err)
		}
		if ok, err := s.ForceRelease(ctx, "f", tok); ok || !errors.Is(err, coordination.ErrBadState) {
			t.Fatalf("ForceRelease = %v, %v; want ErrBadState", ok, err)
		}
		if v := must(admin.HGet(ctx, key, "f").Result())(t); v != tok {
			t.Fatalf("the field holds %q after the refusals, want it unchanged", v)
		}
	}, testharness.HashFieldTTLOnly())
}
