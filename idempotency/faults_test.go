package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/idempotency"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// faultHook acts on the next EVALSHA of one script: it runs it on the
// server and then either runs it again (what go-redis does when a reply is
// lost and it re-sends) or reports a lost reply to the caller.
type faultHook struct {
	mu     sync.Mutex
	sha    string // the script's SHA1
	resend bool   // run twice, return the second reply
	lose   bool   // run once, return a connection-reset error
	fired  bool
}

func (h *faultHook) arm(sha string, resend, lose bool) {
	h.mu.Lock()
	h.sha, h.resend, h.lose, h.fired = sha, resend, lose, false
	h.mu.Unlock()
}

func (h *faultHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *faultHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *faultHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.mu.Lock()
		match := !h.fired && h.sha != "" && strings.EqualFold(cmd.Name(), "evalsha") &&
			len(cmd.Args()) > 1 && fmt.Sprint(cmd.Args()[1]) == h.sha
		if match {
			h.fired = true
		}
		resend, lose := h.resend, h.lose
		h.mu.Unlock()
		err := next(ctx, cmd)
		if !match {
			return err
		}
		if resend {
			return next(ctx, cmd)
		}
		if lose && err == nil {
			return &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
		}
		return err
	}
}

// faults warms the script cache (so every operation is one EVALSHA) and
// installs an unarmed fault hook on the fixture's client.
func (f *fixture) faults(t *testing.T) *faultHook {
	t.Helper()
	warmScripts(t, f.coord)
	h := &faultHook{}
	f.coord.Client().AddHook(h)
	return h
}

// warmScripts loads the package's scripts (on every primary of a
// cluster), so that each operation is one EVALSHA. It loads them as the
// default user: SCRIPT LOAD is not the library's to send.
func warmScripts(t *testing.T, coord *coordination.Coordinator) {
	t.Helper()
	admin, err := coordination.New(testharness.AdminOf(t, coord.Client()))
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.Of(admin)
	if err != nil {
		t.Fatal(err)
	}
	for _, load := range []func(context.Context, *engine.Engine) error{
		idempotency.BeginScript.Load, idempotency.CompleteScript.Load, idempotency.AbandonScript.Load, idempotency.FailScript.Load,
	} {
		if err := load(t.Context(), e); err != nil {
			t.Fatalf("SCRIPT LOAD: %v", err)
		}
	}
	testharness.Connect(t, coord.Client())
}

// Every script may run twice with the same arguments (go-redis re-sends
// after a lost reply); the caller must see the same answer as for one run.
func TestScriptsAreSafeUnderResend(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		f := newFixture(t, b)
		h := f.faults(t)

		h.arm(idempotency.BeginScript.Hash(), true, false)
		c := f.begin(t, "k", time.Minute, idempotency.WithFingerprint("fp"))
		wantState(t, c, idempotency.Started) // the re-send found its own claim
		if !h.fired {
			t.Fatal("the fault hook did not fire")
		}
		wantState(t, f.begin(t, "k", time.Minute, idempotency.WithFingerprint("fp")), idempotency.InProgress)

		h.arm(idempotency.CompleteScript.Hash(), true, false)
		if !f.complete(t, "k", c.Owner, []byte("once")) {
			t.Fatal("re-sent Complete = false, want true (same completion id)")
		}
		f.wantResult(t, "k", "once", idempotency.WithFingerprint("fp"))

		c = f.begin(t, "a", time.Minute)
		h.arm(idempotency.AbandonScript.Hash(), true, false)
		if !f.abandon(t, "a", c.Owner) {
			t.Fatal("re-sent Abandon = false, want true (same abandon id)")
		}
		if f.exists(t, "a") {
			t.Fatal("claim still pending after a re-sent Abandon")
		}
		if f.abandon(t, "a", c.Owner) {
			t.Fatal("a second Abandon = true, want false")
		}
	})
}

// A Begin whose reply is lost leaves a claim the caller never learnt about;
// the background owner-checked Abandon removes it so retries are not
// blocked until the claim expires.
func TestAmbiguousBeginIsCleanedUp(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		f := newFixture(t, b)
		h := f.faults(t)
		h.arm(idempotency.BeginScript.Hash(), false, true)
		_, err := f.store.Begin(t.Context(), "k", time.Hour)
		if err == nil || !coordination.IsAmbiguous(err) {
			t.Fatalf("Begin with a lost reply: err = %v, want an ambiguous error", err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for f.exists(t, "k") {
			if time.Now().After(deadline) {
				t.Fatal("the claim of the lost reply was not cleaned up")
			}
			time.Sleep(5 * time.Millisecond)
		}
		wantState(t, f.begin(t, "k", time.Hour), idempotency.Started)
	})
}

// Each public operation is admitted once under its name, and a rejecting
// hook stops it before anything is sent.
func TestHooks(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		var (
			mu       sync.Mutex
			admitted []string
			outcomes []hooks.Outcome
			reject   bool
		)
		rejectErr := errors.New("shed")
		h := hooks.Func(func(ctx context.Context, op hooks.Operation) (context.Context, hooks.Done, error) {
			mu.Lock()
			defer mu.Unlock()
			if op.Primitive != "idempotency" {
				t.Errorf("primitive = %q", op.Primitive)
			}
			if reject {
				return ctx, nil, rejectErr
			}
			admitted = append(admitted, op.Name)
			return ctx, func(o hooks.Outcome, err error) {
				mu.Lock()
				outcomes = append(outcomes, o)
				mu.Unlock()
			}, nil
		})
		coord := b.Coordinator(t, coordination.WithHooks(h))
		s, err := idempotency.New(coord)
		if err != nil {
			t.Fatal(err)
		}
		ctx := t.Context()
		c, _ := s.Begin(ctx, "k", time.Minute)
		_, _ = s.Begin(ctx, "k", time.Minute, idempotency.WithWait(30*time.Millisecond)) // several attempts, one admission
		_, _ = s.Complete(ctx, "k", c.Owner, []byte("r"))
		c, _ = s.Begin(ctx, "a", time.Minute)
		_, _ = s.Abandon(ctx, "a", c.Owner)
		_, _ = s.Forget(ctx, "k")
		c, _ = s.Begin(ctx, "f", time.Minute)
		_, _ = s.Fail(ctx, "f", c.Owner)
		want := []string{hooks.IdempotencyBegin, hooks.IdempotencyBegin, hooks.IdempotencyComplete,
			hooks.IdempotencyBegin, hooks.IdempotencyAbandon, hooks.IdempotencyForget,
			hooks.IdempotencyBegin, hooks.IdempotencyFail}
		mu.Lock()
		if strings.Join(admitted, ",") != strings.Join(want, ",") {
			t.Errorf("admitted %v, want %v", admitted, want)
		}
		for i, o := range outcomes {
			if o != hooks.Succeeded {
				t.Errorf("outcome %d = %v, want succeeded (in progress is an answer)", i, o)
			}
		}
		reject = true
		mu.Unlock()

		counter := testharness.CountCommands(coord.Client())
		if _, err := s.Begin(ctx, "r", time.Minute); !errors.Is(err, rejectErr) {
			t.Errorf("Begin under a rejecting hook: %v", err)
		}
		if _, err := s.Complete(ctx, "r", "o", nil); !errors.Is(err, rejectErr) {
			t.Errorf("Complete under a rejecting hook: %v", err)
		}
		if _, err := s.Abandon(ctx, "r", "o"); !errors.Is(err, rejectErr) {
			t.Errorf("Abandon under a rejecting hook: %v", err)
		}
		if _, err := s.Forget(ctx, "r"); !errors.Is(err, rejectErr) {
			t.Errorf("Forget under a rejecting hook: %v", err)
		}
		if n := counter.Count(); n != 0 {
			t.Errorf("rejected operations sent %d commands", n)
		}
	})
}

// A Begin whose first send ran on the server (creating the claim) but whose
// caller sees LOADING (go-redis re-sent after a lost reply, and the re-send
// got LOADING) is ambiguous: the claim it may have created is removed in
// the background, owner-checked, so a retry is not blocked until the TTL.
func TestLostReplyThenLoadingIsCleanedUp(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := t.Context()
		client := b.Client(t)
		faults := &testharness.ScriptFaults{}
		client.AddHook(faults)
		coord, err := coordination.New(client, coordination.WithKeyPrefix(b.Prefix()))
		if err != nil {
			t.Fatal(err)
		}
		store, err := idempotency.New(coord)
		if err != nil {
			t.Fatal(err)
		}
		warmScripts(t, coord) // a faulted EVALSHA must run, not get NOSCRIPT
		faults.Add(testharness.Fault{SHA: idempotency.BeginScript.Hash(), Forward: true, Err: testharness.LoadingError})
		_, err = store.Begin(ctx, "k", time.Hour)
		if err == nil || !coordination.IsTransient(err) || !coordination.IsAmbiguous(err) {
			t.Fatalf("Begin: %v, want a transient, ambiguous error", err)
		}
		if faults.Hits() != 1 {
			t.Fatalf("%d faulted calls, want 1", faults.Hits())
		}
		f := &fixture{b: b, coord: coord, store: store, raw: b.Raw(t)}
		waitGone(t, f, "k")
		wantState(t, f.begin(t, "k", time.Hour), idempotency.Started)
	})
}

// A waiting Begin whose attempt created the claim but lost its reply, and
// whose later attempts get an error reply until the wait bound, leaves no
// orphan claim: ambiguity is sticky across the attempts of one call, even
// on a client that never re-sends (MaxRetries -1, where an error reply
// alone proves the attempt did not run).
func TestWaitingBeginKeepsAmbiguity(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := t.Context()
		client := b.Client(t, func(o *redis.Options) { o.MaxRetries = -1 })
		faults := &testharness.ScriptFaults{}
		client.AddHook(faults)
		coord, err := coordination.New(client, coordination.WithKeyPrefix(b.Prefix()))
		if err != nil {
			t.Fatal(err)
		}
		store, err := idempotency.New(coord)
		if err != nil {
			t.Fatal(err)
		}
		f := &fixture{b: b, coord: coord, store: store, raw: b.Raw(t)}
		warmScripts(t, coord)
		holder := f.begin(t, "k", time.Hour)
		sha := idempotency.BeginScript.Hash()
		started := make(chan struct{}, 1)
		faults.Add(testharness.Fault{SHA: sha})                                                  // the first attempt: in progress
		faults.Add(testharness.Fault{SHA: sha, Started: started, Before: 100 * time.Millisecond, // the holder abandons meanwhile
			Forward: true, Err: testharness.ErrLostReply})
		faults.Add(testharness.Fault{SHA: sha, Times: -1, Err: testharness.LoadingError})
		abandoned := make(chan error, 1)
		go func() {
			<-started
			_, err := f.raw.Del(context.Background(), b.Key("k")).Result() // as an Abandon would
			abandoned <- err
		}()
		_, err = store.Begin(ctx, "k", time.Hour, idempotency.WithWait(400*time.Millisecond))
		if err := <-abandoned; err != nil {
			t.Fatal(err)
		}
		if err == nil || !coordination.IsTransient(err) {
			t.Fatalf("waiting Begin: %v, want the last attempt's LOADING", err)
		}
		if faults.Hits() < 3 {
			t.Fatalf("only %d faulted attempts", faults.Hits())
		}
		faults.Clear()
		waitGone(t, f, "k")
		if f.complete(t, "k", holder.Owner, []byte("late")) {
			t.Fatal("the holder's abandoned claim came back")
		}
	})
}

// waitGone waits up to 5 s for key to disappear.
func waitGone(t *testing.T, f *fixture, key string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for f.exists(t, key) {
		if time.Now().After(deadline) {
			t.Fatal("the claim an ambiguous Begin may have created was not cleaned up within 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// replyHook replaces the reply of every call of one script with a value
// after the script ran, as a server speaking another protocol would.
type replyHook struct {
	mu  sync.Mutex
	sha string
	val any
}

func (h *replyHook) set(sha string, v any) {
	h.mu.Lock()
	h.sha, h.val = sha, v
	h.mu.Unlock()
}

func (h *replyHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *replyHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *replyHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.mu.Lock()
		sha, v := h.sha, h.val
		h.mu.Unlock()
		c, ok := cmd.(interface {
			SetVal(any)
			SetErr(error)
		}) // the engine wraps its *redis.Cmd
		if err != nil || !ok || !strings.EqualFold(cmd.Name(), "evalsha") || len(cmd.Args()) < 2 || fmt.Sprint(cmd.Args()[1]) != sha {
			return err
		}
		c.SetErr(nil)
		c.SetVal(v)
		return nil
	}
}

// The decoders are strict: a reply of an unknown shape or code is an error
// wrapping ErrBadState, never a default answer.
func TestUnknownRepliesAreBadState(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		f := newFixture(t, b)
		warmScripts(t, f.coord)
		h := &replyHook{}
		f.coord.Client().AddHook(h)
		ctx := t.Context()
		begin := idempotency.BeginScript.Hash()
		for i, v := range []any{
			nil, int64(-1), float64(1), []any{}, []any{int64(5)}, []any{int64(1), "extra"}, []any{int64(2)},
			[]any{int64(2), int64(7)}, []any{int64(3), int64(-1)}, []any{int64(3), "10"}, []any{int64(4), int64(0)},
			[]any{"1"},
		} {
			h.set(begin, v)
			if _, err := f.store.Begin(ctx, fmt.Sprint("b", i), time.Minute); !errors.Is(err, coordination.ErrBadState) || strings.Contains(err.Error(), "wrong Redis type") {
				t.Errorf("Begin with reply %#v: %v, want ErrBadState", v, err)
			}
		}
		for _, sc := range []struct {
			name string
			sha  string
			call func(v any) error
		}{
			{"Complete", idempotency.CompleteScript.Hash(), func(any) error { return second(f.store.Complete(ctx, "k", "o", nil)) }},
			{"Abandon", idempotency.AbandonScript.Hash(), func(any) error { return second(f.store.Abandon(ctx, "k", "o")) }},
		} {
			for _, v := range []any{nil, int64(2), int64(-1), "1", []any{int64(1)}} {
				h.set(sc.sha, v)
				if err := sc.call(v); !errors.Is(err, coordination.ErrBadState) {
					t.Errorf("%s with reply %#v: %v, want ErrBadState", sc.name, v, err)
				}
			}
		}
	}, testharness.Only("miniredis", "redis7"))
}
