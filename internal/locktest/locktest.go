// Package locktest is the behavioural test suite shared by every lock-shaped
// primitive (package lock, package fencing): acquisition and contention,
// owner-checked refresh and release after expiry, one command per
// operation, blocking waits, bad input, hooks, key prefix and binary keys,
// script-cache flushes, keep-alive and loss. Each primitive's tests call
// [Run] with a [Subject] describing it.
package locktest

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
	"github.com/coordkit/coordination/internal/testharness"
)

// Handle is what the suite needs from a held lock.
type Handle interface {
	Token() string
	Remaining() time.Duration
	Context() context.Context
	Refresh(ctx context.Context, ttl time.Duration) (bool, error)
	Verify(ctx context.Context) (bool, error)
	Release(ctx context.Context) (coordination.ReleaseOutcome, error)
	KeepAlive()
}

// Subject describes a lock-shaped primitive under test.
type Subject struct {
	// Primitive is the hooks primitive kind, e.g. "lock".
	Primitive string
	// AcquireOp is the hook operation name of acquisition.
	AcquireOp string
	// Acquire calls the primitive's TryAcquire (block=false) or Acquire
	// (block=true) on the lock named name (the subject derives its keys
	// from it; they must share one slot).
	Acquire func(ctx context.Context, c *coordination.Coordinator, name string, ttl time.Duration, block bool) (Handle, error)
	// LeaseKey returns the (unprefixed) key holding the lease of name.
	LeaseKey func(name string) string
	// BadInputs lists invalid calls (each must fail with
	// ErrInvalidArgument naming Arg, sending nothing).
	BadInputs []BadInput
}

// BadInput is one invalid call.
type BadInput struct {
	Arg  string // the argument the error must name
	Call func(ctx context.Context, c *coordination.Coordinator) error
}

// Run runs the whole suite for s on every backend.
func Run(t *testing.T, s Subject) {
	t.Run("AcquireContendRelease", func(t *testing.T) {
		testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) { acquireContendRelease(t, b, s) })
	})
	t.Run("ExpiredOwnerCannotTouchSuccessor", func(t *testing.T) {
		testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) { expiredOwner(t, b, s) })
	})
	t.Run("OneCommandPerOperation", func(t *testing.T) {
		testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) { oneCommand(t, b, s) })
	})
	t.Run("BlockingAcquireWakesOnRelease", func(t *testing.T) {
		testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) { wakeOnRelease(t, b, s) })
	})
	t.Run("BlockingAcquireAfterCrash", func(t *testing.T) {
		testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) { acquireAfterCrash(t, b, s) })
	})
	t.Run("BadInputSendsNothing", func(t *testing.T) {
		testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) { badInput(t, b, s) })
	})
	t.Run("Hooks", func(t *testing.T) {
		testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) { hookOutcomes(t, b, s) })
	})
	t.Run("PrefixAndBinaryKeys", func(t *testing.T) {
		testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) { prefixAndBinary(t, b, s) })
	})
	t.Run("ScriptFlush", func(t *testing.T) {
		testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) { scriptFlush(t, b, s) })
	})
	t.Run("LostReplyIsCleanedUp", func(t *testing.T) {
		testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) { lostReply(t, b, s) })
	})
	t.Run("LocalExpiryCancelsContext", func(t *testing.T) {
		testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) { localExpiry(t, b, s) })
	})
	t.Run("KeepAliveHoldsAndDetectsLoss", func(t *testing.T) {
		testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) { keepAlive(t, b, s) }, testharness.RealOnly())
	})
	t.Run("WrongType", func(t *testing.T) {
		testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) { wrongType(t, b, s) })
	})
	t.Run("Contention", func(t *testing.T) {
		testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) { contention(t, b, s) })
	})
}

// must returns v, failing the test when err is not nil:
// must(f())(t).
func must[T any](v T, err error) func(t *testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return v
	}
}

func acquireContendRelease(t *testing.T, b *testharness.Backend, s Subject) {
	ctx := context.Background()
	c1, c2 := b.Coordinator(t), b.Coordinator(t)
	h := must(s.Acquire(ctx, c1, "{a}", time.Minute, false))(t)
	if len(h.Token()) != 36 {
		t.Errorf("owner token %q: want 36 characters", h.Token())
	}
	if r := h.Remaining(); r <= 58*time.Second || r > time.Minute {
		t.Errorf("Remaining = %v, want just under 1m", r)
	}
	if _, err := s.Acquire(ctx, c2, "{a}", time.Minute, false); !errors.Is(err, coordination.ErrNotAcquired) {
		t.Fatalf("second TryAcquire: %v, want ErrNotAcquired", err)
	}
	if ok := must(h.Verify(ctx))(t); !ok {
		t.Fatal("Verify = false for the holder")
	}
	if out := must(h.Release(ctx))(t); out != coordination.Released {
		t.Fatalf("Release = %v, want Released", out)
	}
	if out := must(h.Release(ctx))(t); out != coordination.AlreadyReleased {
		t.Fatalf("second Release = %v, want AlreadyReleased", out)
	}
	if !errors.Is(context.Cause(h.Context()), coordination.ErrReleased) {
		t.Errorf("context cause after release = %v, want ErrReleased", context.Cause(h.Context()))
	}
	if h.Remaining() != 0 {
		t.Errorf("Remaining after release = %v", h.Remaining())
	}
	if ok := must(h.Refresh(ctx, time.Minute))(t); ok {
		t.Error("Refresh after release = true")
	}
	h2 := must(s.Acquire(ctx, c2, "{a}", time.Minute, false))(t)
	if h2.Token() == h.Token() {
		t.Error("two holders got the same owner token")
	}
	if out := must(h2.Release(ctx))(t); out != coordination.Released {
		t.Fatalf("Release = %v", out)
	}
}

func expiredOwner(t *testing.T, b *testharness.Backend, s Subject) {
	ctx := context.Background()
	c1, c2 := b.Coordinator(t), b.Coordinator(t)
	raw := b.Client(t)
	old := must(s.Acquire(ctx, c1, "{e}", 60*time.Millisecond, false))(t)
	b.Advance(120 * time.Millisecond)
	next := must(s.Acquire(ctx, c2, "{e}", time.Minute, false))(t)
	key := b.Key(s.LeaseKey("{e}"))
	before := must(raw.PTTL(ctx, key).Result())(t)

	if ok := must(old.Refresh(ctx, time.Hour))(t); ok {
		t.Fatal("expired owner's Refresh = true")
	}
	if out := must(old.Release(ctx))(t); out != coordination.NotOwned && out != coordination.AlreadyReleased {
		t.Fatalf("expired owner's Release = %v", out)
	}
	after := must(raw.PTTL(ctx, key).Result())(t)
	if after > before || after < before-5*time.Second {
		t.Fatalf("successor's TTL changed: %v -> %v", before, after)
	}
	if ok := must(next.Verify(ctx))(t); !ok {
		t.Fatal("successor lost its lock")
	}
	if !errors.Is(context.Cause(old.Context()), coordination.ErrLost) {
		t.Errorf("old owner's context cause = %v, want ErrLost", context.Cause(old.Context()))
	}

	// A fresh expired owner whose Release reaches Redis finds another owner.
	third := must(s.Acquire(ctx, b.Coordinator(t), "{e2}", 60*time.Millisecond, false))(t)
	b.Advance(120 * time.Millisecond)
	fourth := must(s.Acquire(ctx, c2, "{e2}", time.Minute, false))(t)
	if out := must(third.Release(ctx))(t); out != coordination.NotOwned {
		t.Fatalf("Release of another owner's lock = %v, want NotOwned", out)
	}
	if ok := must(fourth.Verify(ctx))(t); !ok {
		t.Fatal("NotOwned release removed the successor's lock")
	}
	// Expired with no successor: AlreadyReleased.
	fifth := must(s.Acquire(ctx, c1, "{e3}", 60*time.Millisecond, false))(t)
	b.Advance(120 * time.Millisecond)
	if out := must(fifth.Release(ctx))(t); out != coordination.AlreadyReleased {
		t.Fatalf("Release after expiry = %v, want AlreadyReleased", out)
	}
	must(next.Release(ctx))(t)
	must(fourth.Release(ctx))(t)
}

func oneCommand(t *testing.T, b *testharness.Backend, s Subject) {
	ctx := context.Background()
	client := b.Client(t)
	coord := must(coordination.New(client, coordination.WithKeyPrefix(b.Prefix())))(t)
	// Warm the script cache (on a cluster, on the node that owns the slot).
	w := must(s.Acquire(ctx, coord, "{one}", time.Minute, false))(t)
	must(w.Refresh(ctx, time.Minute))(t)
	must(w.Verify(ctx))(t)
	must(w.Release(ctx))(t)

	k := testharness.CountCommands(client)
	var h Handle
	k.ExpectOne(t, "acquire", func() (err error) { h, err = s.Acquire(ctx, coord, "{one}", time.Minute, false); return err })
	k.ExpectOne(t, "refresh", func() error { _, err := h.Refresh(ctx, time.Minute); return err })
	k.ExpectOne(t, "verify", func() error { _, err := h.Verify(ctx); return err })
	k.ExpectOne(t, "release", func() error { _, err := h.Release(ctx); return err })
	h2 := must(s.Acquire(ctx, coord, "{one}", time.Minute, false))(t)
	k.ExpectOne(t, "contended acquire", func() error {
		if _, err := s.Acquire(ctx, coord, "{one}", time.Minute, false); !errors.Is(err, coordination.ErrNotAcquired) {
			return fmt.Errorf("want ErrNotAcquired, got %v", err)
		}
		return nil
	})
	must(h2.Release(ctx))(t)
}

// wakeOnRelease measures, over 5 handoffs, the time from a release to the
// blocked waiter holding the lock, and requires the median to be within
// 50 ms (one scheduling hiccup on a loaded machine does not fail it).
func wakeOnRelease(t *testing.T, b *testharness.Backend, s Subject) {
	ctx := context.Background()
	var lat []time.Duration
	for round := range 5 {
		name := fmt.Sprintf("{w%d}", round)
		holder := must(s.Acquire(ctx, b.Coordinator(t), name, time.Minute, false))(t)
		type result struct {
			at time.Time
			h  Handle
		}
		got := make(chan result, 1)
		coord := b.Coordinator(t)
		go func() {
			h, err := s.Acquire(ctx, coord, name, time.Minute, true)
			if err != nil {
				t.Error(err)
			}
			got <- result{time.Now(), h}
		}()
		time.Sleep(100 * time.Millisecond) // let the waiter subscribe and sleep
		released := time.Now()
		must(holder.Release(ctx))(t)
		select {
		case r := <-got:
			lat = append(lat, r.at.Sub(released))
			if r.h != nil {
				must(r.h.Release(ctx))(t)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("waiter did not acquire within 5s of the release")
		}
	}
	sorted := slices.Clone(lat)
	slices.Sort(sorted)
	if med := sorted[len(sorted)/2]; med > 50*time.Millisecond {
		t.Errorf("median wake-up %v after the release (all: %v), want <= 50ms", med, lat)
	} else {
		t.Logf("wake-up latencies %v (median %v)", lat, med)
	}
}

func acquireAfterCrash(t *testing.T, b *testharness.Backend, s Subject) {
	ctx := context.Background()
	// The holder "crashes": it never releases or renews.
	must(s.Acquire(ctx, b.Coordinator(t), "{c}", 200*time.Millisecond, false))(t)
	start := time.Now()
	done := make(chan Handle, 1)
	go func() {
		h, err := s.Acquire(ctx, b.Coordinator(t), "{c}", time.Minute, true)
		if err != nil {
			t.Error(err)
		}
		done <- h
	}()
	if b.IsMini() {
		time.Sleep(50 * time.Millisecond)
		b.Advance(250 * time.Millisecond)
	}
	select {
	case h := <-done:
		el := time.Since(start)
		if !b.IsMini() && el < 150*time.Millisecond {
			t.Errorf("acquired after %v, before the crashed holder's TTL", el)
		}
		if el > 2*time.Second {
			t.Errorf("acquired %v after start; want about the 200ms TTL", el)
		}
		if h != nil {
			must(h.Release(ctx))(t)
		}
	case <-time.After(6 * time.Second):
		t.Fatal("waiter never acquired the crashed holder's lock")
	}
}

func badInput(t *testing.T, b *testharness.Backend, s Subject) {
	ctx := context.Background()
	client := b.Client(t)
	coord := must(coordination.New(client, coordination.WithKeyPrefix(b.Prefix())))(t)
	k := testharness.CountCommands(client)
	for _, bi := range s.BadInputs {
		err := bi.Call(ctx, coord)
		var ae *coordination.ArgumentError
		if !errors.Is(err, coordination.ErrInvalidArgument) || !errors.As(err, &ae) || ae.Name != bi.Arg {
			t.Errorf("bad %s: got %v, want ErrInvalidArgument naming %q", bi.Arg, err, bi.Arg)
		}
	}
	for _, ttl := range []time.Duration{0, -time.Second, 500 * time.Microsecond} {
		_, err := s.Acquire(ctx, coord, "{bad}", ttl, false)
		var ae *coordination.ArgumentError
		if !errors.As(err, &ae) || ae.Name != "ttl" {
			t.Errorf("ttl %v: got %v, want an ErrInvalidArgument naming ttl", ttl, err)
		}
	}
	if _, err := s.Acquire(ctx, nil, "{bad}", time.Second, false); !errors.Is(err, coordination.ErrInvalidArgument) {
		t.Errorf("nil coordinator: %v", err)
	}
	if _, err := coordination.New(nil); !errors.Is(err, coordination.ErrInvalidArgument) {
		t.Errorf("coordination.New(nil): %v", err)
	}
	var nilClient *redis.Client
	if _, err := coordination.New(nilClient); !errors.Is(err, coordination.ErrInvalidArgument) {
		t.Errorf("coordination.New((*redis.Client)(nil)): %v", err)
	}
	// A valid acquire with an invalid Refresh TTL is rejected before sending.
	h := must(s.Acquire(ctx, coord, "{bad}", time.Minute, false))(t)
	k.Reset()
	if _, err := h.Refresh(ctx, 0); !errors.Is(err, coordination.ErrInvalidArgument) {
		t.Errorf("Refresh(0): %v", err)
	}
	if n := k.Count(); n != 0 {
		t.Errorf("bad input sent %d commands: %v", n, k.Names())
	}
	must(h.Release(ctx))(t)
}

func hookOutcomes(t *testing.T, b *testharness.Backend, s Subject) {
	ctx := context.Background()
	// A rejecting hook fails the operation and nothing reaches Redis.
	client := b.Client(t)
	k := testharness.CountCommands(client)
	errNo := errors.New("maintenance window")
	rejecting := &testharness.HookRecorder{}
	rejecting.Reject(errNo)
	rej := must(coordination.New(client, coordination.WithKeyPrefix(b.Prefix()), coordination.WithHooks(rejecting)))(t)
	if _, err := s.Acquire(ctx, rej, "{h}", time.Minute, false); !errors.Is(err, errNo) {
		t.Fatalf("rejected acquire: %v, want the hook's error", err)
	}
	if n := k.Count(); n != 0 {
		t.Fatalf("a rejected operation sent %v", k.Names())
	}

	rec := &testharness.HookRecorder{}
	coord := must(coordination.New(b.Client(t), coordination.WithKeyPrefix(b.Prefix()), coordination.WithHooks(rec)))(t)
	acquired := s.Primitive + ":" + s.AcquireOp + ":"
	expectLast := func(what, want string) {
		t.Helper()
		ops := rec.Ops()
		if len(ops) == 0 || ops[len(ops)-1] != want {
			t.Errorf("%s: hook saw %v, want it to end with %q", what, ops, want)
		}
	}
	h := must(s.Acquire(ctx, coord, "{h}", time.Minute, false))(t)
	expectLast("acquire", acquired+"succeeded")
	if _, err := s.Acquire(ctx, coord, "{h}", time.Minute, false); !errors.Is(err, coordination.ErrNotAcquired) {
		t.Fatal(err)
	}
	expectLast("contended acquire", acquired+"succeeded")
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err := s.Acquire(cctx, coord, "{h}", time.Minute, true)
	cancel()
	if !errors.Is(err, coordination.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled blocking acquire: %v, want ErrNotAcquired and DeadlineExceeded", err)
	}
	expectLast("cancelled acquire", acquired+"canceled")
	before := len(rec.Ops())
	must(h.Release(ctx))(t)
	if ops := rec.Ops(); len(ops) != before+1 || !strings.HasSuffix(ops[len(ops)-1], "RELEASE:succeeded") {
		t.Errorf("release: hook saw %v", ops[before:])
	}
}

func prefixAndBinary(t *testing.T, b *testharness.Backend, s Subject) {
	ctx := context.Background()
	raw := b.Client(t)
	name := "{bin\x00\xff\n key}"
	coord := b.Coordinator(t)
	h := must(s.Acquire(ctx, coord, name, time.Minute, false))(t)
	full := b.Key(s.LeaseKey(name))
	if n := must(raw.Exists(ctx, full).Result())(t); n != 1 {
		t.Fatalf("the lease is not stored under the prefixed binary key %q", full)
	}
	if n := must(raw.Exists(ctx, s.LeaseKey(name)).Result())(t); n != 0 {
		t.Fatal("the lease is stored without the prefix")
	}
	if _, err := s.Acquire(ctx, b.Coordinator(t), name, time.Minute, false); !errors.Is(err, coordination.ErrNotAcquired) {
		t.Fatalf("binary key not contended: %v", err)
	}
	must(h.Release(ctx))(t)
	if n := must(raw.Exists(ctx, full).Result())(t); n != 0 {
		t.Fatal("release left the binary key")
	}
}

// flushScripts runs SCRIPT FLUSH on every node (every primary of a cluster).
func flushScripts(t *testing.T, b *testharness.Backend, c redis.UniversalClient) {
	ctx := context.Background()
	if cc, ok := c.(*redis.ClusterClient); ok {
		if err := cc.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error { return n.ScriptFlush(ctx).Err() }); err != nil {
			t.Fatal(err)
		}
		return
	}
	must(c.ScriptFlush(ctx).Result())(t)
}

func scriptFlush(t *testing.T, b *testharness.Backend, s Subject) {
	ctx := context.Background()
	client := b.Client(t)
	coord := must(coordination.New(client, coordination.WithKeyPrefix(b.Prefix())))(t)
	w := must(s.Acquire(ctx, coord, "{f}", time.Minute, false))(t)
	must(w.Release(ctx))(t)
	flushScripts(t, b, client)
	h := must(s.Acquire(ctx, coord, "{f}", time.Minute, false))(t)
	flushScripts(t, b, client)
	if ok := must(h.Refresh(ctx, time.Minute))(t); !ok {
		t.Fatal("Refresh after SCRIPT FLUSH = false")
	}
	flushScripts(t, b, client)
	if ok := must(h.Verify(ctx))(t); !ok {
		t.Fatal("Verify after SCRIPT FLUSH = false")
	}
	flushScripts(t, b, client)
	if out := must(h.Release(ctx))(t); out != coordination.Released {
		t.Fatalf("Release after SCRIPT FLUSH = %v", out)
	}
}

func lostReply(t *testing.T, b *testharness.Backend, s Subject) {
	ctx := context.Background()
	client := b.Client(t)
	d := &testharness.LostReply{}
	client.AddHook(d)
	coord := must(coordination.New(client, coordination.WithKeyPrefix(b.Prefix())))(t)
	raw := b.Client(t)
	key := b.Key(s.LeaseKey("{l}"))
	d.Arm()
	_, err := s.Acquire(ctx, coord, "{l}", time.Minute, false)
	if err == nil || !coordination.IsAmbiguous(err) {
		t.Fatalf("acquire with a lost reply: %v, want an ambiguous error", err)
	}
	// The acquire ran on the server; the background cleanup removes it.
	deadline := time.Now().Add(5 * time.Second)
	for must(raw.Exists(ctx, key).Result())(t) == 1 {
		if time.Now().After(deadline) {
			t.Fatal("the lease acquired by a lost reply was not cleaned up")
		}
		time.Sleep(10 * time.Millisecond)
	}
	h := must(s.Acquire(ctx, coord, "{l}", time.Minute, false))(t)
	must(h.Release(ctx))(t)
}

func localExpiry(t *testing.T, b *testharness.Backend, s Subject) {
	ctx := context.Background()
	h := must(s.Acquire(ctx, b.Coordinator(t), "{x}", 100*time.Millisecond, false))(t)
	select {
	case <-h.Context().Done():
	case <-time.After(2 * time.Second):
		t.Fatal("context not cancelled after the local deadline")
	}
	if !errors.Is(context.Cause(h.Context()), coordination.ErrLost) {
		t.Errorf("cause = %v, want ErrLost", context.Cause(h.Context()))
	}
	if h.Remaining() != 0 {
		t.Errorf("Remaining = %v after local expiry", h.Remaining())
	}
	if ok := must(h.Refresh(ctx, time.Second))(t); ok {
		t.Error("Refresh after local expiry = true")
	}
	_, _ = h.Release(ctx)
}

func keepAlive(t *testing.T, b *testharness.Backend, s Subject) {
	ctx := context.Background()
	raw := b.Client(t)
	h := must(s.Acquire(ctx, b.Coordinator(t), "{k}", 300*time.Millisecond, false))(t)
	h.KeepAlive()
	h.KeepAlive() // idempotent
	time.Sleep(time.Second)
	if ok := must(h.Verify(ctx))(t); !ok {
		t.Fatal("keep-alive did not hold the lock past 3 TTLs")
	}
	if h.Context().Err() != nil {
		t.Fatal("context cancelled while kept alive")
	}
	// Someone deletes the lease (an operator, or expiry during a pause): the
	// next renewal finds it gone and cancels the context.
	must(raw.Del(ctx, b.Key(s.LeaseKey("{k}"))).Result())(t)
	select {
	case <-h.Context().Done():
	case <-time.After(2 * time.Second):
		t.Fatal("loss not detected by the keep-alive")
	}
	if !errors.Is(context.Cause(h.Context()), coordination.ErrLost) {
		t.Errorf("cause = %v, want ErrLost", context.Cause(h.Context()))
	}
	if out := must(h.Release(ctx))(t); out != coordination.AlreadyReleased {
		t.Errorf("Release after loss = %v", out)
	}
}

func wrongType(t *testing.T, b *testharness.Backend, s Subject) {
	ctx := context.Background()
	raw := b.Client(t)
	key := b.Key(s.LeaseKey("{t}"))
	must(raw.RPush(ctx, key, "x").Result())(t)
	_, err := s.Acquire(ctx, b.Coordinator(t), "{t}", time.Minute, false)
	if !errors.Is(err, coordination.ErrWrongType) || coordination.Classify(err) != coordination.Terminal {
		t.Fatalf("acquire over a list: %v, want a terminal ErrWrongType", err)
	}
	if v := must(raw.LRange(ctx, key, 0, -1).Result())(t); len(v) != 1 || v[0] != "x" {
		t.Fatalf("the list was changed: %v", v)
	}
}

func contention(t *testing.T, b *testharness.Backend, s Subject) {
	ctx := context.Background()
	const workers, rounds = 8, 5
	var (
		mu      sync.Mutex
		holders int
		maxSeen int
		total   int
	)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			coord := b.Coordinator(t)
			for range rounds {
				h, err := s.Acquire(ctx, coord, "{m}", 5*time.Second, true)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				holders++
				total++
				maxSeen = max(maxSeen, holders)
				mu.Unlock()
				time.Sleep(time.Millisecond)
				mu.Lock()
				holders--
				mu.Unlock()
				if out, err := h.Release(ctx); err != nil || out != coordination.Released {
					t.Errorf("release: %v %v", out, err)
				}
			}
		}()
	}
	wg.Wait()
	if maxSeen != 1 || total != workers*rounds {
		t.Fatalf("max concurrent holders %d (want 1), acquisitions %d (want %d)", maxSeen, total, workers*rounds)
	}
}
