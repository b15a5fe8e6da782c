package rwlease_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/contract"
	"github.com/coordkit/coordination/internal/testkit/faultproxy"
	"github.com/coordkit/coordination/internal/testkit/locktest"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/rwlease"
)

func TestMain(m *testing.M) { testharness.Main(m) }

// verb is an acquisition of an RWMutex, as a method expression.
type verb = func(*rwlease.RWMutex, context.Context, time.Duration) (*rwlease.Lease, error)

var (
	verbTryRead  verb = (*rwlease.RWMutex).TryRead
	verbRead     verb = (*rwlease.RWMutex).Read
	verbTryWrite verb = (*rwlease.RWMutex).TryWrite
	verbWrite    verb = (*rwlease.RWMutex).Write
)

// newRW is rwlease.New, failing the test on an error (from the test's
// goroutine only).
func newRW(t testing.TB, c *coordination.Coordinator, key string, opts ...rwlease.Option) *rwlease.RWMutex {
	t.Helper()
	return must(rwlease.New(c, key, opts...))(t)
}

// on runs v on a new RWMutex on key, returning New's error if it fails:
// for callbacks that return errors instead of failing the test.
func on(ctx context.Context, c *coordination.Coordinator, key string, v verb, ttl time.Duration, opts ...rwlease.Option) (*rwlease.Lease, error) {
	m, err := rwlease.New(c, key, opts...)
	if err != nil {
		return nil, err
	}
	return v(m, ctx, ttl)
}

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
		AcquireSHA: rwlease.ScriptAcquire.Hash(), RefreshSHA: rwlease.ScriptRefresh.Hash(),
		Metrics: rwMetrics,
		Acquire: func(ctx context.Context, c *coordination.Coordinator, name string, ttl time.Duration, block bool) (locktest.Handle, error) {
			v := verbTryWrite
			if block {
				v = verbWrite
			}
			l, err := on(ctx, c, name, v, ttl)
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
	// New validates the key, the coordinator and the options; each verb
	// its ttl and its receiver.
	out = append(out,
		contract.BadInput{Arg: "key", Call: func(ctx context.Context, c *coordination.Coordinator) error {
			_, err := rwlease.New(c, "")
			return err
		}},
		contract.BadInput{Arg: "recheck", Call: func(ctx context.Context, c *coordination.Coordinator) error {
			_, err := rwlease.New(c, "k", rwlease.WithRecheck(0))
			return err
		}},
		contract.BadInput{Arg: "coord", Call: func(ctx context.Context, c *coordination.Coordinator) error {
			_, err := rwlease.New(nil, "k")
			return err
		}},
	)
	for i, v := range []verb{verbTryRead, verbRead, verbTryWrite, verbWrite} {
		op := hooks.RWLeaseReadAcquire
		if i >= 2 {
			op = hooks.RWLeaseWriteAcquire
		}
		out = append(out,
			contract.BadInput{Arg: "ttl", Op: op, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := on(ctx, c, "k", v, 999*time.Microsecond)
				return err
			}},
			contract.BadInput{Arg: "ttl", Op: op, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := on(ctx, c, "k", v, 0)
				return err
			}},
			contract.BadInput{Arg: "rwmutex", Op: op, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := v(new(rwlease.RWMutex), ctx, time.Second)
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
					*l, err = on(ctx, c, name, verbTryRead, time.Minute)
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
			gaveUp := func(v verb) func(ctx context.Context, c *coordination.Coordinator) error {
				return func(ctx context.Context, c *coordination.Coordinator) error {
					ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
					defer cancel()
					if _, err := on(ctx, c, name, v, time.Minute); !errors.Is(err, coordination.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
						return fmt.Errorf("want ErrNotAcquired and DeadlineExceeded, got %v", err)
					}
					return nil
				}
			}
			return []contract.Step{
				{Name: "TryRead", Op: hooks.RWLeaseReadAcquire, OneCommand: true, Run: read(&r1)},
				{Name: "second TryRead", Op: hooks.RWLeaseReadAcquire, OneCommand: true, Run: read(&r2)},
				{Name: "contended TryWrite", Op: hooks.RWLeaseWriteAcquire, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
					_, err := on(ctx, c, name, verbTryWrite, time.Minute)
					return refused(err)
				}},
				{Name: "Write giving up", Op: hooks.RWLeaseWriteAcquire, Outcome: hooks.Canceled, Run: gaveUp(verbWrite)},
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
					w, err = on(ctx, c, name, verbTryWrite, time.Minute)
					return err
				}},
				{Name: "contended TryRead", Op: hooks.RWLeaseReadAcquire, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
					_, err := on(ctx, c, name, verbTryRead, time.Minute)
					return refused(err)
				}},
				{Name: "Read giving up", Op: hooks.RWLeaseReadAcquire, Outcome: hooks.Canceled, Run: gaveUp(verbRead)},
				{Name: "Release the writer", Op: hooks.RWLeaseRelease, OneCommand: true, Run: release(&w)},
			}
		},
		LostReply: &contract.LostReply{
			Op: func(ctx context.Context, c *coordination.Coordinator, name string) error {
				_, err := on(ctx, c, name, verbTryRead, time.Minute)
				return err
			},
			// Clean: the key is gone, or holds only the cleanup's tombstone.
			Clean: func(ctx context.Context, raw redis.UniversalClient, key func(string) string, name string) (bool, error) {
				zs, err := raw.ZRangeWithScores(ctx, key(name), 0, -1).Result()
				for _, z := range zs {
					if !isTombstone(z.Score) {
						return false, err
					}
				}
				return true, err
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
				ttl = 2 * time.Second // the last one will expire instead (alive until the writer's refusals, even on a loaded machine)
			}
			readers = append(readers, must(newRW(t, b.Coordinator(t), "rw").TryRead(ctx, ttl))(t))
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
			if _, err := newRW(t, writer, "rw").TryWrite(ctx, time.Minute); !errors.Is(err, coordination.ErrNotAcquired) {
				t.Fatalf("TryWrite with %d live readers: %v, want ErrNotAcquired", n-i, err)
			}
			if out := must(r.Release(ctx))(t); out != coordination.Released {
				t.Fatalf("reader release = %v", out)
			}
		}
		if _, err := newRW(t, writer, "rw").TryWrite(ctx, time.Minute); !errors.Is(err, coordination.ErrNotAcquired) {
			t.Fatalf("TryWrite with one live reader: %v, want ErrNotAcquired", err)
		}
		b.Advance(2100 * time.Millisecond) // the last reader expires, unreleased
		w := must(newRW(t, writer, "rw").TryWrite(ctx, time.Minute))(t)
		got := entries(t, raw, key)
		if len(got) != 1 || got["W:"+w.Token()] <= 0 {
			t.Fatalf("after the writer got in the key holds %v, want only its entry (the expired reader pruned)", got)
		}
		if _, err := newRW(t, b.Coordinator(t), "rw").TryRead(ctx, time.Minute); !errors.Is(err, coordination.ErrNotAcquired) {
			t.Fatalf("TryRead while the writer holds: %v, want ErrNotAcquired", err)
		}
		if _, err := newRW(t, b.Coordinator(t), "rw", rwlease.WithPolicy(rwlease.ReaderPreference)).TryRead(ctx, time.Minute); !errors.Is(err, coordination.ErrNotAcquired) {
			t.Fatalf("TryRead under reader preference while the writer holds: %v, want ErrNotAcquired", err)
		}
		if _, err := newRW(t, b.Coordinator(t), "rw").TryWrite(ctx, time.Minute); !errors.Is(err, coordination.ErrNotAcquired) {
			t.Fatalf("second writer: %v, want ErrNotAcquired", err)
		}
		if out := must(w.Release(ctx))(t); out != coordination.Released {
			t.Fatalf("writer release = %v", out)
		}
		if n := must(raw.Exists(ctx, key).Result())(t); n != 0 {
			t.Fatalf("the key outlived its last entry: %v", entries(t, raw, key))
		}
		r := must(newRW(t, b.Coordinator(t), "rw").TryRead(ctx, time.Minute))(t)
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
		old := must(newRW(t, b.Coordinator(t), "rw").TryRead(ctx, 80*time.Millisecond))(t)
		keeper := must(newRW(t, b.Coordinator(t), "other").TryRead(ctx, time.Minute))(t)
		b.Advance(150 * time.Millisecond)
		w := must(newRW(t, b.Coordinator(t), "rw").TryWrite(ctx, time.Minute))(t)
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
		if ok := must(rwlease.ScriptRefresh.Run(ctx, e, k, "R:"+old.Token(), 3_600_000))(t); ok {
			t.Fatal("rwlease_refresh of the expired member = true")
		}
		if out := must(rwlease.ScriptRelease.Run(ctx, e, k, "R:"+old.Token()))(t); out != decode.AlreadyReleased {
			t.Fatalf("rwlease_release of the expired member = %v", out)
		}
		// A release naming the writer's token as a reader, or a made-up
		// member, removes nothing.
		if out := must(rwlease.ScriptRelease.Run(ctx, e, k, "R:"+w.Token()))(t); out != decode.AlreadyReleased {
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
		lost := must(newRW(t, b.Coordinator(t), "other").TryRead(ctx, time.Minute))(t)
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
		for _, v := range []verb{verbTryRead, verbTryWrite} {
			if _, err := v(newRW(t, b.Coordinator(t), "str"), ctx, time.Minute); !errors.Is(err, coordination.ErrBadState) {
				t.Fatalf("on a string: %v, want ErrBadState (wrong type)", err)
			}
		}
		if v := must(raw.Get(ctx, b.Key("str")).Result())(t); v != "v" {
			t.Fatalf("string changed: %q", v)
		}
		far := float64(b.Now().Add(time.Hour).UnixMilli())
		must(raw.ZAdd(ctx, b.Key("zs"), redis.Z{Score: far, Member: "someone else's"}).Result())(t)
		for _, v := range []verb{verbTryRead, verbTryWrite} {
			if _, err := v(newRW(t, b.Coordinator(t), "zs"), ctx, time.Minute); !errors.Is(err, coordination.ErrBadState) ||
				engine.Classify(err) != engine.Terminal {
				t.Fatalf("on a foreign sorted set: %v, want a terminal ErrBadState", err)
			}
		}
		if got := entries(t, raw, b.Key("zs")); len(got) != 1 || got["someone else's"] != far {
			t.Fatalf("foreign sorted set changed: %v", got)
		}
	})
}

// A foreign entry whose score no TTL gives (+inf, past the longest
// time.Duration, -inf for a waiting record) makes every writing operation
// a terminal ErrBadState that changes nothing: before, the settled expiry
// of such a key was in the past and deleted it, live readers included, and
// a writer then got in beside a reader that still held.
func TestScoreOutsideTheLayoutIsRefusedUnchanged(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		for i, z := range []redis.Z{
			{Score: math.Inf(1), Member: "R:11111111-1111-4111-8111-111111111111"},
			{Score: 1e19, Member: "W:11111111-1111-4111-8111-111111111111"},
			{Score: math.Inf(-1), Member: "Q:11111111-1111-4111-8111-111111111111"},
		} {
			name := fmt.Sprintf("bad%d", i)
			rw := newRW(t, b.Coordinator(t), name)
			r, err := rw.TryRead(ctx, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			must(raw.ZAdd(ctx, b.Key(name), z).Result())(t)
			before := entries(t, raw, b.Key(name))
			ops := map[string]func() error{
				"TryRead":  func() error { _, err := rw.TryRead(ctx, time.Minute); return err },
				"TryWrite": func() error { _, err := rw.TryWrite(ctx, time.Minute); return err },
				"Refresh":  func() error { _, err := r.Refresh(ctx, time.Minute); return err },
				"Release":  func() error { _, err := r.Release(ctx); return err },
			}
			for _, op := range []string{"TryRead", "TryWrite", "Refresh", "Release"} {
				err := ops[op]()
				if !errors.Is(err, coordination.ErrBadState) || engine.Classify(err) != engine.Terminal {
					t.Fatalf("score %v, %s: %v, want a terminal ErrBadState", z.Score, op, err)
				}
				if got := entries(t, raw, b.Key(name)); !maps.Equal(got, before) {
					t.Fatalf("score %v, %s changed the key: %v, was %v", z.Score, op, got, before)
				}
				if ttl := must(raw.PTTL(ctx, b.Key(name)).Result())(t); ttl <= 0 {
					t.Fatalf("score %v, %s: key TTL %v", z.Score, op, ttl)
				}
			}
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
		holder := must(newRW(t, b.Coordinator(t), "q").TryRead(ctx, time.Minute))(t)

		// A writer that gives up: readers are free again at once.
		cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		_, err := newRW(t, b.Coordinator(t), "q").Write(cctx, time.Minute)
		cancel()
		if !errors.Is(err, coordination.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Write giving up: %v", err)
		}
		for m := range entries(t, raw, key) {
			if strings.HasPrefix(m, "Q:") {
				t.Fatalf("the writer that gave up left its marker: %v", entries(t, raw, key))
			}
		}
		r := must(newRW(t, b.Coordinator(t), "q").TryRead(ctx, time.Minute))(t)
		must(r.Release(ctx))(t)

		// A writer that waits.
		wrote := make(chan *rwlease.Lease, 1)
		writer := newRW(t, b.Coordinator(t), "q")
		go func() {
			w, err := writer.Write(ctx, time.Minute)
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
		if _, err := newRW(t, b.Coordinator(t), "q").TryRead(ctx, time.Minute); !errors.Is(err, coordination.ErrNotAcquired) {
			t.Fatalf("TryRead while a writer waits: %v, want ErrNotAcquired", err)
		}
		if l, err := newRW(t, b.Coordinator(t), "q", rwlease.WithPolicy(rwlease.ReaderPreference)).TryRead(ctx, time.Minute); err != nil {
			t.Fatalf("TryRead under reader preference while a writer waits: %v", err)
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
		reader := newRW(t, b.Coordinator(t), "q")
		go func() {
			l, err := reader.Read(ctx, time.Minute)
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
		// Phase-fair (the default): the queued reader recorded itself as a
		// waiting reader (its R: member with a negative score); nothing else is there.
		got := entries(t, raw, key)
		waitingReaders := 0
		for m, sc := range got {
			if strings.HasPrefix(m, "R:") && sc < 0 {
				waitingReaders++
				delete(got, m)
			}
		}
		if len(got) != 1 || got["W:"+w.Token()] <= 0 || waitingReaders != 1 {
			t.Fatalf("the key holds %v and %d waiting readers, want the writer alone (its marker removed) and one waiting reader", got, waitingReaders)
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
			if g := must(rwlease.ScriptAcquire.Run(ctx, e, k, "R:"+tok, 60000, 1))(t); !g.Acquired {
				t.Fatalf("send %d of a read acquire: %+v", i+1, g)
			}
			if ok := must(rwlease.ScriptRefresh.Run(ctx, e, k, "R:"+tok, 60000))(t); !ok {
				t.Fatalf("send %d of a refresh = false", i+1)
			}
		}
		if got := entries(t, raw, key); len(got) != 1 {
			t.Fatalf("two sends of one read acquire left %v", got)
		}
		if out := must(rwlease.ScriptRelease.Run(ctx, e, k, "R:"+tok))(t); out != decode.Released {
			t.Fatalf("release = %v", out)
		}
		if out := must(rwlease.ScriptRelease.Run(ctx, e, k, "R:"+tok))(t); out != decode.AlreadyReleased {
			t.Fatalf("re-sent release = %v, want AlreadyReleased", out)
		}
		wtok, _ := engine.NewToken()
		for i := range 2 {
			if g := must(rwlease.ScriptAcquire.Run(ctx, e, k, "W:"+wtok, 60000, int64(10000)))(t); !g.Acquired {
				t.Fatalf("send %d of a write acquire: %+v (a naive script would see its own entry as a holder)", i+1, g)
			}
		}
		if got := entries(t, raw, key); len(got) != 1 || got["W:"+wtok] <= 0 {
			t.Fatalf("two sends of one write acquire left %v", got)
		}
		// A refused writer's re-send records one marker.
		other, _ := engine.NewToken()
		for range 2 {
			if g := must(rwlease.ScriptAcquire.Run(ctx, e, k, "W:"+other, 60000, int64(10000)))(t); g.Acquired || g.RetryIn <= 0 {
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
			if err := rwlease.ScriptAcquire.Load(ctx, e); err != nil { // one EVALSHA per send
				t.Fatal(err)
			}
			for _, c := range []struct {
				mode rwlease.Mode
				sha  string
				fn   verb
			}{{rwlease.ReadMode, rwlease.ScriptAcquire.Hash(), verbTryRead}, {rwlease.WriteMode, rwlease.ScriptAcquire.Hash(), verbTryWrite}} {
				before := p.Stats().Commands["EVALSHA"]
				lost := p.Apply(faultproxy.DropReply(faultproxy.ScriptSHA(c.sha), 1))
				l := must(c.fn(newRW(t, coord, "k"), ctx, time.Minute))(t)
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

// span is one acquire attempt: when it was sent and when its reply came
// back.
type span struct{ sent, returned time.Time }

// attemptLog records, through a go-redis hook ([recordAttempts]), the
// acquire attempts (rwlease_acquire runs) of one waiter. An EVALSHA
// answered NOSCRIPT is not an attempt: the EVAL that follows is.
type attemptLog struct {
	mu    sync.Mutex
	log   []span
	first chan struct{} // closed when the first attempt's reply is back
}

func newAttemptLog() *attemptLog { return &attemptLog{first: make(chan struct{})} }

func (a *attemptLog) add(s span) {
	a.mu.Lock()
	a.log = append(a.log, s)
	if len(a.log) == 1 {
		close(a.first)
	}
	a.mu.Unlock()
}

// spans returns the attempts so far, in order.
func (a *attemptLog) spans() []span {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.log)
}

// waitReturned waits until n attempts have had their reply.
func (a *attemptLog) waitReturned(t *testing.T, n int, what string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); len(a.spans()) < n; {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d acquire attempts after 10 s, want %d", what, len(a.spans()), n)
		}
		time.Sleep(time.Millisecond)
	}
}

type attemptLogKey struct{}

// withAttempts files the acquire attempts sent with ctx under a.
func withAttempts(ctx context.Context, a *attemptLog) context.Context {
	return context.WithValue(ctx, attemptLogKey{}, a)
}

// attemptHook files each acquire attempt under the log of its context
// (withAttempts), or else under own.
type attemptHook struct{ own *attemptLog }

func (h attemptHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h attemptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !testharness.RunsScript(cmd, rwlease.ScriptAcquire.Hash()) {
			return next(ctx, cmd)
		}
		sent := time.Now()
		err := next(ctx, cmd)
		if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			return err
		}
		a, _ := ctx.Value(attemptLogKey{}).(*attemptLog)
		if a == nil {
			a = h.own
		}
		if a != nil {
			a.add(span{sent, time.Now()})
		}
		return err
	}
}

func (h attemptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// recordingCoordinator returns a coordinator over a new client of b whose
// acquire attempts are recorded (under the returned log unless their
// context names another), connected already.
func recordingCoordinator(t *testing.T, b *testharness.Backend) (*coordination.Coordinator, *attemptLog) {
	t.Helper()
	client := b.Client(t)
	a := newAttemptLog()
	client.AddHook(attemptHook{own: a})
	if err := client.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	coord := must(coordination.New(client, coordination.WithKeyPrefix(b.Prefix())))(t)
	return coord, a
}

// Blocking wake-up: a blocked waiter, a writer waiting on a reader or a
// reader waiting on a writer, is woken by the release's notification. It
// makes three attempts: the refused first one, the refused one after it
// subscribed (it then sleeps for the 5 s re-check, the holder's lease
// lasting a minute), and the one the release's notification triggers,
// which takes the lease: sent less than the re-check period after the
// previous one came back, so no re-check can have sent it.
func TestBlockingWakeLatency(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		for _, c := range []struct {
			name           string
			holder, waiter verb
		}{{"writer after a reader", verbTryRead, verbWrite}, {"reader after a writer", verbTryWrite, verbRead}} {
			var lat []time.Duration
			for round := range 5 {
				key := fmt.Sprintf("wake%d", round)
				holder := must(c.holder(newRW(t, b.Coordinator(t), key), ctx, time.Minute))(t)
				got := make(chan *rwlease.Lease, 1)
				coord, attempts := recordingCoordinator(t, b)
				waiter := newRW(t, coord, key)
				go func() {
					l, err := c.waiter(waiter, ctx, time.Minute)
					if err != nil {
						t.Error(err)
					}
					got <- l
				}()
				// The waiter is asleep once its attempt after subscribing
				// is answered (a release from then on notifies it).
				attempts.waitReturned(t, 2, c.name)
				released := time.Now()
				must(holder.Release(ctx))(t)
				select {
				case l := <-got:
					if l == nil {
						t.Fatalf("%s: the waiter failed", c.name)
					}
					must(l.Release(ctx))(t)
				case <-time.After(10 * time.Second):
					t.Fatalf("%s: the waiter did not get in", c.name)
				}
				s := attempts.spans()
				if len(s) != 3 {
					t.Fatalf("%s: the waiter made %d acquire attempts, want 3 (refused, refused after subscribing, woken by the release)", c.name, len(s))
				}
				if gap := s[2].sent.Sub(s[1].returned); gap >= rwlease.DefaultRecheck {
					t.Errorf("%s: the waiter's attempt after the release came %v after its previous one: its re-check, not the release's notification", c.name, gap)
				}
				lat = append(lat, s[2].sent.Sub(released))
			}
			t.Logf("%s on %s: from the release to the waiter's attempt %v", c.name, b.Name, lat)
		}
	})
}

// streamRun is what [stream] saw: the writer's acquire attempts (the last
// one took the lease) and, for every reader that got in, its acquire
// attempts (the last one took its lease) and when its release returned.
type streamRun struct {
	writer  []span
	readers []streamReader
}

type streamReader struct {
	attempts []span
	released time.Time
}

// marked is when the writer's first (refused) attempt came back, and got
// when its successful one was sent.
func (r streamRun) marked() time.Time { return r.writer[0].returned }
func (r streamRun) got() time.Time    { return r.writer[len(r.writer)-1].sent }

// wait is how long the writer waited, from its first attempt to the lease.
func (r streamRun) wait() time.Duration {
	return r.writer[len(r.writer)-1].returned.Sub(r.writer[0].sent)
}

// during counts the readers that got in while the writer waited: their
// successful attempt was sent after the writer's first attempt came back
// and came back before the writer's successful one was sent, so it ran on
// the server after the writer's first attempt and before its last.
func (r streamRun) during() int {
	n := 0
	for _, rd := range r.readers {
		a := rd.attempts[len(rd.attempts)-1]
		if a.sent.After(r.marked()) && a.returned.Before(r.got()) {
			n++
		}
	}
	return n
}

// stream runs readers arriving every 10 ms on key, each holding 100 ms at
// least, and a writer that starts waiting once 5 readers got in. Every reader
// holds at least until the writer's first attempt has been answered, so
// that attempt is refused. With chain, a reader also holds until a later
// reader got in (or the stream ended), so that some reader holds as long
// as the stream runs, however thin a loaded machine makes it; the stream
// then ends once 20 readers that arrived after the writer's first attempt
// got in (10 s at most). Without chain it ends once the writer is done.
func stream(t *testing.T, b *testharness.Backend, key string, chain bool, opts ...rwlease.Option) streamRun {
	ctx := context.Background()
	readers := make([]*rwlease.RWMutex, 4) // each on a coordinator of its own
	for i := range readers {
		coord, _ := recordingCoordinator(t, b)
		readers[i] = newRW(t, coord, key, opts...)
	}
	writerCoord, writerLog := recordingCoordinator(t, b)
	writer := newRW(t, writerCoord, key, opts...)
	var (
		mu       sync.Mutex
		run      streamRun
		wg       sync.WaitGroup
		next     = make(chan struct{}) // closed at the next admission
		admits   int
		admitted = make(chan struct{}) // closed at the fifth admission
		stopped  = make(chan struct{}) // closed when no more readers arrive
		done     = make(chan struct{}) // closed when the writer is done
		late     int                   // readers that arrived after the writer's first attempt and got in
	)
	wg.Go(func() {
		defer close(done)
		select {
		case <-admitted:
		case <-stopped:
			t.Error("fewer than 5 readers got in")
			return
		}
		w, err := writer.Write(ctx, time.Minute)
		if err != nil {
			t.Error(err)
			return
		}
		time.Sleep(20 * time.Millisecond) // hold
		if _, err := w.Release(ctx); err != nil {
			t.Error(err)
		}
	})
	writerAnswered := writerLog.first
	start := time.Now()
	more := func() bool {
		if !chain {
			select {
			case <-done:
				return false
			default:
				return time.Since(start) < 20*time.Second
			}
		}
		mu.Lock()
		defer mu.Unlock()
		return late < 20 && time.Since(start) < 10*time.Second
	}
	for i := 0; more(); i++ {
		reader := readers[i%len(readers)]
		wg.Go(func() {
			arrivedLate := false
			select {
			case <-writerAnswered:
				arrivedLate = true
			default:
			}
			a := newAttemptLog()
			r, err := reader.Read(withAttempts(ctx, a), time.Minute)
			if err != nil {
				t.Error(err)
				return
			}
			in := time.Now()
			mu.Lock()
			close(next)
			next = make(chan struct{})
			successor := next
			if arrivedLate {
				late++
			}
			if admits++; admits == 5 {
				close(admitted)
			}
			mu.Unlock()
			time.Sleep(time.Until(in.Add(100 * time.Millisecond))) // hold
			select {
			case <-writerAnswered:
			case <-done: // the writer failed
			}
			if chain {
				select {
				case <-successor:
				case <-stopped:
				}
			}
			if _, err := r.Release(ctx); err != nil {
				t.Error(err)
			}
			mu.Lock()
			run.readers = append(run.readers, streamReader{a.spans(), time.Now()})
			mu.Unlock()
		})
		time.Sleep(10 * time.Millisecond) // the next arrival
	}
	close(stopped)
	wg.Wait()
	run.writer = writerLog.spans()
	if len(run.writer) < 2 {
		t.Fatalf("the writer made %d acquire attempts: its first one was not refused, the stream shows nothing", len(run.writer))
	}
	return run
}

// Phase-fair and writer preference: with readers arriving every 10 ms, each holding 100
// ms, a waiting writer gets in once the readers present when it started
// have left, and no new reader gets in meanwhile. Under reader preference, readers keep
// getting in while the writer waits.
func TestWriterPreference(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		for _, p := range []rwlease.Policy{rwlease.PhaseFair, rwlease.WriterPreference} {
			r := stream(t, b, "pref-"+p.String(), false, rwlease.WithPolicy(p))
			t.Logf("%s: %v: the writer waited %v (%d attempts); %d readers got in meanwhile", b.Name, p, r.wait().Round(time.Millisecond), len(r.writer), r.during())
			if n := r.during(); n != 0 {
				t.Errorf("%v: %d readers got in while the writer waited, want none", p, n)
			}
			// The readers that may have held when the writer succeeded: those
			// whose successful attempt was sent before the writer's. Every
			// refused attempt of the writer was sent before the last of them
			// left: it got in at its first attempt after they had.
			var left time.Time
			for _, rd := range r.readers {
				if rd.attempts[len(rd.attempts)-1].sent.Before(r.got()) && rd.released.After(left) {
					left = rd.released
				}
			}
			for i, a := range r.writer[:len(r.writer)-1] {
				if a.sent.After(left) {
					t.Errorf("the writer's attempt %d was refused though every reader that got in before it had left", i+1)
				}
			}
			// And that attempt was woken by a reader's release, not the re-check.
			if last := r.writer[len(r.writer)-2:]; last[1].sent.Sub(last[0].returned) >= rwlease.DefaultRecheck {
				t.Errorf("the writer's successful attempt came %v after its previous one: its re-check, not a release's notification", last[1].sent.Sub(last[0].returned))
			}
		}

		r := stream(t, b, "nopref", true, rwlease.WithPolicy(rwlease.ReaderPreference))
		t.Logf("%s: without writer preference the writer waited %v (%d attempts); %d readers got in meanwhile", b.Name, r.wait().Round(time.Millisecond), len(r.writer), r.during())
		if n := r.during(); n < 10 {
			t.Errorf("without writer preference only %d readers got in while the writer waited %v, want them to keep getting in", n, r.wait())
		}
	})
}

// New sends nothing; one RWMutex serves concurrent acquisitions in both
// modes and is reusable after they release; Key gives the key as passed.
func TestRWMutexIsAReusableValue(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Client(t)
		k := testharness.CountCommands(raw)
		coord := must(coordination.New(raw, coordination.WithKeyPrefix(b.Prefix())))(t)
		m := newRW(t, coord, "reuse")
		if k.Count() != 0 {
			t.Fatalf("New sent %v", k.Names())
		}
		if m.Key() != "reuse" {
			t.Fatalf("Key = %q", m.Key())
		}
		var wg sync.WaitGroup
		leases := make([]*rwlease.Lease, 6)
		for i := range leases {
			wg.Go(func() {
				l, err := m.TryRead(ctx, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				leases[i] = l
			})
		}
		wg.Wait()
		if got := entries(t, b.Raw(t), b.Key("reuse")); len(got) != len(leases) {
			t.Fatalf("%d readers hold, want %d", len(got), len(leases))
		}
		if _, err := m.TryWrite(ctx, time.Minute); !errors.Is(err, coordination.ErrNotAcquired) {
			t.Fatalf("TryWrite with readers holding: %v, want ErrNotAcquired", err)
		}
		for _, l := range leases {
			if l == nil || l.Key() != "reuse" || l.Mode() != rwlease.ReadMode {
				t.Fatalf("read lease %+v", l)
			}
			must(l.Release(ctx))(t)
		}
		w := must(m.TryWrite(ctx, time.Minute))(t)
		if w.Mode() != rwlease.WriteMode {
			t.Fatalf("mode %v", w.Mode())
		}
		must(w.Release(ctx))(t)
		r := must(m.TryRead(ctx, time.Minute))(t)
		must(r.Release(ctx))(t)
	})
}
