package fencing_test

import (
	"github.com/redis/go-redis/v9"

	"context"
	"errors"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/fencing"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/testkit/adopttest"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

func fencedHandle(l *fencing.Lock, err error) (adopttest.Handle, error) {
	if err != nil {
		return nil, err
	}
	return l, nil
}

// Adopt, Holder and ForceRelease of a fencing lock (package adopttest).
var subject = adopttest.Subject{
	New: func(t testing.TB, c *coordination.Coordinator, name string) adopttest.Ops {
		m, err := fencing.New(c, leaseKey("{"+name+"}"), fenceKey("{"+name+"}"))
		if err != nil {
			t.Fatal(err)
		}
		return adopttest.Ops{
			TryAcquire: func(ctx context.Context, ttl time.Duration) (adopttest.Handle, error) {
				return fencedHandle(m.TryAcquire(ctx, ttl))
			},
			Acquire: func(ctx context.Context, ttl time.Duration) (adopttest.Handle, error) {
				return fencedHandle(m.Acquire(ctx, ttl))
			},
			Adopt: func(ctx context.Context, token string) (adopttest.Handle, error) {
				return fencedHandle(m.Adopt(ctx, token))
			},
			Holders: func(ctx context.Context) ([]coordination.Holder, error) {
				h, err := m.Holder(ctx)
				if errors.Is(err, coordination.ErrNotHeld) {
					return nil, nil
				}
				if err != nil {
					return nil, err
				}
				return []coordination.Holder{h}, nil
			},
			ForceRelease: m.ForceRelease,
		}
	},
	Keys: func(name string) []string { return []string{leaseKey("{" + name + "}")} },
	Garbage: func(ctx context.Context, admin redis.UniversalClient, prefix, name string) error {
		k := prefix + leaseKey("{"+name+"}")
		if err := admin.HSet(ctx, k, "owner", "hello world", "fence", "7").Err(); err != nil {
			return err
		}
		return admin.PExpire(ctx, k, time.Minute).Err()
	},
	Expect: func(h adopttest.Handle) coordination.Holder {
		return coordination.Holder{Token: h.Token(), FencingToken: h.(*fencing.Lock).FencingToken()}
	},
}

func TestAdoptHolderForceRelease(t *testing.T) { adopttest.Run(t, subject) }

// The contract suite on Adopt, Holder(s) and ForceRelease.
func TestAdoptContract(t *testing.T) {
	adopttest.Contract(t, adopttest.Names{
		Primitive:       "fencing",
		AcquireOp:       hooks.FencedLockAcquire,
		AdoptOp:         hooks.FencedLockAdopt,
		ReadOp:          hooks.FencedLockRead,
		ForceOp:         hooks.FencedLockForceRelease,
		ForceOneCommand: true,
		New:             subject.New, KeysOf: subject.Keys, Expect: subject.Expect,
	})
}

// An adopted lock carries the fencing token it was acquired with; after a
// forced release the next holder's token is larger (the counter stays).
func TestAdoptKeepsFencingTokenForceReleaseKeepsCounter(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		m1, err := fencing.New(b.Coordinator(t), "{f}:lease", "{f}:fence")
		if err != nil {
			t.Fatal(err)
		}
		m2, err := fencing.New(b.Coordinator(t), "{f}:lease", "{f}:fence")
		if err != nil {
			t.Fatal(err)
		}
		var prev int64
		for range 2 {
			l, err := m1.TryAcquire(ctx, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if l.FencingToken() <= prev {
				t.Fatalf("fencing token %d after a forced release of %d, want larger", l.FencingToken(), prev)
			}
			a, err := m2.Adopt(ctx, l.Token())
			if err != nil {
				t.Fatal(err)
			}
			if a.FencingToken() != l.FencingToken() {
				t.Fatalf("adopted fencing token %d, want %d", a.FencingToken(), l.FencingToken())
			}
			if ok, err := m2.ForceRelease(ctx, l.Token()); err != nil || !ok {
				t.Fatalf("ForceRelease = %v, %v", ok, err)
			}
			if ok, err := a.Verify(ctx); err != nil || ok {
				t.Fatalf("the adopted lock after a forced release: Verify = %v, %v", ok, err)
			}
			prev = l.FencingToken()
		}
	})
}
