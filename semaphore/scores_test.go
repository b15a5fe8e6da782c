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

// scoreVerbs are the verbs every record check applies to: each reads the
// records first.
var scoreVerbs = []struct {
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

// A record outside the semaphore's layout (a "multi" record above 0, a
// capacity that is no capacity) makes every verb refuse with ErrBadState
// before it writes anything: the key is left exactly as it was.
func TestSemaphoreRecordsOutsideLayout(t *testing.T) {
	cases := []struct {
		name string
		z    func(nowMs float64) redis.Z
	}{
		{"multi above 0", func(now float64) redis.Z { return redis.Z{Score: now + 3600e3, Member: "multi"} }},
		{"waiting at -inf", func(float64) redis.Z { return redis.Z{Score: math.Inf(-1), Member: "waiting"} }},
		{"capacity 1e300", func(float64) redis.Z { return redis.Z{Score: -1e300, Member: "capacity"} }},
		{"capacity 2.5", func(float64) redis.Z { return redis.Z{Score: -2.5, Member: "capacity"} }},
		{"capacity 2^53", func(float64) redis.Z { return redis.Z{Score: -(1 << 53), Member: "capacity"} }},
	}
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		s := newSem(t, b.Coordinator(t), 3)
		for _, c := range cases {
			for _, v := range scoreVerbs {
				p := corrupted(t, b, s, func(now float64) []redis.Z { return []redis.Z{c.z(now)} })
				before := snapshot(t, b, raw)
				err := v.fn(ctx, s, p)
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

// corrupted starts the semaphore key afresh with one permit of 1 minute
// (returned) and adds the members zs gives for the server's time in ms.
func corrupted(t *testing.T, b *testharness.Backend, s *semaphore.Semaphore, zs func(nowMs float64) []redis.Z) *semaphore.Permit {
	t.Helper()
	ctx := context.Background()
	raw := b.Raw(t)
	if err := raw.Del(ctx, b.Key(key)).Err(); err != nil {
		t.Fatal(err)
	}
	p := mustAcquireN(t, s, 1, time.Minute)
	now, err := raw.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.ZAdd(ctx, b.Key(key), zs(float64(now.UnixMilli()))...).Err(); err != nil {
		t.Fatal(err)
	}
	return p
}

// A permit's score outside the layout (an expiry past any TTL, not a
// whole millisecond, or below 0) is refused with ErrBadState, nothing
// written, by the verb that goes by it: a release or a shortening refresh
// of the permit the key expires with reads the highest other permit (the
// key's next TTL); an acquisition on a key left without a TTL reads the
// highest (its TTL is set from the latest permit); a refusal reads the
// earliest live one (the retry time). Before the check, an acquisition
// next to a permit scored 1e300 on such a key added its member and then
// failed on PEXPIREAT with a raw "value is not an integer" script error.
// The verbs that do not read that score work as on a sound key and leave
// it as it was: checking every score would cost every call two more
// commands.
func TestSemaphoreScoresOutsideLayout(t *testing.T) {
	foreign := "P:1:0f0e0d0c-0b0a-4909-8807-060504030201"
	longest := float64(math.MaxInt64 / int64(time.Millisecond))
	type score struct {
		name string
		at   func(nowMs float64) float64
	}
	// Above the test's permit (1 minute), below it, and as the only live
	// permit.
	above := []score{
		{"1e300", func(float64) float64 { return 1e300 }},
		{"1e17", func(float64) float64 { return 1e17 }},
		{"1e16", func(float64) float64 { return 1e16 }},
		{"past the longest ttl", func(now float64) float64 { return now + longest + 3600e3 }},
		{"half a ms", func(now float64) float64 { return now + 120e3 + 0.5 }},
	}
	below := []score{
		{"half a ms", func(now float64) float64 { return now + 30e3 + 0.5 }},
		{"-0.5", func(float64) float64 { return -0.5 }},
	}
	only := append(above[:4:4], score{"half a ms", func(now float64) float64 { return now + 1e3 + 0.5 }})
	with := func(sc score) func(float64) []redis.Z {
		return func(now float64) []redis.Z { return []redis.Z{{Score: sc.at(now), Member: foreign}} }
	}
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		full := b.Key(key)
		s := newSem(t, b.Coordinator(t), 3)
		refused := func(name string, fn func() error) {
			t.Helper()
			before := snapshot(t, b, raw)
			if err := fn(); !errors.Is(err, coordination.ErrBadState) {
				t.Errorf("%s: %v, want ErrBadState", name, err)
			}
			if after := snapshot(t, b, raw); after != before {
				t.Errorf("%s wrote:\n before %s\n after  %s", name, before, after)
			}
		}
		for _, sc := range append(below, above...) {
			p := corrupted(t, b, s, with(sc))
			refused(sc.name+" below, Release", func() error { _, err := p.Release(ctx); return err })
			p = corrupted(t, b, s, with(sc)) // a release that failed ends the handle
			refused(sc.name+" below, shortening Refresh", func() error { _, err := p.Refresh(ctx, time.Second); return err })
		}
		for _, sc := range above {
			corrupted(t, b, s, with(sc))
			if err := raw.Persist(ctx, full).Err(); err != nil {
				t.Fatal(err)
			}
			refused(sc.name+" above, TryAcquire on a key without a TTL", func() error {
				_, err := s.TryAcquire(ctx, time.Second)
				return err
			})
		}
		for _, sc := range only {
			if err := raw.Del(ctx, full).Err(); err != nil {
				t.Fatal(err)
			}
			now, err := raw.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			if err := raw.ZAdd(ctx, full, redis.Z{Score: -3, Member: "capacity"},
				redis.Z{Score: sc.at(float64(now.UnixMilli())), Member: foreign}).Err(); err != nil {
				t.Fatal(err)
			}
			if err := raw.PExpire(ctx, full, time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
			refused(sc.name+" only, refused TryAcquireN", func() error { _, err := s.TryAcquireN(ctx, 3, time.Second); return err })
		}

		// Above the test's permit, while the key expires with another
		// permit, no verb reads it.
		for _, sc := range above {
			p := corrupted(t, b, s, with(sc))
			want, err := raw.ZScore(ctx, full, foreign).Result()
			if err != nil {
				t.Fatal(err)
			}
			if ok, err := p.Verify(ctx); err != nil || !ok {
				t.Errorf("%s, Verify: %v %v", sc.name, ok, err)
			}
			if st, err := s.State(ctx); err != nil || st.Used != 2 || st.Holders != 2 {
				t.Errorf("%s, State: %+v %v", sc.name, st, err)
			}
			if _, err := p.Refresh(ctx, 2*time.Minute); err != nil {
				t.Errorf("%s, lengthening Refresh: %v", sc.name, err)
			}
			q, err := s.TryAcquire(ctx, time.Second)
			if err != nil {
				t.Errorf("%s, TryAcquire: %v", sc.name, err)
			} else if out := release(t, q); out != coordination.Released {
				t.Errorf("%s, Release of a permit the key does not expire with: %v", sc.name, out)
			}
			if got, err := raw.ZScore(ctx, full, foreign).Result(); err != nil || got != want {
				t.Errorf("%s: the foreign permit's score is %v %v, want %v", sc.name, got, err, want)
			}
			mine, err := raw.ZScore(ctx, full, memberOf(p)).Result()
			if err != nil {
				t.Fatal(err)
			}
			if at, err := raw.PExpireTime(ctx, full).Result(); err != nil || float64(at.Milliseconds()) != mine {
				t.Errorf("%s: the key expires at %v (%v), want with the refreshed permit at %v ms", sc.name, at, err, mine)
			}
		}
	})
}

// A member below 0 that is not a record is junk no verb reads: they all
// work beside it, and the release of the last permit deletes the key with
// it.
func TestSemaphoreJunkBelowTheRecords(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		s := newSem(t, b.Coordinator(t), 3)
		p := corrupted(t, b, s, func(float64) []redis.Z { return []redis.Z{{Score: -5, Member: "junk"}} })
		q := mustAcquireN(t, s, 2, time.Minute)
		if out := release(t, q); out != coordination.Released {
			t.Fatalf("Release: %v", out)
		}
		if _, err := p.Refresh(ctx, time.Second); err != nil {
			t.Fatalf("Refresh: %v", err)
		}
		if ok, err := p.Verify(ctx); err != nil || !ok {
			t.Fatalf("Verify: %v %v", ok, err)
		}
		if st, err := s.State(ctx); err != nil || st.Used != 1 || st.Holders != 1 {
			t.Fatalf("State: %+v %v", st, err)
		}
		if out := release(t, p); out != coordination.Released {
			t.Fatalf("Release: %v", out)
		}
		if n, err := raw.Exists(ctx, b.Key(key)).Result(); err != nil || n != 0 {
			t.Fatalf("the key is left after the last release: %v %v (%s)", n, err, snapshot(t, b, raw))
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

// A permit without expiry written by hand on a key that kept its TTL: the
// release of the permit the key expired with leaves the key without a TTL
// (it now expires with the permit without expiry: never), where the script
// used to give PEXPIREAT the score "inf" and fail after removing the
// member.
func TestSemaphoreReleaseNextToAPermitWithoutExpiry(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		s := newSem(t, b.Coordinator(t), 3)
		foreign := "P:1:0f0e0d0c-0b0a-4909-8807-060504030201"
		p := corrupted(t, b, s, func(float64) []redis.Z { return []redis.Z{{Score: math.Inf(1), Member: foreign}} })
		if out := release(t, p); out != coordination.Released {
			t.Fatalf("Release: %v", out)
		}
		if at, err := raw.PExpireTime(ctx, b.Key(key)).Result(); err != nil || at != -1 {
			t.Fatalf("the key's expiry: %v %v, want none", at, err)
		}
		if got := members(t, b, raw); len(got) != 1 || got[0] != foreign {
			t.Fatalf("members: %v, want the permit without expiry alone", got)
		}
	})
}
