// Package locktest is the behavioural test suite shared by every
// lock-shaped primitive (package lock, package fencing): acquisition and
// contention, owner-checked refresh and release after expiry, blocking
// waits, keep-alive and loss, the one release semantics, and the faults a
// new user's try found (a lost reply followed by LOADING, a renewal in
// flight during a release). [Run] also runs the contract suite (package
// contract) on a lock-shaped scenario. Each primitive's tests call [Run]
// with a [Subject] describing it.
package locktest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/layout"
	"github.com/coordkit/coordination/internal/lockcore"
	"github.com/coordkit/coordination/internal/testkit/contract"
	"github.com/coordkit/coordination/internal/testkit/faultproxy"
	"github.com/coordkit/coordination/internal/testkit/testharness"
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
	// AcquireOp, RenewOp, VerifyOp and ReleaseOp are the hook operation
	// names.
	AcquireOp, RenewOp, VerifyOp, ReleaseOp string
	// Acquire calls the primitive's TryAcquire (block=false) or Acquire
	// (block=true) on the lock named name (the subject derives its keys
	// from it, keeping its {hash tag}).
	Acquire func(ctx context.Context, c *coordination.Coordinator, name string, ttl time.Duration, block bool) (Handle, error)
	// LeaseKey returns the (unprefixed) key holding the lease of name.
	LeaseKey func(name string) string
	// Keys returns every key an acquisition of name creates (default:
	// LeaseKey).
	Keys func(name string) []string
	// AcquireSHA and RefreshSHA are the SHA1s of the acquire and refresh
	// scripts (for fault injection).
	AcquireSHA, RefreshSHA string
	// FirstCommand is the lower-case name of the plain command of an
	// acquisition's first attempt when it is not the acquire script (the
	// lock's "set"); empty when every attempt runs the script.
	FirstCommand string
	// BadInputs lists invalid calls (each must fail with
	// ErrInvalidArgument naming Arg, sending nothing).
	BadInputs []contract.BadInput
	// Metrics lists the instruments a scenario records.
	Metrics []string
	// Backends restricts the backends every case runs on (testharness
	// options, e.g. HashFieldTTLOnly for a primitive that needs it).
	Backends []testharness.Option
	// OwnEntries says that each holder has an entry of its own (a member
	// of a sorted set) rather than sharing one value with its successor:
	// an expired owner's release then finds its own entry gone and answers
	// AlreadyReleased, never NotOwned.
	OwnEntries bool
	// Skip names cases of the lock-shaped suite not to run: for a variant
	// of a primitive whose handle (refresh, keep-alive, local expiry) is
	// the one a full run already tests.
	Skip []string
}

// Run runs the contract suite and the lock-shaped suite for s on every
// backend.
func Run(t *testing.T, s Subject) {
	contract.Run(t, s.contract())
	for _, c := range []struct {
		name string
		fn   func(*testing.T, *testharness.Backend, Subject)
		opts []testharness.Option
	}{
		{"AcquireContendRelease", acquireContendRelease, nil},
		{"ExpiredOwnerCannotTouchSuccessor", expiredOwner, nil},
		{"BlockingAcquireWakesOnRelease", wakeOnRelease, nil},
		{"BlockingAcquireAfterCrash", acquireAfterCrash, nil},
		{"BadTTLSendsNothing", badTTL, nil},
		{"LocalExpiryCancelsContext", localExpiry, nil},
		{"KeepAliveHoldsAndDetectsLoss", keepAlive, []testharness.Option{testharness.RealOnly()}},
		{"KeepAliveStartedLateRenewsAtOnce", keepAliveLate, nil},
		{"WrongType", wrongType, nil},
		{"Contention", contention, nil},
		{"FailedReleaseIsRetriedInTheBackground", failedRelease, nil},
		{"RenewalInFlightDuringRelease", renewalDuringRelease, []testharness.Option{testharness.RealOnly()}},
		{"LostReplyThenLoadingIsCleanedUp", lostReplyThenLoading, nil},
		{"BlockingAcquireKeepsAmbiguity", blockingAmbiguity, nil},
		{"ReleaseReSentThroughTheNetwork", releaseReSent, []testharness.Option{testharness.RealOnly(), testharness.StandaloneOnly()}},
	} {
		if slices.Contains(s.Skip, c.name) {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) { c.fn(t, b, s) }, append(c.opts, s.Backends...)...)
		})
	}
}

func (s Subject) firstCommands() []string {
	if s.FirstCommand == "" {
		return nil
	}
	return []string{s.FirstCommand}
}

// firstFault is f on an acquisition's first attempt: on the first command
// when the subject has one, on the acquire script otherwise.
func (s Subject) firstFault(f testharness.Fault) testharness.Fault {
	if s.FirstCommand != "" {
		f.Command = s.FirstCommand
	} else {
		f.SHA = s.AcquireSHA
	}
	return f
}

func (s Subject) keys(name string) []string {
	if s.Keys != nil {
		return s.Keys(name)
	}
	return []string{s.LeaseKey(name)}
}

// contract returns the contract suite's description of a lock-shaped
// primitive: acquire, contended acquire, a blocking acquire that gives up,
// refresh, verify, release.
func (s Subject) contract() contract.Spec {
	return contract.Spec{
		Primitive: s.Primitive,
		Keys:      s.keys,
		BadInputs: s.BadInputs,
		Metrics:   s.Metrics,
		Backends:  s.Backends,
		Scenario: func(name string) []contract.Step {
			var h Handle
			return []contract.Step{
				{Name: "TryAcquire", Op: s.AcquireOp, OneCommand: true, Command: strings.ToUpper(s.FirstCommand), Run: func(ctx context.Context, c *coordination.Coordinator) (err error) {
					h, err = s.Acquire(ctx, c, name, time.Minute, false)
					return err
				}},
				{Name: "contended TryAcquire", Op: s.AcquireOp, OneCommand: true, Command: strings.ToUpper(s.FirstCommand), Run: func(ctx context.Context, c *coordination.Coordinator) error {
					if _, err := s.Acquire(ctx, c, name, time.Minute, false); !errors.Is(err, coordination.ErrNotAcquired) {
						return fmt.Errorf("want ErrNotAcquired, got %v", err)
					}
					return nil
				}},
				{Name: "Acquire giving up", Op: s.AcquireOp, Outcome: hooks.Canceled, Run: func(ctx context.Context, c *coordination.Coordinator) error {
					// Long enough for a first attempt that is a script to be
					// answered after a SCRIPT FLUSH (NOSCRIPT, then EVAL: on
					// miniredis under -race on a loaded machine, tens of ms).
					ctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
					defer cancel()
					if _, err := s.Acquire(ctx, c, name, time.Minute, true); !errors.Is(err, coordination.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
						return fmt.Errorf("want ErrNotAcquired and DeadlineExceeded, got %v", err)
					}
					return nil
				}},
				{Name: "Refresh", Op: s.RenewOp, OneCommand: true, Run: func(ctx context.Context, _ *coordination.Coordinator) error {
					ok, err := h.Refresh(ctx, time.Minute)
					if err == nil && !ok {
						err = errors.New("Refresh = false for the holder")
					}
					return err
				}},
				{Name: "Verify", Op: s.VerifyOp, OneCommand: true, Run: func(ctx context.Context, _ *coordination.Coordinator) error {
					ok, err := h.Verify(ctx)
					if err == nil && !ok {
						err = errors.New("Verify = false for the holder")
					}
					return err
				}},
				{Name: "Release", Op: s.ReleaseOp, OneCommand: true, Run: func(ctx context.Context, _ *coordination.Coordinator) error {
					out, err := h.Release(ctx)
					if err == nil {
						err = contract.Expect("Release", out, coordination.Released)
					}
					return err
				}},
				{Name: "Acquire when free", Op: s.AcquireOp, Run: func(ctx context.Context, c *coordination.Coordinator) (err error) {
					h, err = s.Acquire(ctx, c, name, time.Minute, true)
					return err // the next step's Released proves the lease is this handle's
				}},
				{Name: "Release after Acquire", Op: s.ReleaseOp, Run: func(ctx context.Context, _ *coordination.Coordinator) error {
					out, err := h.Release(ctx)
					if err == nil {
						err = contract.Expect("Release", out, coordination.Released)
					}
					return err
				}},
			}
		},
		LostReply: &contract.LostReply{
			Op: func(ctx context.Context, c *coordination.Coordinator, name string) error {
				_, err := s.Acquire(ctx, c, name, time.Minute, false)
				return err
			},
			Clean: func(ctx context.Context, raw redis.UniversalClient, key func(string) string, name string) (bool, error) {
				return vacant(ctx, raw, key(s.LeaseKey(name)))
			},
			Commands: s.firstCommands(),
		},
	}
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
	if len(h.Token()) != 22 || !layout.IsToken(h.Token()) {
		t.Errorf("owner token %q: want 22 characters of base64url", h.Token())
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
	raw := b.Raw(t)
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
	want := coordination.NotOwned
	if s.OwnEntries {
		want = coordination.AlreadyReleased
	}
	if out := must(third.Release(ctx))(t); out != want {
		t.Fatalf("Release of another owner's lock = %v, want %v", out, want)
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
	// The holder "crashes": it never releases or renews. Its TTL starts no
	// earlier than its request was sent: time from before the send (after
	// the reply, a loaded machine may already be well into the TTL).
	start := time.Now()
	must(s.Acquire(ctx, b.Coordinator(t), "{c}", 200*time.Millisecond, false))(t)
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
	raw := b.Raw(t)
	// A TTL of seconds, renewed every third of it: a renewal may come a
	// second late on a loaded machine and still hold the lease. Past the
	// first TTL, only renewals can have kept it.
	const ttl = 2 * time.Second
	start := time.Now()
	h := must(s.Acquire(ctx, b.Coordinator(t), "{k}", ttl, false))(t)
	h.KeepAlive()
	h.KeepAlive() // idempotent
	time.Sleep(time.Until(start.Add(ttl + ttl/4)))
	if ok := must(h.Verify(ctx))(t); !ok {
		t.Fatal("keep-alive did not hold the lock past its first TTL")
	}
	if h.Context().Err() != nil {
		t.Fatal("context cancelled while kept alive")
	}
	// Someone deletes the lease (an operator, or expiry during a pause): the
	// next renewal finds it gone and cancels the context.
	must(raw.Del(ctx, b.Key(s.LeaseKey("{k}"))).Result())(t)
	select {
	case <-h.Context().Done():
	case <-time.After(2 * ttl):
		t.Fatal("loss not detected by the keep-alive")
	}
	if !errors.Is(context.Cause(h.Context()), coordination.ErrLost) {
		t.Errorf("cause = %v, want ErrLost", context.Cause(h.Context()))
	}
	if out := must(h.Release(ctx))(t); out != coordination.AlreadyReleased {
		t.Errorf("Release after loss = %v", out)
	}
}

// keepAliveLate: a keep-alive started when less than a renewal period
// (TTL/3) of the lease is left renews at once, on the lease's own
// timeline: the first renewal is due a third of the TTL after the
// acquisition was sent, long past. One scheduled a period after the call
// would come after the local deadline, and the lease, which the server
// still holds, would be reported lost.
func keepAliveLate(t *testing.T, b *testharness.Backend, s Subject) {
	ctx := context.Background()
	coord := b.Coordinator(t)
	// A TTL of seconds: the renewal period is 1 s, and the keep-alive
	// starts with 300-700 ms left, well under it.
	const ttl = 3 * time.Second
	var (
		h    Handle
		left time.Duration
	)
	for try := 1; ; try++ {
		h = must(s.Acquire(ctx, coord, "{late}", ttl, false))(t)
		time.Sleep(h.Remaining() - 700*time.Millisecond)
		if left = h.Remaining(); left >= 300*time.Millisecond {
			break
		}
		// The machine stalled past the point (a loaded machine): again.
		must(h.Release(ctx))(t)
		if try == 5 {
			t.Fatalf("%d tries slept past 300 ms before the local deadline", try)
		}
	}
	if left > 700*time.Millisecond {
		t.Fatalf("Remaining = %v after the sleep, want at most 700ms", left)
	}
	h.KeepAlive()
	// The renewal, sent at once, gives a fresh TTL: Remaining grows back
	// to about 3 s less the drift allowance.
	testharness.WaitFor(t, 2*time.Second, "the renewal of a lease with little time left", func() string {
		if r := h.Remaining(); r < 2*time.Second {
			return fmt.Sprintf("Remaining = %v (cause %v), started with %v left", r, context.Cause(h.Context()), left)
		}
		return ""
	})
	// Kept alive for three TTLs: only renewals can have held it.
	select {
	case <-h.Context().Done():
		t.Fatalf("lost while kept alive: %v", context.Cause(h.Context()))
	case <-time.After(3 * ttl):
	}
	if ok := must(h.Verify(ctx))(t); !ok {
		t.Fatal("the server no longer holds the kept-alive lease")
	}
	if r := h.Remaining(); r < ttl/3 {
		t.Fatalf("Remaining = %v after three TTLs of keep-alive, want at least a renewal period", r)
	}
	if out := must(h.Release(ctx))(t); out != coordination.Released {
		t.Fatalf("Release = %v, want Released", out)
	}
}

func wrongType(t *testing.T, b *testharness.Backend, s Subject) {
	ctx := context.Background()
	raw := b.Raw(t)
	key := b.Key(s.LeaseKey("{t}"))
	must(raw.RPush(ctx, key, "x").Result())(t)
	_, err := s.Acquire(ctx, b.Coordinator(t), "{t}", time.Minute, false)
	if !errors.Is(err, coordination.ErrBadState) || engine.Classify(err) != engine.Terminal {
		t.Fatalf("acquire over a list: %v, want a terminal ErrBadState (wrong type)", err)
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

// badTTL: a TTL below 1 ms is refused before anything is sent, for
// acquisition and for Refresh.
func badTTL(t *testing.T, b *testharness.Backend, s Subject) {
	ctx := context.Background()
	client := b.Client(t)
	coord := must(coordination.New(client, coordination.WithKeyPrefix(b.Prefix())))(t)
	h := must(s.Acquire(ctx, coord, "{bad}", time.Minute, false))(t)
	k := testharness.CountCommands(client)
	for _, ttl := range []time.Duration{0, -time.Second, 500 * time.Microsecond} {
		for _, block := range []bool{false, true} {
			if _, err := s.Acquire(ctx, coord, "{bad}", ttl, block); !errors.Is(err, coordination.ErrInvalidArgument) {
				t.Errorf("ttl %v (block %v): got %v, want ErrInvalidArgument", ttl, block, err)
			}
		}
		if _, err := h.Refresh(ctx, ttl); !errors.Is(err, coordination.ErrInvalidArgument) {
			t.Errorf("Refresh(%v): %v, want ErrInvalidArgument", ttl, err)
		}
	}
	if n := k.Count(); n != 0 {
		t.Errorf("bad TTLs sent %d commands: %v", n, k.Names())
	}
	must(h.Release(ctx))(t)
}

// warm caches the scripts on the node of name's slot (a fault injected into
// an EVALSHA that would get NOSCRIPT keeps go-redis from falling back to
// EVAL: the command would never run).
func warm(t *testing.T, s Subject, coord *coordination.Coordinator, name string) {
	t.Helper()
	ctx := context.Background()
	h := must(s.Acquire(ctx, coord, name+"warm", time.Minute, false))(t)
	must(h.Refresh(ctx, time.Minute))(t)
	must(h.Release(ctx))(t)
}

// waitGone waits up to 5 s for key to disappear.
func waitGone(t *testing.T, raw redis.UniversalClient, key, what string) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(5 * time.Second)
	for !must(vacant(ctx, raw, key))(t) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: the lease is still there after 5 s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// vacant reports whether the lease key holds no lease: it does not exist,
// or it holds the tombstone an abandoned acquisition's cleanup left
// (lockcore.IsTombstone), which holds nothing, or it is a hash whose every
// field is one, or a sorted set of rwlease tombstones alone ([vacantSet]).
func vacant(ctx context.Context, raw redis.UniversalClient, key string) (bool, error) {
	v, err := raw.Get(ctx, key).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return true, nil
	case err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE"):
		// A hash of field leases: vacant when every field is a tombstone.
		h, err := raw.HGetAll(ctx, key).Result()
		if err != nil {
			return vacantSet(ctx, raw, key), nil
		}
		for _, v := range h {
			if !lockcore.IsTombstone(v) {
				return false, nil
			}
		}
		return true, nil
	case err != nil:
		return false, err
	}
	return lockcore.IsTombstone(v), nil
}

// vacantSet reports whether the sorted set at key (a read-write lease)
// holds tombstones alone (rwlease_abandon: members scored below 0 with a
// fraction); false for any other type or member.
func vacantSet(ctx context.Context, raw redis.UniversalClient, key string) bool {
	zs, err := raw.ZRangeWithScores(ctx, key, 0, -1).Result()
	if err != nil {
		return false // another type: a lease
	}
	for _, z := range zs {
		if z.Score >= 0 || z.Score == math.Floor(z.Score) {
			return false
		}
	}
	return true
}

// failedRelease: a release that fails before it reaches the server marks
// the handle released at once (context cause ErrReleased, a second Release
// answers AlreadyReleased without a command), returns the error, and is
// retried in the background until the lease is gone.
func failedRelease(t *testing.T, b *testharness.Backend, s Subject) {
	ctx := context.Background()
	client := b.Client(t)
	faults := &testharness.ScriptFaults{}
	client.AddHook(faults)
	coord := must(coordination.New(client, coordination.WithKeyPrefix(b.Prefix())))(t)
	h := must(s.Acquire(ctx, coord, "{rel}", time.Minute, false))(t)
	faults.Add(testharness.Fault{Err: testharness.ErrLostReply}) // never sent
	_, err := h.Release(ctx)
	if err == nil || !coordination.IsAmbiguous(err) {
		t.Fatalf("Release with a failed send: %v, want the ambiguous error", err)
	}
	if !errors.Is(context.Cause(h.Context()), coordination.ErrReleased) {
		t.Errorf("context cause after a failed release = %v, want ErrReleased", context.Cause(h.Context()))
	}
	waitGone(t, b.Raw(t), b.Key(s.LeaseKey("{rel}")), "background release")
	// Counted once the background retry is done: only the second Release
	// could send anything now, and it must not.
	k := testharness.CountCommands(client)
	if out := must(h.Release(ctx))(t); out != coordination.AlreadyReleased {
		t.Errorf("second Release = %v, want AlreadyReleased", out)
	}
	if n := k.Count(); n != 0 {
		t.Errorf("second Release sent %v", k.Names())
	}
	if h.Remaining() != 0 {
		t.Errorf("Remaining after a failed release = %v", h.Remaining())
	}
}

// renewalDuringRelease: a keep-alive renewal in flight while Release runs
// (its reply delayed, or the renewal itself delayed until after the
// release) never turns the release into a loss: the cause stays
// ErrReleased and coordination.lock.lost counts nothing.
func renewalDuringRelease(t *testing.T, b *testharness.Backend, s Subject) {
	for _, mode := range []string{"reply delayed", "renewal sent after the release"} {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			client := b.Client(t)
			faults := &testharness.ScriptFaults{}
			client.AddHook(faults)
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			coord := must(coordination.New(client, coordination.WithKeyPrefix(b.Prefix()), coordination.WithMeterProvider(mp)))(t)
			warm(t, s, coord, "{rr}")
			// A 3 s lease renews at 1 s: however late the keep-alive's
			// timer fires on a loaded machine, the renewal is sent well
			// before the local deadline would end the keep-alive.
			h := must(s.Acquire(ctx, coord, "{rr}", 3*time.Second, false))(t)
			started := make(chan struct{}, 1)
			f := testharness.Fault{SHA: s.RefreshSHA, Started: started, After: 150 * time.Millisecond}
			if mode != "reply delayed" {
				f = testharness.Fault{SHA: s.RefreshSHA, Started: started, Before: 150 * time.Millisecond}
			}
			faults.Add(f)
			h.KeepAlive()
			select {
			case <-started:
			case <-time.After(10 * time.Second):
				t.Fatal("the keep-alive never renewed")
			}
			time.Sleep(50 * time.Millisecond)
			if out := must(h.Release(ctx))(t); out != coordination.Released {
				t.Fatalf("Release = %v", out)
			}
			time.Sleep(250 * time.Millisecond) // the renewal's answer arrives
			if cause := context.Cause(h.Context()); !errors.Is(cause, coordination.ErrReleased) {
				t.Errorf("cause = %v, want ErrReleased", cause)
			}
			var rm metricdata.ResourceMetrics
			if err := reader.Collect(ctx, &rm); err != nil {
				t.Fatal(err)
			}
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					if m.Name == "coordination.lock.lost" || m.Name == "coordination.semaphore.lost" {
						t.Errorf("%s recorded a loss that did not happen", m.Name)
					}
				}
			}
		})
	}
}

// lostReplyThenLoading: the acquire ran but its reply was lost, and
// go-redis' re-send got LOADING: the caller sees a LOADING error, and the
// lease the first send took is cleaned up all the same.
func lostReplyThenLoading(t *testing.T, b *testharness.Backend, s Subject) {
	for _, e := range []error{testharness.LoadingError, testharness.ReadOnlyError} {
		t.Run(e.Error()[:8], func(t *testing.T) {
			ctx := context.Background()
			client := b.Client(t)
			faults := &testharness.ScriptFaults{}
			client.AddHook(faults)
			coord := must(coordination.New(client, coordination.WithKeyPrefix(b.Prefix())))(t)
			warm(t, s, coord, "{ld}")
			faults.Add(s.firstFault(testharness.Fault{Forward: true, Err: e}))
			_, err := s.Acquire(ctx, coord, "{ld}", time.Minute, false)
			if err == nil || !coordination.IsTransient(err) || !coordination.IsAmbiguous(err) {
				t.Fatalf("acquire: %v, want a transient, ambiguous error", err)
			}
			waitGone(t, b.Raw(t), b.Key(s.LeaseKey("{ld}")), "cleanup after a lost reply and "+e.Error()[:8])
		})
	}
}

// blockingAmbiguity: a blocking Acquire whose first attempt's reply was
// lost (it took the lease) and whose later attempts get an error reply
// until its context ends (it gives up with that error, not as contention)
// leaves no orphan, even on a client that never
// re-sends (MaxRetries -1, where one error reply alone proves nothing ran).
func blockingAmbiguity(t *testing.T, b *testharness.Backend, s Subject) {
	ctx := context.Background()
	client := b.Client(t, func(o *redis.Options) { o.MaxRetries = -1 })
	faults := &testharness.ScriptFaults{}
	client.AddHook(faults)
	coord := must(coordination.New(client, coordination.WithKeyPrefix(b.Prefix())))(t)
	warm(t, s, coord, "{ba}")
	faults.Add(s.firstFault(testharness.Fault{Forward: true, Err: testharness.ErrLostReply}))
	faults.Add(testharness.Fault{SHA: s.AcquireSHA, Times: -1, Err: testharness.LoadingError})
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err := s.Acquire(cctx, coord, "{ba}", time.Minute, true)
	cancel()
	if errors.Is(err, coordination.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, testharness.LoadingError) {
		t.Fatalf("blocking acquire: %v, want it to give up at its deadline with the last attempt's LOADING, not as contention", err)
	}
	if faults.Hits() < 2 {
		t.Fatalf("only %d faulted attempts", faults.Hits())
	}
	waitGone(t, b.Raw(t), b.Key(s.LeaseKey("{ba}")), "cleanup after an ambiguous first attempt")
	faults.Clear()
}

// releaseReSent loses a release's reply in the network (the fault proxy
// drops it after the server ran the script; go-redis re-sends it on a new
// connection): the release reports Released, what its first send did, and
// the lease is gone.
func releaseReSent(t *testing.T, b *testharness.Backend, s Subject) {
	ctx := context.Background()
	p := faultproxy.Start(t, b.Server.Addr)
	opt := b.Server.Options()
	opt.Addr = p.Addr()
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	coord := must(coordination.New(rdb, coordination.WithKeyPrefix(b.Prefix())))(t)
	name := "{rs}:net"
	h, err := s.Acquire(ctx, coord, name, time.Minute, false)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := h.Verify(ctx); err != nil || !ok { // the scripts are loaded: one EVALSHA per send
		t.Fatalf("Verify = %v, %v", ok, err)
	}
	before := p.Stats().Commands["EVALSHA"]
	lost := p.Apply(faultproxy.DropReply(faultproxy.Scripts(), 1))
	out, err := h.Release(ctx)
	if err != nil || out != coordination.Released {
		t.Fatalf("Release with its reply lost and re-sent = %v, %v; want Released (what the first send did)", out, err)
	}
	if lost.Fired() != 1 || p.Stats().Commands["EVALSHA"]-before != 2 {
		t.Fatalf("the reply was not lost and re-sent: fired %d, EVALSHA %d", lost.Fired(), p.Stats().Commands["EVALSHA"]-before)
	}
	raw := b.Client(t)
	for _, k := range s.keys(name) {
		if k != s.LeaseKey(name) {
			continue
		}
		if n, err := raw.Exists(ctx, b.Key(k)).Result(); err != nil || n != 0 {
			if s.OwnEntries {
				continue // a member of a sorted set other holders may share
			}
			t.Fatalf("lease key %q still exists after the release (%d, %v)", k, n, err)
		}
	}
	if again, err := s.Acquire(ctx, coord, name, time.Minute, false); err != nil {
		t.Fatalf("acquire after the release: %v", err)
	} else if _, err := again.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
