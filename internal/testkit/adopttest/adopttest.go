// Package adopttest is the test suite of adopting, reading and
// force-releasing a held lease, shared by every lease kind that has them
// (lock.Mutex, lock.FieldSet, fencing.Mutex, rwlease.RWMutex,
// semaphore.Semaphore, redlock.Group on a key): a new coordinator (a restarted process) adopts a
// lease by its token and holds it exactly like the acquirer (Remaining
// from the server's TTL, Refresh, Verify, KeepAlive, Release); a wrong
// token is not held; a malformed one is refused with nothing sent; the
// holder read is exact and writes nothing; a forced release wakes a
// blocked acquirer at once, reports false for a token that holds nothing
// and refuses a value outside the kind's layout (ErrBadState), writing
// nothing. Each kind's tests call [Run] with a [Subject].
package adopttest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/contract"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// Handle is what the suite needs from a held lease.
type Handle interface {
	Token() string
	Remaining() time.Duration
	Refresh(ctx context.Context, ttl time.Duration) (bool, error)
	Verify(ctx context.Context) (bool, error)
	Release(ctx context.Context) (coordination.ReleaseOutcome, error)
	KeepAlive()
}

// Ops are one lease's operations on one coordinator.
type Ops struct {
	// TryAcquire takes the lease at once (exclusively: a second TryAcquire
	// is refused while it is held).
	TryAcquire func(ctx context.Context, ttl time.Duration) (Handle, error)
	// Acquire takes it, waiting as long as ctx allows.
	Acquire func(ctx context.Context, ttl time.Duration) (Handle, error)
	Adopt   func(ctx context.Context, token string) (Handle, error)
	// Holders reads the holders (a single-holder kind's Holder as a list
	// of one, nil for ErrNotHeld).
	Holders      func(ctx context.Context) ([]coordination.Holder, error)
	ForceRelease func(ctx context.Context, token string) (bool, error)
}

// Subject describes one lease kind.
type Subject struct {
	// Skip returns why b cannot run the kind ("" to run).
	Skip func(b *testharness.Backend) string
	// New returns the operations on the lease named name on c.
	New func(t testing.TB, c *coordination.Coordinator, name string) Ops
	// Keys returns the lease's keys (without the prefix) whose content a
	// read must leave as it was.
	Keys func(name string) []string
	// Expect returns the holder the read must report for h (Remaining is
	// checked by the suite, and set to 0 in what it compares).
	Expect func(h Handle) coordination.Holder
	// Garbage writes, with admin, a value outside the kind's layout at
	// the lease named name (its keys are prefix + each of Keys(name)):
	// ForceRelease over it must fail with an error wrapping
	// coordination.ErrBadState and leave it as it was.
	Garbage func(ctx context.Context, admin redis.UniversalClient, prefix, name string) error
}

func must[T any](v T, err error) func(t testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return v
	}
}

// Run runs the suite on every backend.
func Run(t *testing.T, s Subject) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		if s.Skip != nil {
			if why := s.Skip(b); why != "" {
				t.Skip(why)
			}
		}
		t.Run("adopt", func(t *testing.T) { adopt(t, b, s) })
		t.Run("keepalive", func(t *testing.T) { keepAlive(t, b, s) })
		t.Run("force", func(t *testing.T) { force(t, b, s) })
		t.Run("garbage", func(t *testing.T) { garbage(t, b, s) })
	})
}

// garbage: ForceRelease over a value outside the layout is refused with
// ErrBadState, as Holder and Adopt refuse a value that is not a holding,
// and writes nothing (it used to answer false, nil).
func garbage(t *testing.T, b *testharness.Backend, s Subject) {
	if s.Garbage == nil {
		t.Skip("the subject writes no garbage")
	}
	ctx := context.Background()
	name := "garbage"
	admin := b.Admin(t)
	if err := s.Garbage(ctx, admin, b.Prefix(), name); err != nil {
		t.Fatal(err)
	}
	before := dump(ctx, t, admin, b, s.Keys(name))
	ops := s.New(t, b.Coordinator(t), name)
	tok, err := engine.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	ok, err := ops.ForceRelease(ctx, tok)
	if ok || !errors.Is(err, coordination.ErrBadState) {
		t.Fatalf("ForceRelease over a value outside the layout = %v, %v; want false and ErrBadState", ok, err)
	}
	t.Logf("ForceRelease over a value outside the layout: %v", err)
	if after := dump(ctx, t, admin, b, s.Keys(name)); !slices.Equal(before, after) {
		t.Fatalf("ForceRelease wrote over the value outside the layout")
	}
	for _, k := range s.Keys(name) {
		if n, err := admin.Exists(ctx, b.Prefix()+k).Result(); err != nil || n != 1 {
			t.Fatalf("key %q after ForceRelease: exists %d, %v; want it kept", k, n, err)
		}
	}
}

func dump(ctx context.Context, t testing.TB, admin redis.UniversalClient, b *testharness.Backend, keys []string) []string {
	t.Helper()
	if b.IsMini() {
		return nil // miniredis' DUMP takes strings only
	}
	var out []string
	for _, k := range keys {
		v, err := admin.Dump(ctx, b.Prefix()+k).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

func adopt(t *testing.T, b *testharness.Backend, s Subject) {
	ctx := context.Background()
	name := "adopt"
	first := s.New(t, b.Coordinator(t), name)
	const ttl = 20 * time.Second
	l := must(first.TryAcquire(ctx, ttl))(t)

	// A restarted process: a new coordinator on a new client.
	c := b.Coordinator(t)
	ops := s.New(t, c, name)
	counter := testharness.CountCommands(c.Client())

	// A malformed token: refused, nothing sent.
	for _, bad := range []string{"", "short", l.Token() + "x", strings.Repeat("!", 22)} {
		if _, err := ops.Adopt(ctx, bad); !errors.Is(err, coordination.ErrInvalidArgument) || !strings.Contains(err.Error(), "token") {
			t.Fatalf("Adopt(%q) = %v, want ErrInvalidArgument naming token", bad, err)
		}
		if _, err := ops.ForceRelease(ctx, bad); !errors.Is(err, coordination.ErrInvalidArgument) || !strings.Contains(err.Error(), "token") {
			t.Fatalf("ForceRelease(%q) = %v, want ErrInvalidArgument naming token", bad, err)
		}
	}
	if n := counter.Names(); len(n) != 0 {
		t.Fatalf("malformed tokens sent %v", n)
	}

	// A token that holds nothing.
	other, err := engine.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ops.Adopt(ctx, other); !errors.Is(err, coordination.ErrNotHeld) {
		t.Fatalf("Adopt(another token) = %v, want ErrNotHeld", err)
	}

	// The read: exact, one command, nothing written.
	admin := b.Admin(t)
	before := dump(ctx, t, admin, b, s.Keys(name))
	counter.Reset()
	hs := must(ops.Holders(ctx))(t)
	if got := counter.Names(); !slices.Equal(got, []string{"EVALSHA"}) && !slices.Equal(got, []string{"EVALSHA", "EVAL"}) {
		t.Fatalf("Holders sent %v, want one script", got)
	}
	if after := dump(ctx, t, admin, b, s.Keys(name)); !slices.Equal(before, after) {
		t.Fatalf("Holders wrote to the keys")
	}
	if len(hs) != 1 {
		t.Fatalf("Holders = %+v, want one", hs)
	}
	if hs[0].Remaining <= ttl-5*time.Second || hs[0].Remaining > ttl {
		t.Fatalf("Holder.Remaining = %v, want about %v", hs[0].Remaining, ttl)
	}
	got := hs[0]
	got.Remaining = 0
	if want := s.Expect(l); got != want {
		t.Fatalf("Holder = %+v, want %+v", got, want)
	}

	// Adopt: one command; a handle like the acquirer's.
	counter.Reset()
	a, err := ops.Adopt(ctx, l.Token())
	if err != nil {
		t.Fatal(err)
	}
	if got := counter.Names(); len(got) != 1 && !slices.Equal(got, []string{"EVALSHA", "EVAL"}) {
		t.Fatalf("Adopt sent %v, want one script", got)
	}
	if a.Token() != l.Token() {
		t.Fatalf("adopted token %q, want %q", a.Token(), l.Token())
	}
	if r := a.Remaining(); r <= ttl-5*time.Second || r > hs[0].Remaining {
		t.Fatalf("adopted Remaining = %v, want at most the server's %v and about %v", r, hs[0].Remaining, ttl)
	}
	if ok, err := a.Verify(ctx); err != nil || !ok {
		t.Fatalf("adopted Verify = %v, %v", ok, err)
	}
	if ok, err := a.Refresh(ctx, time.Minute); err != nil || !ok {
		t.Fatalf("adopted Refresh = %v, %v", ok, err)
	}
	if r := a.Remaining(); r <= 50*time.Second {
		t.Fatalf("Remaining after Refresh(1m) = %v", r)
	}
	hs = must(ops.Holders(ctx))(t)
	if len(hs) != 1 || hs[0].Remaining <= 50*time.Second {
		t.Fatalf("Holders after the adopted Refresh(1m) = %+v", hs)
	}
	if out, err := a.Release(ctx); err != nil || out != coordination.Released {
		t.Fatalf("adopted Release = %v, %v", out, err)
	}
	if hs, err := ops.Holders(ctx); err != nil && !errors.Is(err, coordination.ErrNotHeld) || len(hs) != 0 {
		t.Fatalf("Holders after the release = %+v, %v; want none", hs, err)
	}
	if _, err := ops.Adopt(ctx, l.Token()); !errors.Is(err, coordination.ErrNotHeld) {
		t.Fatalf("Adopt after the release = %v, want ErrNotHeld", err)
	}
	if ok, err := l.Verify(ctx); err != nil || ok {
		t.Fatalf("the first process's Verify after the adopted release = %v, %v; want false", ok, err)
	}
}

func keepAlive(t *testing.T, b *testharness.Backend, s Subject) {
	if b.IsMini() {
		t.Skip("miniredis' clock does not run")
	}
	ctx := context.Background()
	name := "keepalive"
	l := must(s.New(t, b.Coordinator(t), name).TryAcquire(ctx, time.Second))(t)
	ops := s.New(t, b.Coordinator(t), name)
	a := must(ops.Adopt(ctx, l.Token()))(t)
	a.KeepAlive()
	time.Sleep(2500 * time.Millisecond)
	if ok, err := a.Verify(ctx); err != nil || !ok {
		t.Fatalf("adopted lease kept alive: Verify = %v, %v after 2.5 TTLs", ok, err)
	}
	if _, err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func force(t *testing.T, b *testharness.Backend, s Subject) {
	ctx := context.Background()
	name := "force"
	l := must(s.New(t, b.Coordinator(t), name).TryAcquire(ctx, time.Minute))(t)
	waiter := s.New(t, b.Coordinator(t), name)
	if _, err := waiter.TryAcquire(ctx, time.Minute); !errors.Is(err, coordination.ErrNotAcquired) {
		t.Fatalf("TryAcquire while held = %v, want ErrNotAcquired", err)
	}
	type result struct {
		h   Handle
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	go func() {
		h, err := waiter.Acquire(wctx, time.Minute)
		done <- result{h, err, time.Now()}
	}()
	time.Sleep(300 * time.Millisecond) // the waiter is blocked
	select {
	case r := <-done:
		t.Fatalf("the waiter did not block: %v", r.err)
	default:
	}
	admin := s.New(t, b.Coordinator(t), name)
	other, _ := engine.NewToken()
	if ok, err := admin.ForceRelease(ctx, other); err != nil || ok {
		t.Fatalf("ForceRelease(a token holding nothing) = %v, %v; want false", ok, err)
	}
	start := time.Now()
	if ok, err := admin.ForceRelease(ctx, l.Token()); err != nil || !ok {
		t.Fatalf("ForceRelease(the holder's token) = %v, %v; want true", ok, err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("the waiter after the forced release: %v", r.err)
	}
	d := r.at.Sub(start)
	if d > 500*time.Millisecond {
		t.Fatalf("the waiter took %v after the forced release, want at once", d)
	}
	t.Logf("the waiter held the lease %v after the forced release was sent", d)
	if ok, err := admin.ForceRelease(ctx, l.Token()); err != nil || ok {
		t.Fatalf("second ForceRelease = %v, %v; want false", ok, err)
	}
	if ok, err := l.Verify(ctx); err != nil || ok {
		t.Fatalf("the forced holder's Verify = %v, %v; want false", ok, err)
	}
	hs := must(admin.Holders(ctx))(t)
	if len(hs) != 1 || hs[0].Token != r.h.Token() {
		t.Fatalf("Holders after the takeover = %+v, want the waiter %s", hs, r.h.Token())
	}
	if _, err := r.h.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// Names are a kind's hook operation names for the contract suite.
type Names struct {
	Primitive                string
	AcquireOp                string
	AcquireCommand           string // the acquisition's one command when not a script ("SET")
	AdoptOp, ReadOp, ForceOp string
	ForceOneCommand          bool // the force release is one script (not a read, then the release)
	Backends                 []testharness.Option
	KeysOf                   func(name string) []string
	Expect                   func(h Handle) coordination.Holder
	New                      func(t testing.TB, c *coordination.Coordinator, name string) Ops
}

// Contract runs the contract suite (package contract) on a scenario of
// the kind's new operations: acquire, read the holders, adopt by token,
// adopt with another token (not held), force-release, force-release again
// (false).
func Contract(t *testing.T, n Names) {
	contract.Run(t, contract.Spec{
		Primitive:   n.Primitive,
		Keys:        n.KeysOf,
		NoLostReply: "Adopt and Holder(s) write nothing; ForceRelease is sent at most once, its lost reply ambiguous for the administrator to read again",
		Backends:    n.Backends,
		Scenario: func(name string) []contract.Step {
			var ops Ops
			var l Handle
			get := func(c *coordination.Coordinator) Ops {
				ops = n.New(t, c, name)
				return ops
			}
			return []contract.Step{
				{Name: "TryAcquire", Op: n.AcquireOp, OneCommand: true, Command: n.AcquireCommand, Run: func(ctx context.Context, c *coordination.Coordinator) (err error) {
					l, err = get(c).TryAcquire(ctx, time.Minute)
					return err
				}},
				{Name: "Holders", Op: n.ReadOp, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
					hs, err := get(c).Holders(ctx)
					if err != nil {
						return err
					}
					if len(hs) != 1 {
						return fmt.Errorf("Holders = %+v, want one", hs)
					}
					h := hs[0]
					h.Remaining = 0
					return contract.Expect("Holder", h, n.Expect(l))
				}},
				{Name: "Adopt", Op: n.AdoptOp, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
					a, err := get(c).Adopt(ctx, l.Token())
					if err == nil && a.Token() != l.Token() {
						err = fmt.Errorf("adopted token %q, want %q", a.Token(), l.Token())
					}
					return err
				}},
				{Name: "Adopt by another token", Op: n.AdoptOp, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
					other, _ := engine.NewToken()
					if _, err := get(c).Adopt(ctx, other); !errors.Is(err, coordination.ErrNotHeld) {
						return fmt.Errorf("want ErrNotHeld, got %v", err)
					}
					return nil
				}},
				{Name: "ForceRelease", Op: n.ForceOp, OneCommand: n.ForceOneCommand, SentOnce: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
					ok, err := get(c).ForceRelease(ctx, l.Token())
					if err == nil {
						err = contract.Expect("ForceRelease", ok, true)
					}
					return err
				}},
				{Name: "ForceRelease again", Op: n.ForceOp, SentOnce: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
					ok, err := get(c).ForceRelease(ctx, l.Token())
					if err == nil {
						err = contract.Expect("ForceRelease", ok, false)
					}
					return err
				}},
			}
		},
	})
}
