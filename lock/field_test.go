package lock_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/contract"
	"github.com/coordkit/coordination/internal/testkit/faultproxy"
	"github.com/coordkit/coordination/internal/testkit/locktest"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/lock"
)

// must returns v, failing the test when err is not nil: must(f())(t).
func must[T any](v T, err error) func(t testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return v
	}
}

// The lock-shaped suite (and the contract suite) on one field of a hash, on
// every server with hash-field expiration (the cluster included: one key,
// no hash tag needed).
func TestFieldLease(t *testing.T) {
	locktest.Run(t, locktest.Subject{
		Primitive: "lock",
		AcquireOp: hooks.LeaseAcquire, RenewOp: hooks.LeaseRenew, VerifyOp: hooks.LeaseVerify, ReleaseOp: hooks.LeaseRelease,
		AcquireSHA: lock.FieldAcquire.Hash(), RefreshSHA: lock.FieldRefresh.Hash(),
		Metrics: []string{"coordination.lock.contention", "coordination.lock.hold_time", "coordination.lock.acquire_wait"},
		Acquire: func(ctx context.Context, c *coordination.Coordinator, name string, ttl time.Duration, block bool) (locktest.Handle, error) {
			s, err := lock.NewFieldSet(c, name)
			if err != nil {
				return nil, err
			}
			var l *lock.FieldLease
			if block {
				l, err = s.Acquire(ctx, "f\x00é", ttl)
			} else {
				l, err = s.TryAcquire(ctx, "f\x00é", ttl)
			}
			if l == nil {
				return nil, err
			}
			return l, err
		},
		LeaseKey: func(name string) string { return name },
		BadInputs: []contract.BadInput{
			{Arg: "key", Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := lock.NewFieldSet(c, "")
				return err
			}},
			{Arg: "key", Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := lock.NewFieldSet(c, strings.Repeat("k", check.MaxKeyBytes+1))
				return err
			}},
			{Arg: "field", Op: hooks.LeaseAcquire, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := tryAcquireField(ctx, c, "h", "", time.Second)
				return err
			}},
			{Arg: "field", Op: hooks.LeaseAcquire, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := acquireField(ctx, c, "h", "", time.Second)
				return err
			}},
			{Arg: "field", Op: hooks.LeaseAcquire, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := tryAcquireField(ctx, c, "h", strings.Repeat("f", check.MaxKeyBytes+1), time.Second)
				return err
			}},
			{Arg: "ttl", Op: hooks.LeaseAcquire, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := tryAcquireField(ctx, c, "h", "f", 999*time.Microsecond)
				return err
			}},
			{Arg: "ttl", Op: hooks.LeaseAcquire, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := acquireField(ctx, c, "h", "f", -time.Second)
				return err
			}},
			{Arg: "coord", Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := lock.NewFieldSet(nil, "h")
				return err
			}},
			{Arg: "fieldSet", Op: hooks.LeaseAcquire, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				var s *lock.FieldSet
				_, err := s.TryAcquire(ctx, "f", time.Second)
				return err
			}},
			{Arg: "fieldSet", Op: hooks.LeaseAcquire, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := new(lock.FieldSet).Acquire(ctx, "f", time.Second)
				return err
			}},
		},
		Backends: []testharness.Option{testharness.HashFieldTTLOnly()},
	})
}

// fieldState is what the server holds for one field: its value (empty when
// absent) and HPTTL (-2 absent, -1 no expiry).
func fieldState(t testing.TB, raw redis.UniversalClient, key, field string) (string, int64) {
	t.Helper()
	ctx := context.Background()
	v, err := raw.HGet(ctx, key, field).Result()
	if errors.Is(err, redis.Nil) {
		v, err = "", nil
	}
	if err != nil {
		t.Fatalf("HGET: %v", err)
	}
	ttl, err := raw.Do(ctx, "HPTTL", key, "FIELDS", 1, field).Int64Slice()
	if err != nil || len(ttl) != 1 {
		t.Fatalf("HPTTL: %v %v", ttl, err)
	}
	return v, ttl[0]
}

// wantField fails unless field holds value with an expiry in (0, ttl].
func wantField(t testing.TB, raw redis.UniversalClient, key, field, value string, ttl time.Duration, what string) {
	t.Helper()
	v, ms := fieldState(t, raw, key, field)
	if v != value || ms <= 0 || ms > ttl.Milliseconds() {
		t.Fatalf("%s: field %q holds %q with HPTTL %d ms; want %q with a TTL in (0, %d]", what, field, v, ms, value, ttl.Milliseconds())
	}
}

// Two owners, one field: one holds it; a second field of the same hash is
// independent (taken, refreshed, released without touching the first).
func TestFieldLeasesOneHolderPerFieldAndIndependentFields(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw, key := b.Raw(t), b.Key("shards")
		a := must(tryAcquireField(ctx, b.Coordinator(t), "shards", "s1", time.Minute))(t)
		other := b.Coordinator(t)
		if _, err := tryAcquireField(ctx, other, "shards", "s1", time.Minute); !errors.Is(err, coordination.ErrNotAcquired) {
			t.Fatalf("second owner of s1: %v, want ErrNotAcquired", err)
		}
		c := must(tryAcquireField(ctx, other, "shards", "s2", 30*time.Second))(t)
		wantField(t, raw, key, "s1", a.Token(), time.Minute, "s1 after s2 was taken")
		wantField(t, raw, key, "s2", c.Token(), 30*time.Second, "s2")
		if ok := must(c.Refresh(ctx, 2*time.Minute))(t); !ok {
			t.Fatal("Refresh of s2 = false")
		}
		wantField(t, raw, key, "s1", a.Token(), time.Minute, "s1 after s2 was refreshed")
		if out := must(c.Release(ctx))(t); out != coordination.Released {
			t.Fatalf("Release s2 = %v", out)
		}
		wantField(t, raw, key, "s1", a.Token(), time.Minute, "s1 after s2 was released")
		if v, ms := fieldState(t, raw, key, "s2"); v != "" || ms != -2 {
			t.Fatalf("s2 after release: %q, %d", v, ms)
		}
		if ok := must(a.Verify(ctx))(t); !ok {
			t.Fatal("the holder of s1 lost it")
		}
		if out := must(a.Release(ctx))(t); out != coordination.Released {
			t.Fatalf("Release s1 = %v", out)
		}
		if n := must(raw.Exists(ctx, key).Result())(t); n != 0 {
			t.Fatal("the hash outlived its last field")
		}
	}, testharness.HashFieldTTLOnly())
}

// An expired field is free again, and taking it over touches no other
// field; the old owner can neither renew nor release its successor's field
// (at the script level too, below the handle's local deadline).
func TestExpiredFieldIsFreeAndOldOwnerCannotTouchSuccessor(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw, key := b.Raw(t), b.Key("jobs")
		old := must(tryAcquireField(ctx, b.Coordinator(t), "jobs", "j1", 80*time.Millisecond))(t)
		keeper := must(tryAcquireField(ctx, b.Coordinator(t), "jobs", "j2", time.Minute))(t)
		_, before := fieldState(t, raw, key, "j2")
		time.Sleep(150 * time.Millisecond)
		if v, ms := fieldState(t, raw, key, "j1"); v != "" || ms != -2 {
			t.Fatalf("j1 after its TTL: %q, HPTTL %d; want gone", v, ms)
		}
		next := must(tryAcquireField(ctx, b.Coordinator(t), "jobs", "j1", time.Minute))(t)
		v, after := fieldState(t, raw, key, "j2")
		if v != keeper.Token() || after > before || after < before-5000 {
			t.Fatalf("j2 changed when j1 was taken over: %q, HPTTL %d -> %d", v, before, after)
		}

		// The handle: locally expired, it refuses to renew; its release
		// reaches Redis and finds another owner.
		if ok := must(old.Refresh(ctx, time.Hour))(t); ok {
			t.Fatal("the expired owner's Refresh = true")
		}
		if out := must(old.Release(ctx))(t); out != coordination.NotOwned {
			t.Fatalf("the expired owner's Release = %v, want NotOwned", out)
		}
		// The scripts themselves, with the old token.
		e := must(engine.Of(b.Coordinator(t)))(t)
		k := e.Key("jobs")
		if ok := must(lock.FieldRefresh.Run(ctx, e, k, "j1", old.Token(), 3_600_000))(t); ok {
			t.Fatal("lease_refresh with the old token = 1")
		}
		if out := must(lock.FieldRelease.Run(ctx, e, k, "j1", old.Token()))(t); out != decode.NotOwned {
			t.Fatalf("lease_release with the old token = %v, want NotOwned", out)
		}
		wantField(t, raw, key, "j1", next.Token(), time.Minute, "the successor's j1")
		if ok := must(next.Verify(ctx))(t); !ok {
			t.Fatal("the successor lost j1")
		}
		must(next.Release(ctx))(t)
		must(keeper.Release(ctx))(t)
	}, testharness.HashFieldTTLOnly())
}

// Every path that writes a field leaves it with an expiry: acquire (new
// and re-sent), Refresh, keep-alive renewals, and writes to other fields.
// Real servers drop a field's TTL when HSET rewrites it, which the first
// step shows, so the assertions would catch a script that rewrote it.
func TestFieldTTLSurvivesEveryWritePath(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw, key := b.Raw(t), b.Key("ttl")
		// What the scripts avoid: HSET on a field with a TTL drops it.
		must(raw.HSet(ctx, b.Key("scratch"), "f", "v").Result())(t)
		must(raw.Do(ctx, "HPEXPIRE", b.Key("scratch"), 60000, "FIELDS", 1, "f").Result())(t)
		must(raw.HSet(ctx, b.Key("scratch"), "f", "v2").Result())(t)
		if _, ms := fieldState(t, raw, b.Key("scratch"), "f"); ms != -1 {
			t.Fatalf("HPTTL after HSET = %d; this server keeps a field's TTL on HSET, the test proves less", ms)
		}

		coord := b.Coordinator(t)
		l := must(tryAcquireField(ctx, coord, "ttl", "f", 30*time.Second))(t)
		wantField(t, raw, key, "f", l.Token(), 30*time.Second, "after acquire")

		e := must(engine.Of(coord))(t)
		g := must(lock.FieldAcquire.Run(ctx, e, e.Key("ttl"), "f", l.Token(), 40_000))(t)
		if !g.Acquired {
			t.Fatalf("re-sent acquire: %+v", g)
		}
		wantField(t, raw, key, "f", l.Token(), 40*time.Second, "after a re-sent acquire")
		if _, ms := fieldState(t, raw, key, "f"); ms <= 30_000 {
			t.Fatalf("the re-sent acquire did not set the expiry again: HPTTL %d", ms)
		}

		if ok := must(l.Refresh(ctx, 50*time.Second))(t); !ok {
			t.Fatal("Refresh = false")
		}
		wantField(t, raw, key, "f", l.Token(), 50*time.Second, "after Refresh")

		other := must(tryAcquireField(ctx, coord, "ttl", "g", time.Minute))(t)
		wantField(t, raw, key, "f", l.Token(), 50*time.Second, "after another field was taken")
		must(other.Release(ctx))(t)
		wantField(t, raw, key, "f", l.Token(), 50*time.Second, "after another field was released")
		must(l.Release(ctx))(t)

		// Keep-alive renewals: a 3 s lease renewed every second (TTL/3), so
		// a renewal may be 2 s late. Right after each of three renewals the
		// field holds the token with a TTL in (0, 3 s] and its expiry moved
		// forward (HPEXPIRETIME grows): the renewal rewrote it.
		type renewal struct {
			value     string
			ttl, at   int64
			readError error
		}
		var (
			mu       sync.Mutex
			renewals []renewal
		)
		kc := b.Client(t)
		kc.AddHook(&cmdHook{after: func(cmd redis.Cmder) {
			if !testharness.RunsScript(cmd, lock.FieldRefresh.Hash()) || cmd.Err() != nil {
				return
			}
			rctx := context.Background()
			v, err := raw.HGet(rctx, key, "k").Result()
			var ttl, at []int64
			if err == nil {
				ttl, err = raw.Do(rctx, "HPTTL", key, "FIELDS", 1, "k").Int64Slice()
			}
			if err == nil {
				at, err = raw.Do(rctx, "HPEXPIRETIME", key, "FIELDS", 1, "k").Int64Slice()
			}
			r := renewal{value: v, readError: err}
			if err == nil {
				r.ttl, r.at = ttl[0], at[0]
			}
			mu.Lock()
			renewals = append(renewals, r)
			mu.Unlock()
		}})
		kcoord := coordinatorOf(t, b, kc)
		const keepTTL = 3 * time.Second
		k := must(tryAcquireField(ctx, kcoord, "ttl", "k", keepTTL))(t)
		at := must(raw.Do(ctx, "HPEXPIRETIME", key, "FIELDS", 1, "k").Int64Slice())(t)[0]
		k.KeepAlive()
		for deadline := time.Now().Add(15 * time.Second); ; {
			mu.Lock()
			n := len(renewals)
			mu.Unlock()
			if n >= 3 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d keep-alive renewals in 15 s, want 3", n)
			}
			if k.Context().Err() != nil {
				t.Fatalf("kept-alive lease lost after %d renewals: %v", n, context.Cause(k.Context()))
			}
			time.Sleep(10 * time.Millisecond)
		}
		mu.Lock()
		got := slices.Clone(renewals[:3])
		mu.Unlock()
		for i, r := range got {
			if r.readError != nil {
				t.Fatalf("after renewal %d: %v", i+1, r.readError)
			}
			if r.value != k.Token() || r.ttl <= 0 || r.ttl > keepTTL.Milliseconds() {
				t.Fatalf("after renewal %d: field \"k\" holds %q with HPTTL %d ms; want %q with a TTL in (0, %d]", i+1, r.value, r.ttl, k.Token(), keepTTL.Milliseconds())
			}
			if r.at <= at {
				t.Fatalf("after renewal %d: the field expires at %d ms, not after %d as before it: the renewal did not move its expiry", i+1, r.at, at)
			}
			at = r.at
		}
		if k.Context().Err() != nil {
			t.Fatalf("kept-alive lease lost: %v", context.Cause(k.Context()))
		}
		must(k.Release(ctx))(t)
	}, testharness.HashFieldTTLOnly())
}

// A hash with a key-level TTL (which would end every lease in it) and a key
// of another type are refused, and left as they were.
func TestFieldLeaseRefusesKeyTTLAndOtherTypes(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		coord := b.Coordinator(t)

		key := b.Key("expiring")
		must(raw.HSet(ctx, key, "other", "x").Result())(t)
		must(raw.PExpire(ctx, key, time.Hour).Result())(t)
		for _, block := range []bool{false, true} {
			var err error
			if block {
				_, err = acquireField(ctx, coord, "expiring", "f", time.Minute)
			} else {
				_, err = tryAcquireField(ctx, coord, "expiring", "f", time.Minute)
			}
			if !errors.Is(err, coordination.ErrBadState) || engine.Classify(err) != engine.Terminal ||
				!strings.Contains(err.Error(), "key-level TTL") {
				t.Fatalf("acquire (block %v) in a hash with a key TTL: %v, want a terminal ErrBadState naming the key-level TTL", block, err)
			}
		}
		if m := must(raw.HGetAll(ctx, key).Result())(t); len(m) != 1 || m["other"] != "x" {
			t.Fatalf("the hash changed: %v", m)
		}
		if ms := must(raw.PTTL(ctx, key).Result())(t); ms <= 59*time.Minute {
			t.Fatalf("the hash's TTL changed: %v", ms)
		}

		// A key TTL added while a lease is held: Refresh refuses, changing
		// nothing.
		l := must(tryAcquireField(ctx, coord, "later", "f", time.Minute))(t)
		must(raw.PExpire(ctx, b.Key("later"), time.Hour).Result())(t)
		if _, err := l.Refresh(ctx, 2*time.Minute); !errors.Is(err, coordination.ErrBadState) {
			t.Fatalf("Refresh after a key TTL was set: %v, want ErrBadState", err)
		}
		wantField(t, raw, b.Key("later"), "f", l.Token(), time.Minute, "after the refused Refresh")
		must(l.Release(ctx))(t)

		// Other types.
		must(raw.Set(ctx, b.Key("str"), "v", 0).Result())(t)
		must(raw.RPush(ctx, b.Key("list"), "a").Result())(t)
		must(raw.ZAdd(ctx, b.Key("zset"), redis.Z{Score: 1, Member: "m"}).Result())(t)
		for _, k := range []string{"str", "list", "zset"} {
			if _, err := tryAcquireField(ctx, coord, k, "f", time.Minute); !errors.Is(err, coordination.ErrBadState) ||
				engine.Classify(err) != engine.Terminal {
				t.Fatalf("acquire on a %s: %v, want a terminal ErrBadState (wrong type)", k, err)
			}
		}
		if v := must(raw.Get(ctx, b.Key("str")).Result())(t); v != "v" {
			t.Fatalf("string changed: %q", v)
		}
		if v := must(raw.LRange(ctx, b.Key("list"), 0, -1).Result())(t); len(v) != 1 || v[0] != "a" {
			t.Fatalf("list changed: %v", v)
		}
		if v := must(raw.ZRangeWithScores(ctx, b.Key("zset"), 0, -1).Result())(t); len(v) != 1 || v[0].Member != "m" {
			t.Fatalf("zset changed: %v", v)
		}
	}, testharness.HashFieldTTLOnly())
}

// On servers without hash-field expiration (Redis 7.0, Valkey 8.1,
// miniredis) the first operation fails before writing anything, with
// ErrUnsupportedServer naming the feature and the versions that have it;
// on the others the same calls work.
func TestFieldLeaseUnsupportedServer(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		coord := b.Coordinator(t)
		must(raw.HSet(ctx, b.Key("existing"), "other", "x").Result())(t)
		if b.HasHashFieldTTL() {
			for _, k := range []string{"fresh", "existing"} {
				l := must(tryAcquireField(ctx, coord, k, "f", time.Minute))(t)
				must(l.Release(ctx))(t)
			}
			return
		}
		for _, k := range []string{"fresh", "existing"} {
			for _, block := range []bool{false, true} {
				start := time.Now()
				var err error
				if block {
					_, err = acquireField(ctx, coord, k, "f", time.Minute)
				} else {
					_, err = tryAcquireField(ctx, coord, k, "f", time.Minute)
				}
				if !errors.Is(err, coordination.ErrUnsupportedServer) || engine.Classify(err) != engine.Terminal ||
					coordination.IsAmbiguous(err) {
					t.Fatalf("%s (block %v) on %s: %v, want a terminal, unambiguous ErrUnsupportedServer", k, block, b.Name, err)
				}
				for _, want := range []string{"hash field expiration", "Redis 7.4", "Valkey 9.0"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not name %q", err, want)
					}
				}
				if d := time.Since(start); d > time.Second {
					t.Errorf("the blocking acquire took %v to report it", d)
				}
			}
		}
		if n := must(raw.Exists(ctx, b.Key("fresh")).Result())(t); n != 0 {
			t.Fatal("something was written at a fresh key")
		}
		if m := must(raw.HGetAll(ctx, b.Key("existing")).Result())(t); len(m) != 1 || m["other"] != "x" {
			t.Fatalf("the existing hash changed: %v", m)
		}
		// Nothing was left for a background cleanup either (the error was
		// not ambiguous).
		e := must(engine.Of(coord))(t)
		if n := e.Cleanups(); n != 0 {
			t.Fatalf("%d background cleanups after an unsupported server's refusal", n)
		}
	})
}

// A script re-sent with the same arguments (go-redis re-sends after a
// lost reply) gives one lease: the re-sent acquire reports acquired and
// sets the same field; a re-sent refresh reports true once more. A release
// re-sent after the first one deleted the field reports AlreadyReleased
// (documented): the field is released either way.
func TestFieldLeaseReSentScripts(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw, key := b.Raw(t), b.Key("rs")
		e := must(engine.Of(b.Coordinator(t)))(t)
		k := e.Key("rs")
		token, _ := engine.NewToken()
		for i := range 2 {
			if g := must(lock.FieldAcquire.Run(ctx, e, k, "f", token, 60000))(t); !g.Acquired {
				t.Fatalf("send %d of the acquire: %+v, want acquired", i+1, g)
			}
		}
		wantField(t, raw, key, "f", token, time.Minute, "after two sends")
		if n := must(raw.HLen(ctx, key).Result())(t); n != 1 {
			t.Fatalf("HLEN = %d, want one lease", n)
		}
		for i := range 2 {
			if ok := must(lock.FieldRefresh.Run(ctx, e, k, "f", token, 60000))(t); !ok {
				t.Fatalf("send %d of the refresh = false", i+1)
			}
		}
		other, _ := engine.NewToken()
		if g := must(lock.FieldAcquire.Run(ctx, e, k, "f", other, 60000))(t); g.Acquired || g.RetryIn <= 0 || g.RetryIn > time.Minute {
			t.Fatalf("another token: %+v, want held with the holder's TTL", g)
		}
		if out := must(lock.FieldRelease.Run(ctx, e, k, "f", token))(t); out != decode.Released {
			t.Fatalf("release = %v", out)
		}
		if out := must(lock.FieldRelease.Run(ctx, e, k, "f", token))(t); out != decode.AlreadyReleased {
			t.Fatalf("re-sent release = %v, want AlreadyReleased", out)
		}
	}, testharness.HashFieldTTLOnly())
}

// The same through go-redis' own re-send: the proxy drops the acquire's
// reply after the server ran it, go-redis re-sends, and the caller gets
// the one lease the first send took.
func TestFieldLeaseLostReplyReSent(t *testing.T) {
	for _, flavor := range []string{"redis8", "valkey9"} {
		t.Run(flavor, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			srv := testharness.Get(t, flavor).Server
			p := faultproxy.Start(t, srv.Addr)
			opt := srv.Options()
			opt.Addr = p.Addr()
			rdb := redis.NewClient(opt)
			defer rdb.Close()
			coord := must(coordination.New(rdb, coordination.WithKeyPrefix("rs:"+flavor+":")))(t)
			direct := redis.NewClient(srv.Options())
			defer direct.Close()
			defer direct.Del(ctx, "rs:"+flavor+":h")
			e := must(engine.Of(coord))(t)
			if err := lock.FieldAcquire.Load(ctx, e); err != nil { // one EVALSHA per send
				t.Fatal(err)
			}

			lost := p.Apply(faultproxy.DropReply(faultproxy.ScriptSHA(lock.FieldAcquire.Hash()), 1))
			l := must(tryAcquireField(ctx, coord, "h", "f", time.Minute))(t)
			if lost.Fired() != 1 || p.Stats().Commands["EVALSHA"] != 2 {
				t.Fatalf("the reply was not lost and re-sent: fired %d, EVALSHA %d", lost.Fired(), p.Stats().Commands["EVALSHA"])
			}
			wantField(t, direct, "rs:"+flavor+":h", "f", l.Token(), time.Minute, "after a re-sent acquire")
			if n := must(direct.HLen(ctx, "rs:"+flavor+":h").Result())(t); n != 1 {
				t.Fatalf("HLEN = %d", n)
			}
			if ok := must(l.Verify(ctx))(t); !ok {
				t.Fatal("Verify = false after a re-sent acquire")
			}
			if out := must(l.Release(ctx))(t); out != coordination.Released {
				t.Fatalf("Release = %v", out)
			}
		})
	}
}

// A waiter on one field is woken by that field's release, not by releases
// of other fields of the same hash (its channel is its own): it sends no
// command while other fields come and go.
func TestFieldWaiterWakesOnlyForItsField(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		holder := must(tryAcquireField(ctx, b.Coordinator(t), "w", "mine", time.Minute))(t)
		client := b.Client(t)
		coord := must(coordination.New(client, coordination.WithKeyPrefix(b.Prefix())))(t)
		counter := testharness.CountCommands(client)
		attempts := &attemptLog{}
		client.AddHook(attempts)
		got := make(chan *lock.FieldLease, 1)
		go func() {
			l, err := acquireField(ctx, coord, "w", "mine", time.Minute)
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		// Subscribed, retried, asleep: its attempt after subscribing has
		// been answered.
		attempts.waitReturned(t, 2, "the waiter")
		before := counter.Count()
		others := b.Coordinator(t)
		for range 5 {
			l := must(tryAcquireField(ctx, others, "w", "other", time.Minute))(t)
			must(l.Release(ctx))(t)
		}
		time.Sleep(100 * time.Millisecond) // room for a wrong wake-up to show
		if n := counter.Count() - before; n != 0 {
			t.Fatalf("the waiter sent %d commands while other fields were released (%v)", n, counter.Names())
		}
		must(holder.Release(ctx))(t)
		select {
		case l := <-got:
			if l != nil {
				must(l.Release(ctx))(t)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the waiter did not get its field after the release")
		}
		// Woken by its field's release: one more attempt, sent less than
		// the 5 s re-check after the previous one came back.
		s := attempts.spans()
		if len(s) != 3 {
			t.Fatalf("the waiter made %d acquire attempts, want 3 (refused, refused after subscribing, woken by the release)", len(s))
		}
		if gap := s[2].sent.Sub(s[1].returned); gap >= engine.DefaultRecheck {
			t.Errorf("the waiter's attempt after its field's release came %v after its previous one: its re-check, not the release's notification", gap)
		}
	}, testharness.HashFieldTTLOnly())
}
