package coordination_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// A refusal before anything is sent (a hook's, or a shut-down
// coordinator's) names the operation the way every other error of an
// operation does: "coordination: lock acquire: ...", lower case, once.
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
	if want := "coordination: lock acquire: rejected by hook: quota hook says no"; err == nil || err.Error() != want || !errors.Is(err, deny) {
		t.Fatalf("hook rejection = %v, want %q wrapping the hook's error", err, want)
	}
	plain := b.Coordinator(t)
	if err := plain.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = lockTryAcquire(ctx, plain, "jobs", time.Minute)
	if err == nil || !errors.Is(err, coordination.ErrClosed) ||
		!strings.HasPrefix(err.Error(), "coordination: lock acquire: the coordinator was shut down") {
		t.Fatalf("after Shutdown = %v, want \"coordination: lock acquire: the coordinator was shut down...\" wrapping ErrClosed", err)
	}
}
