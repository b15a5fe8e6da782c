package ratelimit

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// A key without an expiry (PERSIST, or RESTORE without a TTL) gets back
// the one its state calls for on every path that reads it: a probe, a
// refusal, a grant, a re-sent grant; for concurrency also a release. A
// state that is over (a fixed window past its end) goes.
func TestEveryPathRestoresTheExpiry(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		const d = 10 * time.Second
		// The longest a key of each kind (capacity 3, time scale d) may
		// live: a window (plus a segment), a refill of 3 periods, a burst
		// of 3 intervals, a lease.
		bound := map[kind]time.Duration{kFixed: d, kSliding: d + d/4, kBucket: 3 * d, kGCRA: 3 * d, kComp: 3 * d, kConc: d}
		for _, k := range every {
			t.Run(string(k), func(t *testing.T) {
				key := "persist:" + string(k)
				full := b.Key(key)
				l := build(t, b.Coordinator(t), k, key, 3, d)
				persist := func() {
					t.Helper()
					if ok, err := raw.Persist(ctx, full).Result(); err != nil || !ok {
						t.Fatalf("PERSIST: %v %v", ok, err)
					}
				}
				check := func(path string) {
					t.Helper()
					ttl, err := raw.PTTL(ctx, full).Result()
					if err != nil {
						t.Fatal(err)
					}
					if ttl <= 0 || ttl > bound[k]+time.Millisecond { // expiries round up to whole ms
						t.Fatalf("after a %s on a persisted key: PTTL %v, want in (0, %v]", path, ttl, bound[k])
					}
				}
				first := acquire(t, l, 1)
				if !first.Acquired() {
					t.Fatal("not acquired")
				}
				persist()
				acquire(t, l, 0)
				check("probe")
				persist()
				if !acquire(t, l, 1).Acquired() {
					t.Fatal("not acquired")
				}
				check("grant")
				persist()
				acquire(t, l, 1) // the third permit
				check("grant")
				persist()
				if acquire(t, l, 1).Acquired() {
					t.Fatal("a fourth permit was granted")
				}
				check("refusal")
				if k == kConc {
					persist()
					if err := first.Release(ctx); err != nil {
						t.Fatal(err)
					}
					check("release")
					return
				}
			})
		}
		// A fixed window persisted past its end: the next read deletes it
		// (its state is over) instead of keeping it forever.
		l := build(t, b.Coordinator(t), kFixed, "persist:ended", 1, time.Minute)
		acquire(t, l, 1)
		persistPastEnd(t, b, raw, b.Key("persist:ended"))
		if p := acquire(t, l, 0); !p.Acquired() || p.Available() != 1 {
			t.Fatalf("probe after the window: acquired=%v available=%d, want a full new window", p.Acquired(), p.Available())
		}
		if n, _ := raw.Exists(ctx, b.Key("persist:ended")).Result(); n != 0 {
			ttl, _ := raw.PTTL(ctx, b.Key("persist:ended")).Result()
			t.Fatalf("an ended window's key is still there after a probe (PTTL %v)", ttl)
		}
	})
}

// persistPastEnd leaves a fixed window's key as an operator's PERSIST
// leaves it once the window's end has passed: without an expiry, its end
// in the past. (The key is written so, the window's end set a second
// before the server's clock, rather than PERSISTed and then waited past
// its end: that PERSIST had to reach the server inside the window, which
// a stall of the test or the server longer than the window defeats.)
func persistPastEnd(t testing.TB, b *testharness.Backend, raw redis.UniversalClient, key string) {
	t.Helper()
	ctx := context.Background()
	v, err := raw.Get(ctx, key).Result()
	if err != nil {
		t.Fatalf("GET the window: %v", err)
	}
	f := strings.SplitN(v, "|", 3) // cfg, end (server ms), the rest
	if len(f) != 3 {
		t.Fatalf("a fixed window stored as %q", v)
	}
	now := serverClock(t, b).now()
	past := now.Add(-time.Second).UnixMilli()
	if end, err := strconv.ParseInt(f[1], 10, 64); err != nil || end <= past {
		t.Fatalf("the window's end %q, want one after %d", f[1], past)
	}
	if err := raw.Set(ctx, key, f[0]+"|"+strconv.FormatInt(past, 10)+"|"+f[2], 0).Err(); err != nil {
		t.Fatal(err)
	}
	if ttl, err := raw.PTTL(ctx, key).Result(); err != nil || ttl != -1 {
		t.Fatalf("PTTL %v %v after SET, want none (-1)", ttl, err)
	}
}

// The fixed window's documented edge: a grant inside a window trusts the
// key's expiry (it reads no clock), so on a key PERSISTed past its
// window's end the next grant is counted in the old window, whose key
// that grant's write deletes; the grant after it finds a new window
// without it. A probe or a refusal reads the clock and sees the window
// over (TestEveryPathRestoresTheExpiry).
func TestFixedWindowGrantTrustsTheExpiry(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		key := "persist:trust"
		l := build(t, b.Coordinator(t), kFixed, key, 3, time.Minute)
		if !acquire(t, l, 1).Acquired() {
			t.Fatal("not acquired")
		}
		persistPastEnd(t, b, raw, b.Key(key))
		if g := acquire(t, l, 1); !g.Acquired() || g.Available() != 1 {
			t.Fatalf("grant on the persisted key: acquired=%v available=%d, want granted in the old window (1 left)", g.Acquired(), g.Available())
		}
		if n, _ := raw.Exists(ctx, b.Key(key)).Result(); n != 0 {
			t.Fatal("the old window's key is still there after the grant's write")
		}
		if g := acquire(t, l, 1); !g.Acquired() || g.Available() != 2 {
			t.Fatalf("the next grant: acquired=%v available=%d, want a new window holding only it (2 left)", g.Acquired(), g.Available())
		}
	})
}
