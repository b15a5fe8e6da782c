package fencing_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/fencing"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/fencingcore"
	"github.com/coordkit/coordination/internal/slot"
	"github.com/coordkit/coordination/internal/testkit/contract"
	"github.com/coordkit/coordination/internal/testkit/locktest"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/lua"
)

func TestMain(m *testing.M) { testharness.Main(m) }

func leaseKey(name string) string { return name + ":lease" }
func fenceKey(name string) string { return name + ":fence" }

func TestFencingLockConformance(t *testing.T) {
	locktest.Run(t, locktest.Subject{
		Primitive: "fencing",
		AcquireOp: hooks.FencedLockAcquire, RenewOp: hooks.FencedLockRenew, VerifyOp: hooks.FencedLockVerify, ReleaseOp: hooks.FencedLockRelease,
		AcquireSHA: fencingcore.Acquire.Hash(), RefreshSHA: fencingcore.Refresh.Hash(),
		// The lease key and the shared counter hash of its slot (the test
		// prefix has no braces, so the hash's name after the prefix depends
		// on the name's hash tag alone); the fence key names a field there.
		Keys: func(name string) []string {
			return []string{leaseKey(name), fencingcore.SharedKeyOf("", fenceKey(name))}
		},
		Metrics: []string{"coordination.lock.contention", "coordination.lock.hold_time", "coordination.lock.acquire_wait"},
		Acquire: func(ctx context.Context, c *coordination.Coordinator, name string, ttl time.Duration, block bool) (locktest.Handle, error) {
			m, err := fencing.New(c, leaseKey(name), fenceKey(name))
			if err != nil {
				return nil, err
			}
			var l *fencing.Lock
			if block {
				l, err = m.Acquire(ctx, ttl)
			} else {
				l, err = m.TryAcquire(ctx, ttl)
			}
			if l == nil {
				return nil, err
			}
			return l, err
		},
		LeaseKey: leaseKey,
		BadInputs: []contract.BadInput{
			{Arg: "leaseKey", Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := fencing.New(c, "", "{x}:fence")
				return err
			}},
			{Arg: "fenceKey", Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := fencing.New(c, "{x}:lease", "")
				return err
			}},
			{Arg: "fenceKey", Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := fencing.New(c, "{x}:same", "{x}:same")
				return err
			}},
			{Arg: "coord", Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := fencing.New(nil, "{x}:lease", "{x}:fence")
				return err
			}},
			{Arg: "holder", Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := fencing.New(c, "{x}:lease", "{x}:fence", fencing.WithHolder(strings.Repeat("h", check.MaxIdentityBytes+1)))
				return err
			}},
			{Arg: "mutex", Op: hooks.FencedLockAcquire, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := new(fencing.Mutex).TryAcquire(ctx, time.Second)
				return err
			}},
			{Arg: "key", Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := fencing.NewGuarded(c, "")
				return err
			}},
			{Arg: "token", Op: hooks.FencedWrite, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				g, err := fencing.NewGuarded(c, "{x}:doc")
				if err != nil {
					return err
				}
				_, _, err = g.Set(ctx, 0, nil, 0)
				return err
			}},
			{Arg: "ttl", Op: hooks.FencedWrite, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				g, err := fencing.NewGuarded(c, "{x}:doc")
				if err != nil {
					return err
				}
				_, _, err = g.Set(ctx, 1, nil, -time.Second)
				return err
			}},
			{Arg: "coord", Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := fencing.NewGuarded(nil, "{x}:doc")
				return err
			}},
			{Arg: "guarded", Op: hooks.FencedRead, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, _, _, err := new(fencing.Guarded).Get(ctx)
				return err
			}},
		},
	})
}

func must[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return v
	}
}

func TestTokensIncreaseAndRefreshKeepsToken(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		m := must(fencing.New(b.Coordinator(t), "{r}:lease", "{r}:fence"))(t)
		var last int64
		for i := range 5 {
			l := must(m.TryAcquire(ctx, time.Minute))(t)
			if got := l.FencingToken(); got != int64(i+1) || got <= last {
				t.Fatalf("acquisition %d: token %d, want %d", i+1, got, i+1)
			}
			last = l.FencingToken()
			if ok := must(l.Refresh(ctx, time.Minute))(t); !ok || l.FencingToken() != last {
				t.Fatalf("refresh changed the token or failed: %v %d", ok, l.FencingToken())
			}
			if v := must(b.Client(t).HGet(ctx, b.Key("{r}:lease"), "fence").Result())(t); v != strconv.FormatInt(last, 10) {
				t.Fatalf("lease stores fence %s, want %d", v, last)
			}
			must(l.Release(ctx))(t)
		}
		if v := must(counterOf(ctx, b.Client(t), b, "{r}:fence").Result())(t); v != "5" {
			t.Fatalf("counter = %s, want 5 (it survives releases)", v)
		}
	})
}

func TestExactTokensAbove2To53(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		must(raw.Set(ctx, b.Key("{big}:fence"), "9007199254740993", 0).Result())(t)
		m := must(fencing.New(b.Coordinator(t), "{big}:lease", "{big}:fence"))(t)
		l := must(m.TryAcquire(ctx, time.Minute))(t)
		if got := l.FencingToken(); got != 9007199254740994 {
			t.Fatalf("token %d, want 9007199254740994", got)
		}
		must(l.Release(ctx))(t)
		// The first acquisition folded the earlier layout's counter key in
		// (the counter is now a field of the slot's shared hash): set the
		// field itself near the maximum.
		if v := must(raw.Get(ctx, b.Key("{big}:fence")).Result())(t); v != "moved" {
			t.Fatalf("the earlier layout's counter key holds %q after the fold, want the tombstone \"moved\"", v)
		}
		hash, field := sharedOf(b, "{big}:fence")
		must(raw.HSet(ctx, hash, field, "9223372036854775806").Result())(t)
		l = must(m.TryAcquire(ctx, time.Minute))(t)
		if got := l.FencingToken(); got != 9223372036854775807 {
			t.Fatalf("token %d, want 9223372036854775807", got)
		}
		must(l.Release(ctx))(t)
		// The counter is now at the int64 maximum: the next acquisition fails
		// without creating a lease.
		_, err := m.TryAcquire(ctx, time.Minute)
		if !errors.Is(err, coordination.ErrBadState) || !strings.Contains(err.Error(), "9223372036854775807") {
			t.Fatalf("overflow: %v, want ErrBadState naming the counter at the maximum", err)
		}
		if n := must(raw.Exists(ctx, b.Key("{big}:lease")).Result())(t); n != 0 {
			t.Fatal("overflow created a lease")
		}
		if v := must(counterOf(ctx, raw, b, "{big}:fence").Result())(t); v != "9223372036854775807" {
			t.Fatalf("overflow changed the counter to %s", v)
		}
	})
}

func TestBadCounterFailsBeforeWriting(t *testing.T) {
	cases := []struct {
		name  string
		setup func(ctx context.Context, c redis.UniversalClient, key string) error
		want  error
	}{
		{"ttl", func(ctx context.Context, c redis.UniversalClient, k string) error {
			return c.Set(ctx, k, "7", time.Hour).Err()
		}, coordination.ErrBadState},
		{"non-integer", func(ctx context.Context, c redis.UniversalClient, k string) error {
			return c.Set(ctx, k, "seven", 0).Err()
		}, coordination.ErrBadState},
		{"decimal", func(ctx context.Context, c redis.UniversalClient, k string) error {
			return c.Set(ctx, k, "1.5", 0).Err()
		}, coordination.ErrBadState},
		{"leading-zero", func(ctx context.Context, c redis.UniversalClient, k string) error {
			return c.Set(ctx, k, "007", 0).Err()
		}, coordination.ErrBadState},
		{"negative", func(ctx context.Context, c redis.UniversalClient, k string) error {
			return c.Set(ctx, k, "-3", 0).Err()
		}, coordination.ErrBadState},
		{"beyond-int64", func(ctx context.Context, c redis.UniversalClient, k string) error {
			return c.Set(ctx, k, "9223372036854775808", 0).Err()
		}, coordination.ErrBadState},
		{"overflow", func(ctx context.Context, c redis.UniversalClient, k string) error {
			return c.Set(ctx, k, "9223372036854775807", 0).Err()
		}, coordination.ErrBadState},
		{"wrong-type", func(ctx context.Context, c redis.UniversalClient, k string) error { return c.RPush(ctx, k, "1").Err() }, coordination.ErrBadState},
	}
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		for _, tc := range cases {
			lk, fk := "{"+tc.name+"}:lease", "{"+tc.name+"}:fence"
			if err := tc.setup(ctx, raw, b.Key(fk)); err != nil {
				t.Fatal(err)
			}
			before := snapshot(ctx, t, raw, b.Key(fk))
			_, err := must(fencing.New(b.Coordinator(t), lk, fk))(t).TryAcquire(ctx, time.Minute)
			if !errors.Is(err, tc.want) || engine.Classify(err) != engine.Terminal {
				t.Errorf("%s: %v, want terminal %v", tc.name, err, tc.want)
			}
			if n := must(raw.Exists(ctx, b.Key(lk)).Result())(t); n != 0 {
				t.Errorf("%s: a lease was created", tc.name)
			}
			if after := snapshot(ctx, t, raw, b.Key(fk)); after != before {
				t.Errorf("%s: the counter was changed", tc.name)
			}
		}
		// A lease key of the wrong type fails too, writing nothing.
		must(raw.Set(ctx, b.Key("{wl}:lease"), "x", 0).Result())(t)
		if _, err := must(fencing.New(b.Coordinator(t), "{wl}:lease", "{wl}:fence"))(t).TryAcquire(ctx, time.Minute); !errors.Is(err, coordination.ErrBadState) {
			t.Errorf("lease of wrong type: %v", err)
		}
		if n := must(raw.Exists(ctx, b.Key("{wl}:fence")).Result())(t); n != 0 {
			t.Error("the counter was created although the lease key is of the wrong type")
		}
	})
}

func TestCrossSlotAndSameKey(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Client(t)
		k := testharness.CountCommands(raw)
		coord := must(coordination.New(raw, coordination.WithKeyPrefix(b.Prefix())))(t)
		// Client-side check, on every backend: nothing is sent.
		_, err := fencing.New(coord, "{a}:lease", "{b}:fence")
		if !errors.Is(err, coordination.ErrInvalidArgument) {
			t.Fatalf("cross-slot pair: %v, want ErrInvalidArgument (cross-slot)", err)
		}
		if _, err := fencing.New(coord, "same", "same"); !errors.Is(err, coordination.ErrInvalidArgument) {
			t.Fatalf("same key twice: %v", err)
		}
		if k.Count() != 0 {
			t.Fatalf("rejected pairs sent %v", k.Names())
		}
		// A prefix with a hash tag puts every key in one slot: no error.
		// (It is not the test prefix the least-privilege user may use.)
		tagged := must(coordination.New(b.Admin(t), coordination.WithKeyPrefix("{"+b.Prefix()+"}")))(t)
		l := must(must(fencing.New(tagged, "{a}:lease", "{b}:fence"))(t).TryAcquire(ctx, time.Minute))(t)
		must(l.Release(ctx))(t)

		// The script itself refuses the same key twice.
		token, _ := engine.NewToken()
		e, _ := engine.Of(coord)
		_, err = fencingcore.Acquire.Run(ctx, e, must(e.NamedKeys(nil, "{s}:k", "{s}:k"))(t), token, 1000)
		if !errors.Is(err, coordination.ErrInvalidArgument) {
			t.Fatalf("script with the same key twice: %v", err)
		}
		if n := must(raw.Exists(ctx, b.Key("{s}:k")).Result())(t); n != 0 {
			t.Fatal("the script wrote with the same key twice")
		}
		if b.IsCluster() {
			// The server refuses a cross-slot script too (our client check
			// bypassed by running the script on a node directly).
			cc := raw.(*redis.ClusterClient)
			src := must(fs.ReadFile(lua.FS(), "fencing_acquire.lua"))(t)
			lk, fk := b.Key("{a}:lease2"), b.Key("{b}:fence2")
			err := cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
				e := n.Eval(ctx, string(src), []string{lk, fk}, token, 1000).Err()
				if e == nil {
					return errors.New("a primary accepted a cross-slot script")
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if n := must(raw.Exists(ctx, lk).Result())(t) + must(raw.Exists(ctx, fk).Result())(t); n != 0 {
				t.Fatal("a cross-slot script wrote something")
			}
		}
	})
}

// go-redis re-sends a command after a lost reply: the same owner token must
// yield one lease and one fencing token, with the counter moved once.
func TestReSentAcquireDrawsOneToken(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		e := must(engine.Of(b.Coordinator(t)))(t)
		token, _ := engine.NewToken()
		keys := must(fencingcore.Keys(e, nil, "{rs}:lease", "{rs}:fence"))(t)
		var fences []string
		for range 2 {
			g := must(fencingcore.Acquire.Run(ctx, e, keys, token, 60000))(t)
			if !g.Acquired {
				t.Fatalf("reply %+v, want acquired", g)
			}
			fences = append(fences, g.Value)
		}
		if fences[0] != "1" || fences[1] != "1" {
			t.Fatalf("fences %v, want the same token 1 twice", fences)
		}
		if v := must(counterOf(ctx, b.Client(t), b, "{rs}:fence").Result())(t); v != "1" {
			t.Fatalf("counter = %s, want 1", v)
		}
	})
}

func TestGuardedSetRejectsStaleTokens(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		c := b.Coordinator(t)
		doc := must(fencing.NewGuarded(c, "{g}:doc"))(t)
		steps := []struct {
			token   int64
			value   string
			ok      bool
			current int64
		}{
			{5, "five", true, 5},
			{4, "four", false, 5},
			{5, "five again", true, 5},
			{10, "ten", true, 10}, // longer decimal string than 5 and 9
			{9, "nine", false, 10},
			{9223372036854775806, "max-1", true, 9223372036854775806},
			{9223372036854775807, "\x00bin\xff", true, 9223372036854775807},
			{9223372036854775806, "late", false, 9223372036854775807},
		}
		for i, s := range steps {
			ok, cur := must2(doc.Set(ctx, s.token, []byte(s.value), 0))(t)
			if ok != s.ok || cur != s.current {
				t.Fatalf("step %d token %d: ok=%v current=%d, want %v %d", i, s.token, ok, cur, s.ok, s.current)
			}
		}
		v, tok, found, err := doc.Get(ctx)
		if err != nil || !found || tok != 9223372036854775807 || string(v) != "\x00bin\xff" {
			t.Fatalf("Get = %q %d %v %v", v, tok, found, err)
		}
		if _, _, found, err := must(fencing.NewGuarded(c, "{g}:none"))(t).Get(ctx); found || err != nil {
			t.Fatalf("missing resource: found=%v err=%v", found, err)
		}
		// TTL: a resource written with a TTL expires.
		must2(must(fencing.NewGuarded(c, "{g}:ttl"))(t).Set(ctx, 1, []byte("x"), 100*time.Millisecond))(t)
		if ms := must(b.Client(t).PTTL(ctx, b.Key("{g}:ttl")).Result())(t); ms <= 0 || ms > 100*time.Millisecond {
			t.Fatalf("PTTL = %v, want (0, 100ms]", ms)
		}
	})
}

func must2[A, B any](a A, b B, err error) func(*testing.T) (A, B) {
	return func(t *testing.T) (A, B) {
		t.Helper()
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return a, b
	}
}

// The scenario fencing exists for: a holder pauses past its lease, a
// successor takes over and writes, and the old holder's late write is
// rejected by the resource.
func TestPausedHolderIsFencedOff(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		a := must(must(fencing.New(b.Coordinator(t), "{p}:lease", "{p}:fence"))(t).TryAcquire(ctx, 80*time.Millisecond))(t)
		b.Advance(150 * time.Millisecond) // A is paused (GC, VM) past its lease
		succ := must(must(fencing.New(b.Coordinator(t), "{p}:lease", "{p}:fence"))(t).TryAcquire(ctx, time.Minute))(t)
		if succ.FencingToken() <= a.FencingToken() {
			t.Fatalf("successor token %d <= old token %d", succ.FencingToken(), a.FencingToken())
		}
		if ok, _ := must2(must(fencing.NewGuarded(b.Coordinator(t), "{p}:doc"))(t).Set(ctx, succ.FencingToken(), []byte("new"), 0))(t); !ok {
			t.Fatal("successor's write rejected")
		}
		ok, cur := must2(must(fencing.NewGuarded(b.Coordinator(t), "{p}:doc"))(t).Set(ctx, a.FencingToken(), []byte("stale"), 0))(t)
		if ok || cur != succ.FencingToken() {
			t.Fatalf("stale write: ok=%v current=%d, want rejected with %d", ok, cur, succ.FencingToken())
		}
		v, _, _, _ := must(fencing.NewGuarded(b.Coordinator(t), "{p}:doc"))(t).Get(ctx)
		if string(v) != "new" {
			t.Fatalf("resource = %q, want the successor's write", v)
		}
		must(succ.Release(ctx))(t)
	})
}

// Concurrent acquirers get distinct, strictly increasing tokens and never
// hold at once.
func TestConcurrentTokensStrictlyIncrease(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		// Bounded: a blocking Acquire waits as long as its context allows,
		// and a server that dies mid-test would otherwise hang the run
		// (CI at de89236: valkey8 died, the test waited 18 minutes).
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var (
			mu     sync.Mutex
			tokens []int64
			held   int
		)
		var wg sync.WaitGroup
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				m, err := fencing.New(b.Coordinator(t), "{ct}:lease", "{ct}:fence")
				if err != nil {
					t.Error(err)
					return
				}
				for range 5 {
					l, err := m.Acquire(ctx, 5*time.Second)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					held++
					if held != 1 {
						t.Errorf("%d holders at once", held)
					}
					tokens = append(tokens, l.FencingToken())
					held--
					mu.Unlock()
					if _, err := l.Release(ctx); err != nil {
						t.Error(err)
					}
				}
			}()
		}
		wg.Wait()
		for i := 1; i < len(tokens); i++ {
			if tokens[i] <= tokens[i-1] {
				t.Fatalf("tokens not strictly increasing in acquisition order: %v", tokens)
			}
		}
		if len(tokens) != 30 || tokens[len(tokens)-1] != 30 {
			t.Fatalf("got %d tokens ending at %d, want 30 ending at 30", len(tokens), tokens[len(tokens)-1])
		}
	})
}

// snapshot describes a key's type, value and whether it has a TTL.
func snapshot(ctx context.Context, t *testing.T, c redis.UniversalClient, key string) string {
	t.Helper()
	typ := must(c.Type(ctx, key).Result())(t)
	ttl := must(c.PTTL(ctx, key).Result())(t) > 0
	var v any
	switch typ {
	case "string":
		v = must(c.Get(ctx, key).Result())(t)
	case "list":
		v = must(c.LRange(ctx, key, 0, -1).Result())(t)
	}
	return fmt.Sprintf("%s %v ttl=%v", typ, v, ttl)
}

// WithHolder stores a holder description in the lease, in the acquiring
// script; without it the lease has only owner and fence.
func TestWithHolderStoresHolder(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		l := must(must(fencing.New(b.Coordinator(t), "{h}:lease", "{h}:fence", fencing.WithHolder("worker \x00 7")))(t).TryAcquire(ctx, time.Minute))(t)
		got := must(raw.HGetAll(ctx, b.Key("{h}:lease")).Result())(t)
		if got["holder"] != "worker \x00 7" || got["fence"] != "1" || got["owner"] != l.Token() || len(got) != 3 {
			t.Fatalf("lease = %q, want owner, fence 1 and holder", got)
		}
		must(l.Release(ctx))(t)
		l = must(must(fencing.New(b.Coordinator(t), "{h}:lease", "{h}:fence", fencing.WithHolder("")))(t).TryAcquire(ctx, time.Minute))(t)
		if fields := must(raw.HKeys(ctx, b.Key("{h}:lease")).Result())(t); len(fields) != 2 {
			t.Fatalf("lease fields %v, want owner and fence only", fields)
		}
		must(l.Release(ctx))(t)
	})
}

// Guarded writes refuse keys they did not write, without changing them, and
// errors never carry the stored value.
func TestGuardedSetRefusesForeignKeys(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		c := b.Coordinator(t)
		secret := "secret-" + strings.Repeat("z", 100000)
		must(raw.HSet(ctx, b.Key("{f}:user"), "name", "alice", "email", "a@x").Result())(t)
		must(raw.HSet(ctx, b.Key("{f}:badfence"), "fence", "abc", "value", secret).Result())(t)
		must(raw.HSet(ctx, b.Key("{f}:negative"), "fence", "-3", "value", secret).Result())(t)
		must(raw.HSet(ctx, b.Key("{f}:zero"), "fence", "0", "value", "v").Result())(t)
		must(raw.HSet(ctx, b.Key("{f}:extra"), "fence", "5", "value", "v", "other", "x").Result())(t)
		for _, k := range []string{"{f}:user", "{f}:badfence", "{f}:negative", "{f}:zero", "{f}:extra"} {
			before := must(raw.HGetAll(ctx, b.Key(k)).Result())(t)
			g := must(fencing.NewGuarded(c, k))(t)
			_, _, err := g.Set(ctx, 9, []byte("x"), 0)
			if !errors.Is(err, coordination.ErrBadState) {
				t.Errorf("Set on %s: %v, want ErrBadState", k, err)
			}
			_, _, _, err = g.Get(ctx)
			if !errors.Is(err, coordination.ErrBadState) {
				t.Errorf("Get on %s: %v, want ErrBadState", k, err)
			}
			if err != nil && (len(err.Error()) > 200 || strings.Contains(err.Error(), "secret")) {
				t.Errorf("Get error on %s carries the stored value (%d bytes)", k, len(err.Error()))
			}
			if after := must(raw.HGetAll(ctx, b.Key(k)).Result())(t); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Errorf("%s changed: %v -> %v", k, before, after)
			}
		}
	})
}

// New and NewGuarded send nothing; one Mutex is reusable after a release
// and safe for concurrent use (one of many concurrent TryAcquires wins),
// and its accessors give the keys as passed.
func TestMutexAndGuardedAreReusableValues(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Client(t)
		k := testharness.CountCommands(raw)
		coord := must(coordination.New(raw, coordination.WithKeyPrefix(b.Prefix())))(t)
		m := must(fencing.New(coord, "{v}:lease", "{v}:fence", fencing.WithHolder("w")))(t)
		g := must(fencing.NewGuarded(coord, "{v}:doc"))(t)
		if k.Count() != 0 {
			t.Fatalf("New and NewGuarded sent %v", k.Names())
		}
		if m.LeaseKey() != "{v}:lease" || m.FenceKey() != "{v}:fence" || g.Key() != "{v}:doc" {
			t.Fatalf("keys %q %q %q", m.LeaseKey(), m.FenceKey(), g.Key())
		}
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			won  []*fencing.Lock
			lost int
		)
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l, err := m.TryAcquire(ctx, time.Minute)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					won = append(won, l)
				case errors.Is(err, coordination.ErrNotAcquired):
					lost++
				default:
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if len(won) != 1 || lost != 7 {
			t.Fatalf("%d won, %d refused; want 1 and 7", len(won), lost)
		}
		if won[0].Key() != "{v}:lease" || won[0].FencingToken() != 1 {
			t.Fatalf("lock key %q token %d", won[0].Key(), won[0].FencingToken())
		}
		if ok, _ := must2(g.Set(ctx, won[0].FencingToken(), []byte("one"), 0))(t); !ok {
			t.Fatal("holder's write rejected")
		}
		must(won[0].Release(ctx))(t)
		again := must(m.TryAcquire(ctx, time.Minute))(t)
		if again.FencingToken() != 2 {
			t.Fatalf("second acquisition token %d, want 2", again.FencingToken())
		}
		if ok, cur := must2(g.Set(ctx, won[0].FencingToken(), []byte("stale"), 0))(t); !ok || cur != 1 {
			// Nothing newer was written yet: token 1 is still the newest.
			t.Fatalf("write with token 1: ok=%v current=%d", ok, cur)
		}
		must2(g.Set(ctx, again.FencingToken(), []byte("two"), 0))(t)
		if ok, cur := must2(g.Set(ctx, won[0].FencingToken(), []byte("stale"), 0))(t); ok || cur != 2 {
			t.Fatalf("stale write: ok=%v current=%d, want rejected with 2", ok, cur)
		}
		must(again.Release(ctx))(t)
	})
}

// A contended attempt marks the lease (a '+' after the owner token) so
// that its release notifies waiters; an uncontended lease is released
// without a notification. The holder refreshes, verifies and releases its
// marked lease as its own.
func TestReleaseNotifiesOnlyMarkedLeases(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		coord := b.Coordinator(t)
		m := must(fencing.New(coord, "{n}:lease", "{n}:fence"))(t)
		// The release channel: sharded where the server has it (every
		// server but miniredis), else classic; the key has a hash tag, so
		// both are named alike.
		ch, _ := slot.Channels(b.Key("{n}:lease"), "")
		var sub *redis.PubSub
		if b.IsMini() {
			sub = raw.Subscribe(ctx, ch)
		} else {
			sub = raw.SSubscribe(ctx, ch)
		}
		defer sub.Close()
		must(sub.Receive(ctx))(t) // the subscription's confirmation
		msgs := sub.Channel()
		notified := func(wait time.Duration) bool {
			select {
			case <-msgs:
				return true
			case <-time.After(wait):
				return false
			}
		}
		l := must(m.TryAcquire(ctx, time.Minute))(t)
		if out := must(l.Release(ctx))(t); out != coordination.Released {
			t.Fatalf("Release = %v, want Released", out)
		}
		if notified(200 * time.Millisecond) {
			t.Error("an unmarked release sent a notification, want none")
		}
		l = must(m.TryAcquire(ctx, time.Minute))(t)
		if _, err := m.TryAcquire(ctx, time.Minute); !errors.Is(err, coordination.ErrNotAcquired) {
			t.Fatalf("contended TryAcquire: %v, want ErrNotAcquired", err)
		}
		if o := must(raw.HGet(ctx, b.Key("{n}:lease"), "owner").Result())(t); o != l.Token()+"+" {
			t.Fatalf("owner after a contended attempt = %q, want the token marked with '+'", o)
		}
		if ok := must(l.Verify(ctx))(t); !ok {
			t.Error("Verify of a marked lease = false, want true")
		}
		if ok := must(l.Refresh(ctx, time.Minute))(t); !ok {
			t.Error("Refresh of a marked lease = false, want true")
		}
		if _, err := m.TryAcquire(ctx, time.Minute); !errors.Is(err, coordination.ErrNotAcquired) {
			t.Fatalf("second contended TryAcquire: %v, want ErrNotAcquired", err)
		}
		if o := must(raw.HGet(ctx, b.Key("{n}:lease"), "owner").Result())(t); o != l.Token()+"+" {
			t.Fatalf("owner after two contended attempts = %q, want one mark", o)
		}
		if out := must(l.Release(ctx))(t); out != coordination.Released {
			t.Fatalf("Release of a marked lease = %v, want Released", out)
		}
		if !notified(5 * time.Second) {
			t.Error("a marked release sent no notification")
		}
		if n := must(raw.Exists(ctx, b.Key("{n}:lease")).Result())(t); n != 0 {
			t.Errorf("the released lease key is still there")
		}
	})
}
