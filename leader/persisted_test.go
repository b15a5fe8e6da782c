package leader_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/leader"
)

// A term whose lease hash has no TTL (PERSISTed, or RESTOREd without one)
// would never end: a contender's Run returns ErrBadState at once instead
// of campaigning until its context ends with a nil error, and the lease
// is left unchanged.
func TestCampaignAgainstALeaseWithoutTTLIsBadState(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		lk, fk := b.Key("{pl}:lease"), b.Key("{pl}:fence")
		if err := raw.HSet(ctx, lk, "owner", "0e0c1a5e-7d5c-4a2a-9c1e-2b6f3a4d5e6f", "fence", "1", "holder", "node-a").Err(); err != nil {
			t.Fatal(err)
		}
		if err := raw.Set(ctx, fk, "1", 0).Err(); err != nil {
			t.Fatal(err)
		}
		el, err := leader.New(b.Coordinator(t), "{pl}:lease", "{pl}:fence", "node-b", leader.WithRetryDelay(10*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		err = el.Run(rctx)
		if !errors.Is(err, coordination.ErrBadState) || rctx.Err() != nil {
			t.Fatalf("Run: %v (ctx %v), want ErrBadState at once", err, rctx.Err())
		}
		if h, err := raw.HGetAll(ctx, lk).Result(); err != nil || h["holder"] != "node-a" || h["fence"] != "1" {
			t.Fatalf("the lease changed: %v (%v)", h, err)
		}
		if ttl := raw.PTTL(ctx, lk).Val(); ttl != -1 {
			t.Fatalf("the lease's TTL changed: %v", ttl)
		}
	})
}

// Reading the leader of a lease hash without a TTL (PERSISTed, or RESTOREd
// without one) is ErrBadState naming the operation and the key, as the
// campaign's is: such a leader would never leave, and an Info with TTL 0
// would read as "about to be replaced". Observe, which reads the same way,
// ends with that error too. Nothing is written.
func TestReadingALeaseWithoutTTLIsBadState(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		lk := b.Key("{pr}:lease")
		if err := raw.HSet(ctx, lk, "owner", "0e0c1a5e-7d5c-4a2a-9c1e-2b6f3a4d5e6f", "fence", "4", "holder", "node-a").Err(); err != nil {
			t.Fatal(err)
		}
		coord := b.Coordinator(t)
		const want = `coordination: leader read "{pr}:lease": lease hash has no TTL: its holder would never leave (COORD_BADSTATE)`
		info, err := leader.Get(ctx, coord, "{pr}:lease")
		if !errors.Is(err, coordination.ErrBadState) || err.Error() != want || info != (leader.Info{}) {
			t.Fatalf("Get = %+v, %v; want the zero Info and %q", info, err, want)
		}
		el, err := leader.New(coord, "{pr}:lease", "{pr}:fence", "node-b")
		if err != nil {
			t.Fatal(err)
		}
		if info, err := el.Leader(ctx); !errors.Is(err, coordination.ErrBadState) || err.Error() != want || info != (leader.Info{}) {
			t.Fatalf("Leader = %+v, %v; want the zero Info and %q", info, err, want)
		}
		octx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		calls := 0
		err = leader.Observe(octx, coord, "{pr}:lease", 10*time.Millisecond, func(leader.Info) { calls++ })
		if !errors.Is(err, coordination.ErrBadState) || err.Error() != want || calls != 0 || octx.Err() != nil {
			t.Fatalf("Observe = %v after %d calls (ctx %v); want %q at once", err, calls, octx.Err(), want)
		}
		if h, err := raw.HGetAll(ctx, lk).Result(); err != nil || len(h) != 3 || h["holder"] != "node-a" || h["fence"] != "4" {
			t.Fatalf("the lease changed: %v (%v)", h, err)
		}
		if ttl := raw.PTTL(ctx, lk).Val(); ttl != -1 {
			t.Fatalf("the lease's TTL changed: %v", ttl)
		}
		if n := raw.Exists(ctx, b.Key("{pr}:fence")).Val(); n != 0 {
			t.Fatalf("the fence key was written")
		}
		if err := counterOf(ctx, raw, b.Prefix(), b.Key("{pr}:fence")).Err(); !errors.Is(err, redis.Nil) {
			t.Fatalf("the fence counter was written (%v)", err)
		}
	})
}
