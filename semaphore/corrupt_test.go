package semaphore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/semaphore"
)

// Garbage in the semaphore's sorted set makes every operation return
// ErrBadState (or ErrConfigMismatch for the capacity, an answer), never a panic.
func TestSemaphoreCorruptedStateIsTyped(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		testharness.CorruptionTest(t, b, func(t *testing.T, coord *coordination.Coordinator) []testharness.CorruptOp {
			s, err := semaphore.New(coord, "pool", 3)
			if err != nil {
				t.Fatal(err)
			}
			p, err := s.TryAcquireN(context.Background(), 2, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			return []testharness.CorruptOp{
				{Name: "Refresh", Fn: func(ctx context.Context) error { _, err := p.Refresh(ctx, time.Minute); return err }},
				{Name: "Verify", Fn: func(ctx context.Context) error { _, err := p.Verify(ctx); return err }},
				{Name: "TryAcquire", Fn: func(ctx context.Context) error { _, err := s.TryAcquire(ctx, time.Minute); return err }},
				{Name: "TryAcquireN", Fn: func(ctx context.Context) error { _, err := s.TryAcquireN(ctx, 3, time.Minute); return err }},
				{Name: "State", Fn: func(ctx context.Context) error { _, err := s.State(ctx); return err }},
				{Name: "Release", Fn: func(ctx context.Context) error { _, err := p.Release(ctx); return err }},
			}
		}, nil)
	})
}

// A live member that is not a permit ("P:<n>:<token>") is counted as one
// permit by an acquisition and refused by State, on every server's Lua
// (miniredis' tonumber(nil) raised before the scripts guarded it).
func TestSemaphoreForeignMember(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord := b.Coordinator(t)
		s, err := semaphore.New(coord, "pool", 2)
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.TryAcquire(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		raw := b.Client(t)
		if err := raw.ZAdd(ctx, b.Key("pool"), redis.Z{Score: float64(time.Now().Add(time.Hour).UnixMilli()), Member: "foreign"}).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.TryAcquire(ctx, time.Minute); !errors.Is(err, coordination.ErrNotAcquired) {
			t.Fatalf("TryAcquire with 1 permit + 1 foreign member of 2: %v, want ErrNotAcquired", err)
		}
		if _, err := s.State(ctx); !errors.Is(err, coordination.ErrBadState) {
			t.Fatalf("State: %v, want ErrBadState", err)
		}
		if _, err := s.TryAcquireN(ctx, 0, time.Minute); err == nil {
			t.Fatal("TryAcquireN(0) succeeded")
		}
		if out, err := p.Release(ctx); err != nil || out != coordination.Released {
			t.Fatal(out, err)
		}
	})
}
