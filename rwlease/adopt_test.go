package rwlease_test

import (
	"github.com/redis/go-redis/v9"

	"context"
	"errors"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/testkit/adopttest"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/rwlease"
)

func leaseHandle(l *rwlease.Lease, err error) (adopttest.Handle, error) {
	if err != nil {
		return nil, err
	}
	return l, nil
}

// Adopt, Holders and ForceRelease of a write lease (package adopttest).
var subject = adopttest.Subject{
	New: func(t testing.TB, c *coordination.Coordinator, name string) adopttest.Ops {
		m, err := rwlease.New(c, name)
		if err != nil {
			t.Fatal(err)
		}
		return adopttest.Ops{
			TryAcquire: func(ctx context.Context, ttl time.Duration) (adopttest.Handle, error) {
				return leaseHandle(m.TryWrite(ctx, ttl))
			},
			Acquire: func(ctx context.Context, ttl time.Duration) (adopttest.Handle, error) {
				return leaseHandle(m.Write(ctx, ttl))
			},
			Adopt: func(ctx context.Context, token string) (adopttest.Handle, error) {
				return leaseHandle(m.Adopt(ctx, token))
			},
			Holders:      m.Holders,
			ForceRelease: m.ForceRelease,
		}
	},
	Keys:   func(name string) []string { return []string{name} },
	Expect: func(h adopttest.Handle) coordination.Holder { return coordination.Holder{Token: h.Token()} },
	Garbage: func(ctx context.Context, admin redis.UniversalClient, prefix, name string) error {
		return admin.ZAdd(ctx, prefix+name, redis.Z{Score: float64(time.Now().Add(time.Minute).UnixMilli()), Member: "hello world"}).Err()
	},
}

func TestAdoptHoldersForceRelease(t *testing.T) { adopttest.Run(t, subject) }

// The contract suite on Adopt, Holder(s) and ForceRelease.
func TestAdoptContract(t *testing.T) {
	adopttest.Contract(t, adopttest.Names{
		Primitive: "rwlease",
		AcquireOp: hooks.RWLeaseWriteAcquire,
		AdoptOp:   hooks.RWLeaseAdopt,
		ReadOp:    hooks.RWLeaseRead,
		ForceOp:   hooks.RWLeaseForceRelease,
		New:       subject.New, KeysOf: subject.Keys, Expect: subject.Expect,
	})
}

// Read leases: Holders lists every reader as shared; Adopt gives back the
// read mode; a forced release of one reader leaves the other, and lets a
// blocked writer in once the other reader is gone too.
func TestAdoptReaders(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		m1, _ := rwlease.New(b.Coordinator(t), "readers")
		m2, _ := rwlease.New(b.Coordinator(t), "readers")
		r1, err := m1.TryRead(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := m1.TryRead(ctx, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		hs, err := m2.Holders(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(hs) != 2 || hs[0].Token != r2.Token() || hs[1].Token != r1.Token() || !hs[0].Shared || !hs[1].Shared ||
			hs[0].Remaining > 30*time.Second || hs[0].Remaining < 25*time.Second || hs[1].Remaining > time.Minute || hs[1].Remaining < 55*time.Second {
			t.Fatalf("Holders = %+v, want r2 (30s) then r1 (1m), shared", hs)
		}
		a, err := m2.Adopt(ctx, r1.Token())
		if err != nil {
			t.Fatal(err)
		}
		if a.Mode() != rwlease.ReadMode {
			t.Fatalf("adopted mode %v, want read", a.Mode())
		}
		done := make(chan error, 1)
		go func() {
			w, err := m2.Write(ctx, time.Minute)
			if err == nil {
				_, err = w.Release(ctx)
			}
			done <- err
		}()
		time.Sleep(200 * time.Millisecond)
		if ok, err := m2.ForceRelease(ctx, r2.Token()); err != nil || !ok {
			t.Fatalf("ForceRelease(r2) = %v, %v", ok, err)
		}
		if ok, err := r1.Verify(ctx); err != nil || !ok {
			t.Fatalf("r1 after r2's forced release: Verify = %v, %v", ok, err)
		}
		select {
		case err := <-done:
			t.Fatalf("the writer got in while r1 reads: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
		if out, err := a.Release(ctx); err != nil || out != coordination.Released {
			t.Fatalf("adopted reader's Release = %v, %v", out, err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the writer did not get in after both readers left")
		}
		if _, err := m2.Holders(ctx); err != nil && !errors.Is(err, coordination.ErrNotHeld) {
			t.Fatal(err)
		}
	})
}
