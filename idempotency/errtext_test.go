package idempotency_test

import (
	"context"
	"errors"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/idempotency"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// Do's answers read as their own message once, naming the operation and
// the key, without the coordination sentinel's text appended ("...: not
// acquired", "...: lease lost"), and still match both sentinels. A claim
// forgotten while its work ran is reported as no longer held, not as
// expired.
func TestDoErrorTexts(t *testing.T) {
	for _, c := range []struct {
		err  error
		is   error
		want string
	}{
		{idempotency.ErrInProgress, coordination.ErrNotAcquired, "idempotency: request in progress"},
		{idempotency.ErrOutcomeUnknown, coordination.ErrNotAcquired, "idempotency: an earlier attempt failed, outcome unknown"},
		{idempotency.ErrClaimLost, coordination.ErrLost, "idempotency: claim no longer held at completion (expired or forgotten)"},
	} {
		if c.err.Error() != c.want || !errors.Is(c.err, c.is) {
			t.Errorf("%v: want %q matching %v", c.err, c.want, c.is)
		}
	}
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		f := newFixture(t, b)
		ctx := t.Context()

		// An earlier attempt failed: the retry's answer.
		if _, _, err := f.store.Do(ctx, "pay", time.Minute, "fp", func(context.Context) ([]byte, error) {
			return nil, errors.New("the gateway timed out")
		}); err == nil {
			t.Fatal("the failing Do returned no error")
		}
		_, _, err := f.store.Do(ctx, "pay", time.Minute, "fp", func(context.Context) ([]byte, error) { return []byte("again"), nil })
		if want := `coordination: idempotency begin "pay": an earlier attempt failed, outcome unknown`; err == nil || err.Error() != want ||
			!errors.Is(err, idempotency.ErrOutcomeUnknown) || !errors.Is(err, coordination.ErrNotAcquired) {
			t.Fatalf("retry after a failure = %v, want %q matching ErrOutcomeUnknown and ErrNotAcquired", err, want)
		}

		// The claim is forgotten while the work runs: Complete finds it gone.
		res, _, err := f.store.Do(ctx, "gone", time.Minute, "fp", func(ctx context.Context) ([]byte, error) {
			if ok, err := f.store.Forget(ctx, "gone"); !ok || err != nil {
				t.Errorf("Forget = %v, %v", ok, err)
			}
			return []byte("done"), nil
		}, idempotency.WithKeepAlive(false))
		if want := `coordination: idempotency complete "gone": claim no longer held at completion (expired or forgotten)`; err == nil || err.Error() != want ||
			!errors.Is(err, idempotency.ErrClaimLost) || !errors.Is(err, coordination.ErrLost) || string(res) != "done" {
			t.Fatalf("Do whose claim was forgotten = %q, %v; want fn's result and %q matching ErrClaimLost and ErrLost", res, err, want)
		}
	})
}
