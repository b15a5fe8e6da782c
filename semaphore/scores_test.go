package semaphore_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/semaphore"
)

// A score outside the semaphore's layout (a permit's expiry past any TTL
// or not a whole millisecond, a permit below 0, a capacity that is no
// capacity) makes every verb refuse with ErrBadState before it writes
// anything: the key is left exactly as it was. Before the check, an
// acquisition next to a permit scored 1e300 added its member and then
// failed on PEXPIREAT with a raw "value is not an integer" script error.
func TestSemaphoreScoresOutsideLayout(t *testing.T) {
	type corruption struct {
		name string
		z    func(nowMs float64) redis.Z
	}
	foreign := "P:1:0f0e0d0c-0b0a-4909-8807-060504030201"
	permit := func(score float64) func(float64) redis.Z {
		return func(float64) redis.Z { return redis.Z{Score: score, Member: foreign} }
	}
	cases := []corruption{
		{"permit 1e300", permit(1e300)},
		{"permit 1e17", permit(1e17)},
		{"permit 1e16", permit(1e16)},
		{"permit past the longest ttl", func(now float64) redis.Z {
			return redis.Z{Score: now + float64(math.MaxInt64/int64(time.Millisecond)) + 3600e3, Member: foreign}
		}},
		{"permit half a ms", func(now float64) redis.Z { return redis.Z{Score: now + 3600e3 + 0.5, Member: foreign} }},
		{"permit below 0", permit(-5)},
		{"multi above 0", func(now float64) redis.Z { return redis.Z{Score: now + 3600e3, Member: "multi"} }},
		{"capacity 1e300", func(float64) redis.Z { return redis.Z{Score: -1e300, Member: "capacity"} }},
		{"capacity 2.5", func(float64) redis.Z { return redis.Z{Score: -2.5, Member: "capacity"} }},
		{"capacity 2^53", func(float64) redis.Z { return redis.Z{Score: -(1 << 53), Member: "capacity"} }},
	}
	verbs := []struct {
		name string
		fn   func(ctx context.Context, s *semaphore.Semaphore, p *semaphore.Permit) error
	}{
		{"TryAcquire", func(ctx context.Context, s *semaphore.Semaphore, _ *semaphore.Permit) error {
			_, err := s.TryAcquire(ctx, time.Second)
			return err
		}},
		{"Refresh", func(ctx context.Context, _ *semaphore.Semaphore, p *semaphore.Permit) error {
			_, err := p.Refresh(ctx, time.Minute)
			return err
		}},
		{"Verify", func(ctx context.Context, _ *semaphore.Semaphore, p *semaphore.Permit) error {
			_, err := p.Verify(ctx)
			return err
		}},
		{"Release", func(ctx context.Context, _ *semaphore.Semaphore, p *semaphore.Permit) error {
			_, err := p.Release(ctx)
			return err
		}},
		{"State", func(ctx context.Context, s *semaphore.Semaphore, _ *semaphore.Permit) error {
			_, err := s.State(ctx)
			return err
		}},
	}
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord := b.Coordinator(t)
		raw := b.Raw(t)
		// Capacity 3: an acquisition would succeed beside the two permits.
		s := newSem(t, coord, 3)
		for _, c := range cases {
			for _, v := range verbs {
				if err := raw.Del(ctx, b.Key(key)).Err(); err != nil {
					t.Fatal(err)
				}
				p := mustAcquireN(t, s, 1, time.Minute)
				now, err := raw.Time(ctx).Result()
				if err != nil {
					t.Fatal(err)
				}
				if err := raw.ZAdd(ctx, b.Key(key), c.z(float64(now.UnixMilli()))).Err(); err != nil {
					t.Fatal(err)
				}
				before := snapshot(t, b, raw)
				err = v.fn(ctx, s, p)
				if !errors.Is(err, coordination.ErrBadState) {
					t.Errorf("%s, %s: %v, want ErrBadState", c.name, v.name, err)
				}
				if after := snapshot(t, b, raw); after != before {
					t.Errorf("%s, %s wrote:\n before %s\n after  %s", c.name, v.name, before, after)
				}
			}
		}
	})
}

// Scores at the edges of the layout stay valid: a permit of the longest
// ttl (about 292 years), a permit without expiry (+inf, a hand edit) and
// an expired one.
func TestSemaphoreScoresAtLayoutEdges(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord := b.Coordinator(t)
		raw := b.Raw(t)
		s := newSem(t, coord, 4)
		longest := check.MaxMillis // the longest ttl a lease takes
		p := mustAcquireN(t, s, 1, longest)
		if err := raw.ZAdd(ctx, b.Key(key),
			redis.Z{Score: math.Inf(1), Member: "P:1:0f0e0d0c-0b0a-4909-8807-060504030201"},
			redis.Z{Score: 1, Member: "P:1:1f0e0d0c-0b0a-4909-8807-060504030201"}).Err(); err != nil {
			t.Fatal(err)
		}
		if err := raw.Persist(ctx, b.Key(key)).Err(); err != nil {
			t.Fatal(err)
		}
		if ok, err := p.Verify(ctx); err != nil || !ok {
			t.Fatalf("Verify: %v %v", ok, err)
		}
		st, err := s.State(ctx)
		if err != nil || st.Capacity != 4 || st.Used != 2 || st.Holders != 2 {
			t.Fatalf("State: %+v %v", st, err)
		}
		q := mustAcquireN(t, s, 2, longest)
		if _, err := p.Refresh(ctx, longest); err != nil {
			t.Fatalf("Refresh: %v", err)
		}
		if out := release(t, q); out != coordination.Released {
			t.Fatalf("Release: %v", out)
		}
		if out := release(t, p); out != coordination.Released {
			t.Fatalf("Release: %v", out)
		}
	})
}
