package semaphore_test

import (
	"github.com/redis/go-redis/v9"

	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/testkit/adopttest"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/semaphore"
)

func permitHandle(p *semaphore.Permit, err error) (adopttest.Handle, error) {
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Adopt, Holders and ForceRelease of a permit of 2 on a semaphore of
// capacity 2 (package adopttest).
var subject = adopttest.Subject{
	New: func(t testing.TB, c *coordination.Coordinator, name string) adopttest.Ops {
		s, err := semaphore.New(c, name, 2)
		if err != nil {
			t.Fatal(err)
		}
		return adopttest.Ops{
			TryAcquire: func(ctx context.Context, ttl time.Duration) (adopttest.Handle, error) {
				return permitHandle(s.TryAcquireN(ctx, 2, ttl))
			},
			Acquire: func(ctx context.Context, ttl time.Duration) (adopttest.Handle, error) {
				return permitHandle(s.AcquireN(ctx, 2, ttl))
			},
			Adopt: func(ctx context.Context, token string) (adopttest.Handle, error) {
				return permitHandle(s.Adopt(ctx, token))
			},
			Holders:      s.Holders,
			ForceRelease: s.ForceRelease,
		}
	},
	Keys: func(name string) []string { return []string{name} },
	Expect: func(h adopttest.Handle) coordination.Holder {
		return coordination.Holder{Token: h.Token(), Permits: h.(*semaphore.Permit).N()}
	},
	Garbage: func(ctx context.Context, admin redis.UniversalClient, prefix, name string) error {
		return admin.ZAdd(ctx, prefix+name, redis.Z{Score: float64(time.Now().Add(time.Minute).UnixMilli()), Member: "hello world"}).Err()
	},
}

func TestAdoptHoldersForceRelease(t *testing.T) { adopttest.Run(t, subject) }

// The contract suite on Adopt, Holder(s) and ForceRelease.
func TestAdoptContract(t *testing.T) {
	adopttest.Contract(t, adopttest.Names{
		Primitive: "semaphore",
		AcquireOp: hooks.SemaphoreAcquire,
		AdoptOp:   hooks.SemaphoreAdopt,
		ReadOp:    hooks.SemaphoreRead,
		ForceOp:   hooks.SemaphoreForceRelease,
		New:       subject.New, KeysOf: subject.Keys, Expect: subject.Expect,
	})
}

// An adopted permit has its N; Holders lists every holder with its
// permits; a permit without expiry (written by hand) is listed with the
// largest Remaining and cannot be adopted.
func TestAdoptPermits(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		s1, _ := semaphore.New(b.Coordinator(t), "permits", 5)
		s2, _ := semaphore.New(b.Coordinator(t), "permits", 5)
		p1, err := s1.TryAcquireN(ctx, 3, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		p2, err := s1.TryAcquire(ctx, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		hs, err := s2.Holders(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(hs) != 2 || hs[0].Token != p2.Token() || hs[0].Permits != 1 || hs[1].Token != p1.Token() || hs[1].Permits != 3 ||
			hs[0].Remaining > 30*time.Second || hs[0].Remaining < 25*time.Second {
			t.Fatalf("Holders = %+v, want p2 (1 permit, 30s) then p1 (3 permits)", hs)
		}
		a, err := s2.Adopt(ctx, p1.Token())
		if err != nil {
			t.Fatal(err)
		}
		if a.N() != 3 {
			t.Fatalf("adopted N = %d, want 3", a.N())
		}
		if out, err := a.Release(ctx); err != nil || out != coordination.Released {
			t.Fatalf("adopted Release = %v, %v", out, err)
		}
		st, err := s2.State(ctx)
		if err != nil || st.Used != 1 {
			t.Fatalf("State after the adopted release = %+v, %v; want 1 used", st, err)
		}
		if _, err := p2.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// A permit without expiry (written by hand) is listed with the largest
// Remaining and cannot be adopted (ErrBadState); a forced release removes
// it and frees its permits.
func TestAdoptPermitWithoutExpiry(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		s, _ := semaphore.New(b.Coordinator(t), "forever", 2)
		p, err := s.TryAcquireN(ctx, 2, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		testharness.PermitWithoutExpiry(t, b.Admin(t), b.Key("forever"), fmt.Sprintf("P:2:%s", p.Token()))
		hs, err := s.Holders(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(hs) != 1 || hs[0].Remaining != time.Duration(math.MaxInt64) || hs[0].Permits != 2 {
			t.Fatalf("Holders = %+v, want the permit without expiry", hs)
		}
		if _, err := s.Adopt(ctx, p.Token()); !errors.Is(err, coordination.ErrBadState) {
			t.Fatalf("Adopt of a permit without expiry = %v, want ErrBadState", err)
		}
		if ok, err := s.ForceRelease(ctx, p.Token()); err != nil || !ok {
			t.Fatalf("ForceRelease = %v, %v", ok, err)
		}
		if _, err := s.TryAcquireN(ctx, 2, time.Minute); err != nil {
			t.Fatalf("TryAcquireN(2) after the forced release: %v", err)
		}
	})
}
