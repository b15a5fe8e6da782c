package ratelimit_test

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
	"github.com/coordkit/coordination/ratelimit"
)

func concHandle(l *ratelimit.ConcurrencyLease, err error) (adopttest.Handle, error) {
	if err != nil {
		return nil, err
	}
	return l, nil
}

// Adopt, Holders and ForceRelease of a lease of 1 permit on a concurrency
// limiter of limit 1 (package adopttest). Each acquisition builds its
// limiter with the lease duration asked for (a limiter's leases all have
// its duration).
var concSubject = adopttest.Subject{
	New: func(t testing.TB, c *coordination.Coordinator, name string) adopttest.Ops {
		limiter := func(d time.Duration) *ratelimit.ConcurrencyLimiter {
			l, err := ratelimit.NewConcurrency(c, name, 1, ratelimit.WithLeaseDuration(d))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close() })
			return l
		}
		admin := limiter(time.Minute)
		return adopttest.Ops{
			TryAcquire: func(ctx context.Context, ttl time.Duration) (adopttest.Handle, error) {
				return concHandle(limiter(ttl).TryAcquire(ctx, 1))
			},
			Acquire: func(ctx context.Context, ttl time.Duration) (adopttest.Handle, error) {
				return concHandle(limiter(ttl).Acquire(ctx, 1))
			},
			Adopt: func(ctx context.Context, token string) (adopttest.Handle, error) {
				return concHandle(admin.Adopt(ctx, token))
			},
			Holders:      admin.Holders,
			ForceRelease: admin.ForceRelease,
		}
	},
	Keys: func(name string) []string { return []string{name} },
	Garbage: func(ctx context.Context, admin redis.UniversalClient, prefix, name string) error {
		return admin.ZAdd(ctx, prefix+name, redis.Z{Score: float64(time.Now().Add(time.Minute).UnixMilli()), Member: "hello world"}).Err()
	},
	Expect: func(h adopttest.Handle) coordination.Holder {
		return coordination.Holder{Token: h.Token(), Permits: int64(h.(*ratelimit.ConcurrencyLease).N())}
	},
}

func TestConcurrencyAdoptHoldersForceRelease(t *testing.T) { adopttest.Run(t, concSubject) }

// The contract suite on Adopt, Holders and ForceRelease.
func TestConcurrencyAdoptContract(t *testing.T) {
	adopttest.Contract(t, adopttest.Names{
		Primitive: "rate_limit",
		AcquireOp: hooks.RateLimitAcquire,
		AdoptOp:   hooks.RateLimitAdopt,
		ReadOp:    hooks.RateLimitPeek,
		ForceOp:   hooks.RateLimitForceRelease,
		New:       concSubject.New, KeysOf: concSubject.Keys, Expect: concSubject.Expect,
	})
}

// An adopted lease has its N and is not renewed until KeepAlive (the
// process that took it stopped renewing: its limiter was closed); once
// KeepAlive runs it outlives its TTL. Holders lists every lease with its
// permits and skips the tombstones of abandoned acquisitions; a local
// limiter refuses the three.
func TestConcurrencyAdoptPermits(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		first, err := ratelimit.NewConcurrency(b.Coordinator(t), "permits", 5, ratelimit.WithLeaseDuration(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		l3, err := first.TryAcquire(ctx, 3)
		if err != nil {
			t.Fatal(err)
		}
		l1, err := first.TryAcquire(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		_ = first.Close() // the first process stops renewing; the leases stay on the server

		second, err := ratelimit.NewConcurrency(b.Coordinator(t), "permits", 5, ratelimit.WithLeaseDuration(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = second.Close() })
		hs, err := second.Holders(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		for _, h := range hs {
			if h.Remaining <= 0 || h.Remaining > time.Second {
				t.Fatalf("Holder %+v: Remaining outside (0, 1s]", h)
			}
			got[h.Token] = h.Permits
		}
		if len(got) != 2 || got[l3.Token()] != 3 || got[l1.Token()] != 1 {
			t.Fatalf("Holders = %+v, want %s with 3 and %s with 1", hs, l3.Token(), l1.Token())
		}
		a, err := second.Adopt(ctx, l3.Token())
		if err != nil {
			t.Fatal(err)
		}
		if a.N() != 3 || a.Token() != l3.Token() || a.Remaining() > time.Second {
			t.Fatalf("adopted lease: N=%d token=%s remaining=%v", a.N(), a.Token(), a.Remaining())
		}
		if b.IsMini() {
			b.Mini.FastForward(2 * time.Second)
		} else {
			a.KeepAlive()
			time.Sleep(2500 * time.Millisecond)
		}
		if b.IsMini() {
			if ok, err := a.Verify(ctx); err != nil || ok {
				t.Fatalf("adopted lease without KeepAlive after its TTL: Verify = %v, %v; want false", ok, err)
			}
		} else {
			if ok, err := a.Verify(ctx); err != nil || !ok {
				t.Fatalf("adopted lease kept alive: Verify = %v, %v after 2.5 TTLs", ok, err)
			}
			hs, err := second.Holders(ctx)
			if err != nil || len(hs) != 1 || hs[0].Token != l3.Token() {
				t.Fatalf("Holders after the other lease expired = %+v, %v; want the kept-alive one", hs, err)
			}
			if out, err := a.Release(ctx); err != nil || out != coordination.Released {
				t.Fatalf("adopted Release = %v, %v", out, err)
			}
		}

		local, err := ratelimit.NewLocalConcurrency(2)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := local.Holders(ctx); !errors.Is(err, coordination.ErrInvalidArgument) {
			t.Fatalf("Holders of a local limiter = %v, want ErrInvalidArgument", err)
		}
		if _, err := local.Adopt(ctx, l1.Token()); !errors.Is(err, coordination.ErrInvalidArgument) {
			t.Fatalf("Adopt on a local limiter = %v, want ErrInvalidArgument", err)
		}
		if _, err := local.ForceRelease(ctx, l1.Token()); !errors.Is(err, coordination.ErrInvalidArgument) {
			t.Fatalf("ForceRelease on a local limiter = %v, want ErrInvalidArgument", err)
		}
	})
}

// A partitioned concurrency limiter adopts, reads and force-releases a
// partition's leases through that partition's limiter: a lease taken by
// one process (its limiter closed) is listed, adopted by its token and
// released by another process; an adopted lease keeps its partition from
// eviction; ForceRelease frees a permit for another caller at once.
func TestPartitionedConcurrencyAdopt(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord := b.Coordinator(t)
		factory := func(part string) (*ratelimit.ConcurrencyLimiter, error) {
			return ratelimit.NewConcurrency(coord, ratelimit.PartitionKey("pc", part), 1, ratelimit.WithLeaseDuration(time.Minute))
		}
		first, err := ratelimit.NewPartitionedConcurrency(factory)
		if err != nil {
			t.Fatal(err)
		}
		l, err := first.TryAcquire(ctx, "tenant-a", 1)
		if err != nil {
			t.Fatal(err)
		}
		token := l.Token()
		_ = first.Close() // the first process stops renewing; the lease stays

		second, err := ratelimit.NewPartitionedConcurrency(factory, ratelimit.WithMaxPartitions(1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = second.Close() })
		hs, err := second.Holders(ctx, "tenant-a")
		if err != nil || len(hs) != 1 || hs[0].Token != token || hs[0].Permits != 1 {
			t.Fatalf("Holders = %+v, %v; want the one lease of %s", hs, err, token)
		}
		if hs, err := second.Holders(ctx, "tenant-b"); err != nil || len(hs) != 0 {
			t.Fatalf("Holders of another partition = %+v, %v; want none", hs, err)
		}
		adopted, err := second.Adopt(ctx, "tenant-a", token)
		if err != nil {
			t.Fatal(err)
		}
		if adopted.Token() != token || adopted.N() != 1 || adopted.Remaining() <= 0 {
			t.Fatalf("adopted lease %s n=%d remaining %v", adopted.Token(), adopted.N(), adopted.Remaining())
		}
		if _, err := second.Adopt(ctx, "tenant-b", token); !errors.Is(err, coordination.ErrNotHeld) {
			t.Fatalf("Adopt in another partition = %v; want ErrNotHeld", err)
		}
		// New partitions under the cap of 1 evict idle limiters, never
		// tenant-a's, which holds the adopted lease (an evicted limiter
		// is closed, ending its leases).
		for _, part := range []string{"tenant-c", "tenant-d"} {
			if _, err := second.Holders(ctx, part); err != nil {
				t.Fatal(err)
			}
		}
		if err := context.Cause(adopted.Context()); err != nil {
			t.Fatalf("the adopted lease ended after the churn: %v", err)
		}
		if _, err := second.TryAcquire(ctx, "tenant-a", 1); !errors.Is(err, coordination.ErrNotAcquired) {
			t.Fatalf("TryAcquire while adopted = %v; want refused", err)
		}
		if ok, err := second.ForceRelease(ctx, "tenant-a", token); !ok || err != nil {
			t.Fatalf("ForceRelease = %v, %v; want true", ok, err)
		}
		l2, err := second.TryAcquire(ctx, "tenant-a", 1)
		if err != nil {
			t.Fatalf("TryAcquire after the force release = %v", err)
		}
		if _, err := l2.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
