package coordination_test

import (
	"context"
	"errors"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/idempotency"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/latch"
	"github.com/coordkit/coordination/leader"
	"github.com/coordkit/coordination/semaphore"
)

// A refusal before anything is sent (a hook's, or a shut-down
// coordinator's) names the operation the way every other error of an
// operation does: `coordination: lock acquire "jobs": ...`, lower case,
// once, with the key as the caller gave it.
func TestRefusalsNameTheOperation(t *testing.T) {
	b := testharness.Get(t, "miniredis")
	ctx := context.Background()
	deny := errors.New("quota hook says no")
	coord, err := coordination.New(b.Client(t), coordination.WithKeyPrefix(b.Prefix()),
		coordination.WithHooks(hooks.Func(func(ctx context.Context, op hooks.Operation) (context.Context, hooks.Done, error) {
			return nil, nil, deny
		})))
	if err != nil {
		t.Fatal(err)
	}
	_, err = lockTryAcquire(ctx, coord, "jobs", time.Minute)
	if want := `coordination: lock acquire "jobs": rejected by hook: quota hook says no`; err == nil || err.Error() != want || !errors.Is(err, deny) {
		t.Fatalf("hook rejection = %v, want %q wrapping the hook's error", err, want)
	}
	plain := b.Coordinator(t)
	if err := plain.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = lockTryAcquire(ctx, plain, "jobs", time.Minute)
	if err == nil || !errors.Is(err, coordination.ErrClosed) ||
		err.Error() != `coordination: lock acquire "jobs": closed: the coordinator was shut down` {
		t.Fatalf("after Shutdown = %v, want \"coordination: lock acquire \"jobs\": closed: the coordinator was shut down\" (one \"coordination: \") wrapping ErrClosed", err)
	}
}

// Every error of an operation reads `coordination: OP "KEY": CAUSE` once:
// no package prefix repeated after it ("redlock: coordination: ...",
// "leader: campaign: ...", "leader: no leader", "latch: no latch"), the key
// as the caller gave it, and the sentinel still matched with errors.Is.
func TestErrorsNameOperationAndKeyOnce(t *testing.T) {
	b := testharness.Get(t, "miniredis")
	ctx := context.Background()
	coord := b.Coordinator(t)
	l := must(latch.New(coord, "lt"))(t)
	_, joinErr := l.Join(ctx)
	g := must(l.Create(ctx, 1))(t)
	_, createErr := l.Create(ctx, 1)
	must(g.CountDown(ctx))(t)
	_, countErr := g.CountDown(ctx)
	_, leaderErr := leader.Get(ctx, coord, "ll")
	st := must(idempotency.New(coord))(t)
	var mismatchErr error
	_, _, _ = st.Do(ctx, "ik", time.Minute, "fp", func(ctx context.Context) ([]byte, error) {
		_, _, mismatchErr = st.Do(ctx, "ik", time.Minute, "fp2", func(ctx context.Context) ([]byte, error) { return nil, nil })
		return []byte("ok"), nil
	})
	var inProgressErr error
	_, _, _ = st.Do(ctx, "ik2", time.Minute, "fp", func(ctx context.Context) ([]byte, error) {
		_, _, inProgressErr = st.Do(ctx, "ik2", time.Minute, "fp", func(ctx context.Context) ([]byte, error) { return nil, nil })
		return []byte("ok"), nil
	})
	el := must(leader.New(coord, "{e}:lease", "{e}:fence", "me"))(t)
	sem := must(semaphore.New(coord, "sm", 1))(t)
	if err := coord.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	_, semErr := sem.TryAcquire(ctx, time.Minute)
	runErr := el.Run(ctx)
	_, joinClosedErr := l.Join(ctx)
	for _, c := range []struct {
		name     string
		err      error
		sentinel error
		want     string
	}{
		{"latch join, no latch", joinErr, latch.ErrNotFound, `coordination: latch join "lt": no latch at the key`},
		{"latch create, exists", createErr, latch.ErrExists, `coordination: latch create "lt": a latch already exists at the key (generation 1, count 1)`},
		{"latch count down, completed", countErr, latch.ErrCompleted, `coordination: latch count down "lt": the latch already reached zero`},
		{"leader read, none", leaderErr, leader.ErrNoLeader, `coordination: leader read "ll": no leader`},
		{"idempotency Do, other fingerprint", mismatchErr, idempotency.ErrFingerprintMismatch, `coordination: idempotency begin "ik": key already used for a different request`},
		{"idempotency Do, in progress", inProgressErr, idempotency.ErrInProgress, `coordination: idempotency begin "ik2": request in progress`},
		{"semaphore after Shutdown", semErr, coordination.ErrClosed, `coordination: semaphore acquire "sm": closed: the coordinator was shut down`},
		{"leader Run after Shutdown", runErr, coordination.ErrClosed, `coordination: leader campaign "{e}:lease": closed: the coordinator was shut down`},
		{"latch join after Shutdown", joinClosedErr, coordination.ErrClosed, `coordination: latch join "lt": closed: the coordinator was shut down`},
	} {
		if c.err == nil || c.err.Error() != c.want || !errors.Is(c.err, c.sentinel) {
			t.Errorf("%s: %v, want %q matching %v", c.name, c.err, c.want, c.sentinel)
		}
	}
}

// must returns v, failing the test on err.
func must[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}
