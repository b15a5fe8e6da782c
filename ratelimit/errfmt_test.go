package ratelimit

import (
	"context"
	"errors"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// A Wait whose context ends while it is queued names the operation and the
// key once: it read `coordination: rate limit acquire: rate limit acquire
// "rl": ...` (the WaitError, which names its operation, was named again).
func TestWaitCanceledWhileQueuedNamesTheOperationOnce(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		lim, err := New(b.Coordinator(t), "rl", FixedWindow{Limit: 1, Window: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		defer lim.Close()
		if d, err := lim.Allow(ctx, 1); err != nil || !d.Allowed() {
			t.Fatalf("first Allow: %v, %v", d, err)
		}
		wctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(200*time.Millisecond, cancel)
		_, err = lim.Wait(wctx, 1)
		var we *WaitError
		if !errors.As(err, &we) || !errors.Is(err, context.Canceled) || !errors.Is(err, coordination.ErrNotAcquired) {
			t.Fatalf("Wait canceled while queued = %v, want a *WaitError matching context.Canceled and ErrNotAcquired", err)
		}
		want := `coordination: rate limit acquire "rl": wait for 1 permit: not acquired: the context ended while queued (retry after `
		if got := err.Error(); len(got) < len(want) || got[:len(want)] != want {
			t.Fatalf("message %q, want it to begin %q", got, want)
		}
	})
}
