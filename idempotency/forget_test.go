package idempotency_test

import (
	"context"
	"errors"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/idempotency"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// Forget deletes a key's record whatever it holds, so the next Begin
// starts afresh (a new owner and a higher fence; the old owner's Complete
// is refused), wakes a caller waiting on a pending claim at once, reports
// false for a missing key, refuses a foreign value (ErrBadState, nothing
// deleted) and a bad key (nothing sent).
func TestForget(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		f := newFixture(t, b)
		s, raw := f.store, f.raw
		if ok, err := s.Forget(ctx, "never"); ok || err != nil {
			t.Fatalf("Forget of a missing key = %v, %v; want false, nil", ok, err)
		}

		// A failed claim after a failure that was not retry-safe: retries
		// are told "outcome unknown" until Forget.
		_, _, err := s.Do(ctx, "pay", time.Minute, "fp", func(ctx context.Context) ([]byte, error) {
			return nil, errors.New("the payment gateway timed out")
		})
		if err == nil {
			t.Fatal("Do returned no error")
		}
		if _, _, err := s.Do(ctx, "pay", time.Minute, "fp", func(ctx context.Context) ([]byte, error) { return []byte("again"), nil }); !errors.Is(err, idempotency.ErrOutcomeUnknown) {
			t.Fatalf("a retry before Forget = %v, want ErrOutcomeUnknown", err)
		}
		first, err := s.Begin(ctx, "pay2", time.Minute)
		if err != nil || first.State != idempotency.Started {
			t.Fatal(first, err)
		}
		// A caller waiting on the pending claim is woken by Forget.
		waited := make(chan idempotency.Claim, 1)
		go func() {
			c, err := s.Begin(ctx, "pay2", time.Minute, idempotency.WithWait(30*time.Second))
			if err != nil {
				t.Error(err)
			}
			waited <- c
		}()
		time.Sleep(100 * time.Millisecond) // let it wait
		b.Advance(time.Millisecond)        // a new claim's fence is the server's time
		for _, k := range []string{"pay", "pay2"} {
			if ok, err := s.Forget(ctx, k); !ok || err != nil {
				t.Fatalf("Forget(%s) = %v, %v; want true", k, ok, err)
			}
		}
		select {
		case c := <-waited:
			if c.State != idempotency.Started || c.Fence <= first.Fence {
				t.Fatalf("the waiter got %v fence %d, want Started with a fence above %d", c.State, c.Fence, first.Fence)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the waiter was not woken by Forget")
		}
		if ok, err := s.Complete(ctx, "pay2", first.Owner, []byte("late")); ok || err != nil {
			t.Fatalf("the forgotten owner's Complete = %v, %v; want false", ok, err)
		}
		res, replayed, err := s.Do(ctx, "pay", time.Minute, "fp", func(ctx context.Context) ([]byte, error) { return []byte("charged"), nil })
		if err != nil || replayed || string(res) != "charged" {
			t.Fatalf("Do after Forget = %q, %v, %v; want it run again", res, replayed, err)
		}

		// A completed result is no longer replayed.
		if ok, err := s.Forget(ctx, "pay"); !ok || err != nil {
			t.Fatalf("Forget of a completed record = %v, %v", ok, err)
		}
		if n := raw.Exists(ctx, b.Key("pay")).Val(); n != 0 {
			t.Fatal("the completed record is still there")
		}

		// Foreign data is not deleted; bad input sends nothing.
		// Values starting with a claim's letter included (a new user's
		// finding: "Carol" and "PONG" were deleted).
		for _, v := range []string{"hello", "Carol", "Alice", "PONG", "Fxyz", "Pgarbage", "F12:x"} {
			if err := raw.Set(ctx, b.Key("foreign"), v, time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Forget(ctx, "foreign"); !errors.Is(err, coordination.ErrBadState) {
				t.Fatalf("Forget of the foreign string %q = %v, want ErrBadState", v, err)
			}
			if raw.Get(ctx, b.Key("foreign")).Val() != v {
				t.Fatalf("Forget changed the foreign value %q", v)
			}
		}
		counter := testharness.CountCommands(f.coord.Client())
		_, err = s.Forget(ctx, "")
		if name, _ := check.ArgumentName(err); !errors.Is(err, coordination.ErrInvalidArgument) || name != "key" {
			t.Fatalf("Forget(\"\") = %v, want ErrInvalidArgument naming key", err)
		}
		if n := counter.Count(); n != 0 {
			t.Fatalf("a bad key sent %d commands", n)
		}
	})
}
