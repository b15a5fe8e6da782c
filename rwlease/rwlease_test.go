package rwlease_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/contract"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/faultproxy"
	"github.com/coordkit/coordination/internal/locktest"
	"github.com/coordkit/coordination/internal/testharness"
	"github.com/coordkit/coordination/rwlease"
)

func TestMain(m *testing.M) { testharness.Main(m) }

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

var rwMetrics = []string{"coordination.rwlease.contention", "coordination.rwlease.hold_time", "coordination.rwlease.acquire_wait"}

// The write lease is lock-shaped: the lock suite (and the contract suite)
// runs on it.
func TestWriteLease(t *testing.T) {
	locktest.Run(t, locktest.Subject{
		Primitive: "rwlease",
		AcquireOp: hooks.RWLeaseWriteAcquire, RenewOp: hooks.RWLeaseRenew, VerifyOp: hooks.RWLeaseVerify, ReleaseOp: hooks.RWLeaseRelease,
		AcquireSHA: engine.RWLeaseAcquire.Hash(), RefreshSHA: engine.RWLeaseRefresh.Hash(),
		Metrics: rwMetrics,
		Acquire: func(ctx context.Context, c *coordination.Coordinator, name string, ttl time.Duration, block bool) (locktest.Handle, error) {
			var l *rwlease.Lease
			var err error
			if block {
				l, err = rwlease.Write(ctx, c, name, ttl)
			} else {
				l, err = rwlease.TryWrite(ctx, c, name, ttl)
			}
			if l == nil {
				return nil, err
			}
			return l, err
		},
		LeaseKey:   func(name string) string { return name },
		BadInputs:  badInputs,
		OwnEntries: true,
	})
}

var badInputs = func() []contract.BadInput {
	var out []contract.BadInput
	for _, f := range []struct {
		name string
		fn   func(context.Context, *coordination.Coordinator, string, time.Duration, ...rwlease.Option) (*rwlease.Lease, error)
	}{{"TryRead", rwlease.TryRead}, {"Read", rwlease.Read}, {"TryWrite", rwlease.TryWrite}, {"Write", rwlease.Write}} {
		out = append(out,
			contract.BadInput{Arg: "key", Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := f.fn(ctx, c, "", time.Second)
				return err
			}},
			contract.BadInput{Arg: "ttl", Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := f.fn(ctx, c, "k", 999*time.Microsecond)
				return err
			}},
			contract.BadInput{Arg: "ttl", Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := f.fn(ctx, c, "k", 0)
				return err
			}},
			contract.BadInput{Arg: "recheck", Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := f.fn(ctx, c, "k", time.Second, rwlease.WithRecheck(0))
				return err
			}},
			contract.BadInput{Arg: "coord", Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := f.fn(ctx, nil, "k", time.Second)
				return err
			}},
		)
	}
	return out
}()

// The contract suite on a scenario with readers: shared reads, a refused
// and a given-up writer, renewals, releases, a writer refusing readers.
func TestReadContract(t *testing.T) {
	contract.Run(t, contract.Spec{
		Primitive: "rwlease",
		Keys:      func(name string) []string { return []string{name} },
		BadInputs: badInputs,
		Metrics:   rwMetrics,
		Scenario: func(name string) []contract.Step {
			var r1, r2, r3, w *rwlease.Lease
			read := func(l **rwlease.Lease) func(ctx context.Context, c *coordination.Coordinator) error {
				return func(ctx context.Context, c *coordination.Coordinator) (err error) {
					*l, err = rwlease.TryRead(ctx, c, name, time.Minute)
					return err
				}
			}
			release := func(l **rwlease.Lease) func(ctx context.Context, c *coordination.Coordinator) error {
				return func(ctx context.Context, _ *coordination.Coordinator) error {
					out, err := (*l).Release(ctx)
					if err == nil {
						err = contract.Expect("Release", out, coordination.Released)
					}
					return err
				}
			}
			refused := func(err error) error {
				if !errors.Is(err, coordination.ErrNotAcquired) {
					return fmt.Errorf("want ErrNotAcquired, got %v", err)
				}
				return nil
			}
			gaveUp := func(fn func(context.Context, *coordination.Coordinator, string, time.Duration, ...rwlease.Option) (*rwlease.Lease, error)) func(ctx context.Context, c *coordination.Coordinator) error {
				return func(ctx context.Context, c *coordination.Coordinator) error {
					ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
					defer cancel()
					if _, err := fn(ctx, c, name, time.Minute); !errors.Is(err, coordination.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
						return fmt.Errorf("want ErrNotAcquired and DeadlineExceeded, got %v", err)
					}
					return nil
				}
			}
			return []contract.Step{
				{Name: "TryRead", Op: hooks.RWLeaseReadAcquire, OneCommand: true, Run: read(&r1)},
				{Name: "second TryRead", Op: hooks.RWLeaseReadAcquire, OneCommand: true, Run: read(&r2)},
				{Name: "contended TryWrite", Op: hooks.RWLeaseWriteAcquire, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
					_, err := rwlease.TryWrite(ctx, c, name, time.Minute)
					return refused(err)
				}},
				{Name: "Write giving up", Op: hooks.RWLeaseWriteAcquire, Outcome: hooks.Canceled, Run: gaveUp(rwlease.Write)},
				{Name: "TryRead after the writer gave up", Op: hooks.RWLeaseReadAcquire, OneCommand: true, Run: read(&r3)},
				{Name: "Refresh", Op: hooks.RWLeaseRenew, OneCommand: true, Run: func(ctx context.Context, _ *coordination.Coordinator) error {
					ok, err := r1.Refresh(ctx, time.Minute)
					if err == nil && !ok {
						err = errors.New("Refresh = false for a reader")
					}
					return err
				}},
				{Name: "Verify", Op: hooks.RWLeaseVerify, OneCommand: true, Run: func(ctx context.Context, _ *coordination.Coordinator) error {
					ok, err := r2.Verify(ctx)
					if err == nil && !ok {
						err = errors.New("Verify = false for a reader")
					}
					return err
				}},
				{Name: "Release 1", Op: hooks.RWLeaseRelease, OneCommand: true, Run: release(&r1)},
				{Name: "Release 2", Op: hooks.RWLeaseRelease, OneCommand: true, Run: release(&r2)},
				{Name: "Release 3", Op: hooks.RWLeaseRelease, OneCommand: true, Run: release(&r3)},
				{Name: "TryWrite", Op: hooks.RWLeaseWriteAcquire, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) (err error) {
					w, err = rwlease.TryWrite(ctx, c, name, time.Minute)
					return err
				}},
				{Name: "contended TryRead", Op: hooks.RWLeaseReadAcquire, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
					_, err := rwlease.TryRead(ctx, c, name, time.Minute)
					return refused(err)
				}},
				{Name: "Read giving up", Op: hooks.RWLeaseReadAcquire, Outcome: hooks.Canceled, Run: gaveUp(rwlease.Read)},
				{Name: "Release the writer", Op: hooks.RWLeaseRelease, OneCommand: true, Run: release(&w)},
			}
		},
		LostReply: &contract.LostReply{
			Op: func(ctx context.Context, c *coordination.Coordinator, name string) error {
				_, err := rwlease.TryRead(ctx, c, name, time.Minute)
				return err
			},
			Clean: func(ctx context.Context, raw redis.UniversalClient, key func(string) string, name string) (bool, error) {
				n, err := raw.Exists(ctx, key(name)).Result()
				return n == 0, err
			},
		},
	})
}

// entries returns the key's members with their scores, as ZRANGE shows
// them.
func entries(t testing.TB, raw redis.UniversalClient, key string) map[string]float64 {
	t.Helper()
	zs := must(raw.ZRangeWithScores(context.Background(), key, 0, -1).Result())(t)
	out := map[string]float64{}
	for _, z := range zs {
		out[z.Member.(string)] = z.Score
	}
	return out
}

// N readers coexist; a writer is refused while any live reader holds and
// admitted once they release or expire; a reader is refused while the
// writer holds.
func TestReadersCoexistWriterExcluded(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw, key := b.Raw(t), b.Key("rw")
		const n = 5
		var readers []*rwlease.Lease
		for i := range n {
			ttl := time.Minute
			if i == n-1 {
				ttl = 150 * time.Millisecond // the last one will expire instead
			}
			readers = append(readers, must(rwlease.TryRead(ctx, b.Coordinator(t), "rw", ttl))(t))
		}
		if got := entries(t, raw, key); len(got) != n {
			t.Fatalf("%d readers hold, want %d: %v", len(got), n, got)
		}
		for _, r := range readers {
			if r.Mode() != rwlease.ReadMode || !must(r.Verify(ctx))(t) {
				t.Fatal("a reader does not hold its read lease")
			}
		}
		writer := b.Coordinator(t)
		for i, r := range readers[:n-1] {
			if _, err := rwlease.TryWrite(ctx, writer, "rw", time.Minute); !errors.Is(err, coordination.ErrNotAcquired) {
				t.Fatalf("TryWrite with %d live readers: %v, want ErrNotAcquired", n-i, err)
			}
			if out := must(r.Release(ctx))(t); out != coordination.Released {
				t.Fatalf("reader release = %v", out)
			}
		}
		if _, err := rwlease.TryWrite(ctx, writer, "rw", time.Minute); !errors.Is(err, coordination.ErrNotAcquired) {
			t.Fatalf("TryWrite with one live reader: %v, want ErrNotAcquired", err)
		}
		b.Advance(200 * time.Millisecond) // the last reader expires, unreleased
		w := must(rwlease.TryWrite(ctx, writer, "rw", time.Minute))(t)
		got := entries(t, raw, key)
		if len(got) != 1 || got["W:"+w.Token()] <= 0 {
			t.Fatalf("after the writer got in the key holds %v, want only its entry (the expired reader pruned)", got)
		}
		if _, err := rwlease.TryRead(ctx, b.Coordinator(t), "rw", time.Minute); !errors.Is(err, coordination.ErrNotAcquired) {
			t.Fatalf("TryRead while the writer holds: %v, want ErrNotAcquired", err)
		}
		if _, err := rwlease.TryRead(ctx, b.Coordinator(t), "rw", time.Minute, rwlease.WithWriterPreference(false)); !errors.Is(err, coordination.ErrNotAcquired) {
			t.Fatalf("TryRead without writer preference while the writer holds: %v, want ErrNotAcquired", err)
		}
		if _, err := rwlease.TryWrite(ctx, b.Coordinator(t), "rw", time.Minute); !errors.Is(err, coordination.ErrNotAcquired) {
			t.Fatalf("second writer: %v, want ErrNotAcquired", err)
		}
		if out := must(w.Release(ctx))(t); out != coordination.Released {
			t.Fatalf("writer release = %v", out)
		}
		if n := must(raw.Exists(ctx, key).Result())(t); n != 0 {
			t.Fatalf("the key outlived its last entry: %v", entries(t, raw, key))
		}
		r := must(rwlease.TryRead(ctx, b.Coordinator(t), "rw", time.Minute))(t)
		if pttl := must(raw.PTTL(ctx, key).Result())(t); pttl <= 58*time.Second || pttl > time.Minute {
			t.Fatalf("the key's TTL is %v, want the reader's expiry", pttl)
		}
		must(r.Release(ctx))(t)
	})
}

// An expired reader never blocks a writer, cannot renew, and its release
// (or a lost handle's) never removes anyone else's entry.
func TestExpiredOrLostHolderTouchesNoOne(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw, key := b.Raw(t), b.Key("rw")
		old := must(rwlease.TryRead(ctx, b.Coordinator(t), "rw", 80*time.Millisecond))(t)
		keeper := must(rwlease.TryRead(ctx, b.Coordinator(t), "other", time.Minute))(t)
		b.Advance(150 * time.Millisecond)
		w := must(rwlease.TryWrite(ctx, b.Coordinator(t), "rw", time.Minute))(t)
		before := entries(t, raw, key)
		if ok := must(old.Refresh(ctx, time.Hour))(t); ok {
			t.Fatal("the expired reader's Refresh = true")
		}
		if out := must(old.Release(ctx))(t); out != coordination.AlreadyReleased {
			t.Fatalf("the expired reader's Release = %v, want AlreadyReleased", out)
		}
		// Below the handle (which refuses locally once its deadline has
		// passed): the scripts with the old member.
		e := must(engine.Of(b.Coordinator(t)))(t)
		k := e.Key("rw")
		if ok := must(engine.RWLeaseRefresh.Run(ctx, e, k, "R:"+old.Token(), 3_600_000))(t); ok {
			t.Fatal("rwlease_refresh of the expired member = true")
		}
		if out := must(engine.RWLeaseRelease.Run(ctx, e, k, "R:"+old.Token()))(t); out != engine.AlreadyReleased {
			t.Fatalf("rwlease_release of the expired member = %v", out)
		}
		// A release naming the writer's token as a reader, or a made-up
		// member, removes nothing.
		if out := must(engine.RWLeaseRelease.Run(ctx, e, k, "R:"+w.Token()))(t); out != engine.AlreadyReleased {
			t.Fatalf("release of a member that is not there = %v", out)
		}
		if got := entries(t, raw, key); !equalEntries(got, before) {
			t.Fatalf("the writer's entry changed: %v -> %v", before, got)
		}
		if ok := must(w.Verify(ctx))(t); !ok {
			t.Fatal("the writer lost its lease")
		}

		// A lost handle (its entry removed behind its back) cannot remove
		// another holder's entry either.
		lost := must(rwlease.TryRead(ctx, b.Coordinator(t), "other", time.Minute))(t)
		must(raw.ZRem(ctx, b.Key("other"), "R:"+lost.Token()).Result())(t)
		if ok := must(lost.Verify(ctx))(t); ok {
			t.Fatal("Verify = true for a removed entry")
		}
		if !errors.Is(context.Cause(lost.Context()), coordination.ErrLost) {
			t.Fatalf("lost handle's cause = %v", context.Cause(lost.Context()))
		}
		if out := must(lost.Release(ctx))(t); out != coordination.AlreadyReleased {
			t.Fatalf("lost handle's Release = %v", out)
		}
		if ok := must(keeper.Verify(ctx))(t); !ok {
			t.Fatal("the other reader lost its lease")
		}
		must(w.Release(ctx))(t)
		must(keeper.Release(ctx))(t)
	})
}

func equalEntries(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A key of another type, or a sorted set of another layout, is refused and
// left unchanged.
func TestWrongTypeAndForeignLayout(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		must(raw.Set(ctx, b.Key("str"), "v", 0).Result())(t)
		for _, fn := range []func(context.Context, *coordination.Coordinator, string, time.Duration, ...rwlease.Option) (*rwlease.Lease, error){rwlease.TryRead, rwlease.TryWrite} {
			if _, err := fn(ctx, b.Coordinator(t), "str", time.Minute); !errors.Is(err, coordination.ErrWrongType) {
				t.Fatalf("on a string: %v, want ErrWrongType", err)
			}
		}
		if v := must(raw.Get(ctx, b.Key("str")).Result())(t); v != "v" {
			t.Fatalf("string changed: %q", v)
		}
		far := float64(b.Now().Add(time.Hour).UnixMilli())
		must(raw.ZAdd(ctx, b.Key("zs"), redis.Z{Score: far, Member: "someone else's"}).Result())(t)
		for _, fn := range []func(context.Context, *coordination.Coordinator, string, time.Duration, ...rwlease.Option) (*rwlease.Lease, error){rwlease.TryRead, rwlease.TryWrite} {
			if _, err := fn(ctx, b.Coordinator(t), "zs", time.Minute); !errors.Is(err, coordination.ErrBadState) ||
				coordination.Classify(err) != coordination.Terminal {
				t.Fatalf("on a foreign sorted set: %v, want a terminal ErrBadState", err)
			}
		}
		if got := entries(t, raw, b.Key("zs")); len(got) != 1 || got["someone else's"] != far {
			t.Fatalf("foreign sorted set changed: %v", got)
		}
	})
}

// With writer preference, a writer waiting in Write holds new readers back
// (TryRead refused, Read queued), readers already holding keep their
// leases and renew them, and the queued readers follow once the writer is
// done. A Write that gives up removes its waiting record at once.
func TestWaitingWriterQueuesReaders(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw, key := b.Raw(t), b.Key("q")
		holder := must(rwlease.TryRead(ctx, b.Coordinator(t), "q", time.Minute))(t)

		// A writer that gives up: readers are free again at once.
		cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		_, err := rwlease.Write(cctx, b.Coordinator(t), "q", time.Minute)
		cancel()
		if !errors.Is(err, coordination.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Write giving up: %v", err)
		}
		for m := range entries(t, raw, key) {
			if strings.HasPrefix(m, "Q:") {
				t.Fatalf("the writer that gave up left its marker: %v", entries(t, raw, key))
			}
		}
		r := must(rwlease.TryRead(ctx, b.Coordinator(t), "q", time.Minute))(t)
		must(r.Release(ctx))(t)

		// A writer that waits.
		wrote := make(chan *rwlease.Lease, 1)
		go func() {
			w, err := rwlease.Write(ctx, b.Coordinator(t), "q", time.Minute)
			if err != nil {
				t.Error(err)
			}
			wrote <- w
		}()
		deadline := time.Now().Add(5 * time.Second)
		for !slices.ContainsFunc(keysOf(entries(t, raw, key)), func(m string) bool { return strings.HasPrefix(m, "Q:") }) {
			if time.Now().After(deadline) {
				t.Fatal("the waiting writer recorded no marker")
			}
			time.Sleep(5 * time.Millisecond)
		}
		if _, err := rwlease.TryRead(ctx, b.Coordinator(t), "q", time.Minute); !errors.Is(err, coordination.ErrNotAcquired) {
			t.Fatalf("TryRead while a writer waits: %v, want ErrNotAcquired", err)
		}
		if l, err := rwlease.TryRead(ctx, b.Coordinator(t), "q", time.Minute, rwlease.WithWriterPreference(false)); err != nil {
			t.Fatalf("TryRead without writer preference while a writer waits: %v", err)
		} else {
			must(l.Release(ctx))(t)
		}
		if ok := must(holder.Refresh(ctx, time.Minute))(t); !ok {
			t.Fatal("a holding reader could not renew while a writer waits")
		}
		type admitted struct {
			at time.Time
			l  *rwlease.Lease
		}
		queued := make(chan admitted, 1)
		go func() {
			l, err := rwlease.Read(ctx, b.Coordinator(t), "q", time.Minute)
			if err != nil {
				t.Error(err)
			}
			queued <- admitted{time.Now(), l}
		}()
		time.Sleep(100 * time.Millisecond)
		select {
		case <-wrote:
			t.Fatal("the writer got in while a reader held")
		case <-queued:
			t.Fatal("a queued reader got in before the waiting writer")
		default:
		}
		must(holder.Release(ctx))(t)
		var w *rwlease.Lease
		select {
		case w = <-wrote:
		case <-time.After(5 * time.Second):
			t.Fatal("the writer did not get in after the last reader left")
		}
		if got := entries(t, raw, key); len(got) != 1 || got["W:"+w.Token()] <= 0 {
			t.Fatalf("the key holds %v, want the writer alone (its marker removed)", got)
		}
		time.Sleep(50 * time.Millisecond)
		select {
		case <-queued:
			t.Fatal("the queued reader got in while the writer held")
		default:
		}
		released := time.Now()
		must(w.Release(ctx))(t)
		select {
		case a := <-queued:
			if a.l == nil {
				t.Fatal("the queued reader failed")
			}
			if d := a.at.Sub(released); d > time.Second {
				t.Errorf("the queued reader got in %v after the writer released", d)
			}
			must(a.l.Release(ctx))(t)
		case <-time.After(5 * time.Second):
			t.Fatal("the queued reader never got in")
		}
	})
}

func keysOf(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A script re-sent with the same arguments (go-redis re-sends after a
// lost reply) gives one lease and the first send's answer: acquires report
// acquired with one entry, a refresh true; a release re-sent after the
// first one removed the entry reports AlreadyReleased (documented).
func TestReSentScripts(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw, key := b.Raw(t), b.Key("rs")
		e := must(engine.Of(b.Coordinator(t)))(t)
		k := e.Key("rs")
		tok, _ := engine.NewToken()
		for i := range 2 {
			if g := must(engine.RWLeaseAcquire.Run(ctx, e, k, "R:"+tok, 60000, 1))(t); !g.Acquired {
				t.Fatalf("send %d of a read acquire: %+v", i+1, g)
			}
			if ok := must(engine.RWLeaseRefresh.Run(ctx, e, k, "R:"+tok, 60000))(t); !ok {
				t.Fatalf("send %d of a refresh = false", i+1)
			}
		}
		if got := entries(t, raw, key); len(got) != 1 {
			t.Fatalf("two sends of one read acquire left %v", got)
		}
		if out := must(engine.RWLeaseRelease.Run(ctx, e, k, "R:"+tok))(t); out != engine.Released {
			t.Fatalf("release = %v", out)
		}
		if out := must(engine.RWLeaseRelease.Run(ctx, e, k, "R:"+tok))(t); out != engine.AlreadyReleased {
			t.Fatalf("re-sent release = %v, want AlreadyReleased", out)
		}
		wtok, _ := engine.NewToken()
		for i := range 2 {
			if g := must(engine.RWLeaseAcquire.Run(ctx, e, k, "W:"+wtok, 60000, int64(10000)))(t); !g.Acquired {
				t.Fatalf("send %d of a write acquire: %+v (a naive script would see its own entry as a holder)", i+1, g)
			}
		}
		if got := entries(t, raw, key); len(got) != 1 || got["W:"+wtok] <= 0 {
			t.Fatalf("two sends of one write acquire left %v", got)
		}
		// A refused writer's re-send records one marker.
		other, _ := engine.NewToken()
		for range 2 {
			if g := must(engine.RWLeaseAcquire.Run(ctx, e, k, "W:"+other, 60000, int64(10000)))(t); g.Acquired || g.RetryIn <= 0 {
				t.Fatalf("contended write: %+v", g)
			}
		}
		if got := entries(t, raw, key); len(got) != 2 || got["Q:"+other] >= 0 {
			t.Fatalf("two sends of a refused write left %v, want the holder and one marker", got)
		}
	})
}

// The same through go-redis' own re-send: the proxy drops the acquire's
// reply after the server ran it, go-redis re-sends, and the caller gets
// the one lease the first send took.
func TestLostReplyReSent(t *testing.T) {
	for _, flavor := range testharness.Flavors {
		t.Run(flavor, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			srv := testharness.Get(t, flavor).Server
			p := faultproxy.Start(t, srv.Addr)
			opt := srv.Options()
			opt.Addr = p.Addr()
			rdb := redis.NewClient(opt)
			defer rdb.Close()
			prefix := "rwrs:" + flavor + ":"
			coord := must(coordination.New(rdb, coordination.WithKeyPrefix(prefix)))(t)
			direct := redis.NewClient(srv.Options())
			defer direct.Close()
			defer direct.Del(ctx, prefix+"k")
			e := must(engine.Of(coord))(t)
			if err := engine.RWLeaseAcquire.Load(ctx, e); err != nil { // one EVALSHA per send
				t.Fatal(err)
			}
			for _, c := range []struct {
				mode rwlease.Mode
				sha  string
				fn   func(context.Context, *coordination.Coordinator, string, time.Duration, ...rwlease.Option) (*rwlease.Lease, error)
			}{{rwlease.ReadMode, engine.RWLeaseAcquire.Hash(), rwlease.TryRead}, {rwlease.WriteMode, engine.RWLeaseAcquire.Hash(), rwlease.TryWrite}} {
				before := p.Stats().Commands["EVALSHA"]
				lost := p.Apply(faultproxy.DropReply(faultproxy.ScriptSHA(c.sha), 1))
				l := must(c.fn(ctx, coord, "k", time.Minute))(t)
				if lost.Fired() != 1 || p.Stats().Commands["EVALSHA"]-before != 2 {
					t.Fatalf("%v: the reply was not lost and re-sent: fired %d, EVALSHA %d", c.mode, lost.Fired(), p.Stats().Commands["EVALSHA"]-before)
				}
				got := entries(t, direct, prefix+"k")
				if len(got) != 1 || got[strings.ToUpper(c.mode.String()[:1])+":"+l.Token()] <= 0 {
					t.Fatalf("%v: after a re-sent acquire the key holds %v", c.mode, got)
				}
				if out := must(l.Release(ctx))(t); out != coordination.Released {
					t.Fatalf("%v: Release = %v", c.mode, out)
				}
			}
		})
	}
}

// Blocking-wake latency: the time from a release to a blocked waiter
// holding, for a writer waiting on readers and for a reader waiting on a
// writer, over 5 handoffs each; the median must be within 50 ms.
func TestBlockingWakeLatency(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		for _, c := range []struct {
			name           string
			holder, waiter func(context.Context, *coordination.Coordinator, string, time.Duration, ...rwlease.Option) (*rwlease.Lease, error)
		}{{"writer after a reader", rwlease.TryRead, rwlease.Write}, {"reader after a writer", rwlease.TryWrite, rwlease.Read}} {
			var lat []time.Duration
			for round := range 5 {
				key := fmt.Sprintf("wake%d", round)
				holder := must(c.holder(ctx, b.Coordinator(t), key, time.Minute))(t)
				type admitted struct {
					at time.Time
					l  *rwlease.Lease
				}
				got := make(chan admitted, 1)
				coord := b.Coordinator(t)
				go func() {
					l, err := c.waiter(ctx, coord, key, time.Minute)
					if err != nil {
						t.Error(err)
					}
					got <- admitted{time.Now(), l}
				}()
				time.Sleep(100 * time.Millisecond)
				released := time.Now()
				must(holder.Release(ctx))(t)
				select {
				case a := <-got:
					if a.l == nil {
						t.Fatalf("%s: the waiter failed", c.name)
					}
					lat = append(lat, a.at.Sub(released))
					must(a.l.Release(ctx))(t)
				case <-time.After(5 * time.Second):
					t.Fatalf("%s: the waiter did not get in", c.name)
				}
			}
			sorted := slices.Clone(lat)
			slices.Sort(sorted)
			med := sorted[len(sorted)/2]
			t.Logf("%s on %s: wake-up latencies %v (median %v)", c.name, b.Name, lat, med)
			if med > 50*time.Millisecond {
				t.Errorf("%s: median wake-up %v after the release, want <= 50ms", c.name, med)
			}
		}
	})
}

// stream runs readers arriving every 10 ms for 2 s, each holding 100 ms,
// and a writer that starts waiting 300 ms in; it returns how long the
// writer waited and how many readers got in while it waited.
func stream(t *testing.T, b *testharness.Backend, key string, opts ...rwlease.Option) (wait time.Duration, during int) {
	ctx := context.Background()
	coords := make([]*coordination.Coordinator, 4)
	for i := range coords {
		coords[i] = b.Coordinator(t)
	}
	var (
		mu                   sync.Mutex
		admits               []time.Time
		wg                   sync.WaitGroup
		writerIn, writerFrom time.Time
	)
	start := time.Now()
	wg.Go(func() {
		time.Sleep(300 * time.Millisecond)
		from := time.Now()
		w, err := rwlease.Write(ctx, b.Coordinator(t), key, 10*time.Second, opts...)
		if err != nil {
			t.Error(err)
			return
		}
		in := time.Now()
		mu.Lock()
		writerFrom, writerIn = from, in
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		if _, err := w.Release(ctx); err != nil {
			t.Error(err)
		}
	})
	for i := 0; time.Since(start) < 2*time.Second; i++ {
		coord := coords[i%len(coords)]
		wg.Go(func() {
			r, err := rwlease.Read(ctx, coord, key, 10*time.Second, opts...)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			admits = append(admits, time.Now())
			mu.Unlock()
			time.Sleep(100 * time.Millisecond)
			if _, err := r.Release(ctx); err != nil {
				t.Error(err)
			}
		})
		time.Sleep(10 * time.Millisecond)
	}
	wg.Wait()
	for _, at := range admits {
		if at.After(writerFrom) && at.Before(writerIn) {
			during++
		}
	}
	return writerIn.Sub(writerFrom), during
}

// Writer preference: with a reader arriving every 10 ms for 2 s (each
// holding 100 ms, so about 10 overlap at any time), a waiting writer gets
// in once the readers present when it started have left, and no new reader
// gets in meanwhile. Without it, readers keep getting in while the writer
// waits.
func TestWriterPreference(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		wait, during := stream(t, b, "pref")
		t.Logf("%s: with writer preference the writer waited %v; %d readers got in meanwhile", b.Name, wait.Round(time.Millisecond), during)
		// A reader whose attempt ran before the writer's first one (within
		// a round trip of the writer starting) may still be counted.
		if wait > time.Second || during > 3 {
			t.Errorf("with writer preference the writer waited %v while %d readers got in; want about the 100 ms the holding readers needed, and none", wait, during)
		}
		wait, during = stream(t, b, "nopref", rwlease.WithWriterPreference(false))
		t.Logf("%s: without writer preference the writer waited %v; %d readers got in meanwhile", b.Name, wait.Round(time.Millisecond), during)
		if during < 10 {
			t.Errorf("without writer preference only %d readers got in while the writer waited %v: the test shows nothing", during, wait)
		}
	})
}
