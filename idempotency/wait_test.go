package idempotency_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/coordkit/coordination/idempotency"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

func TestWaitForOriginal(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		f := newFixture(t, b)
		ctx := t.Context()

		t.Run("completed", func(t *testing.T) {
			c := f.begin(t, "done", time.Minute)
			go func() {
				time.Sleep(30 * time.Millisecond)
				_, _ = f.store.Complete(context.Background(), "done", c.Owner, []byte("original"))
			}()
			start := time.Now()
			got := f.begin(t, "done", time.Minute, idempotency.WithWait(10*time.Second))
			wantState(t, got, idempotency.Completed)
			if string(got.Result) != "original" {
				t.Fatalf("Result = %q", got.Result)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("waited %v: the completion notification was missed", d)
			}
		})

		t.Run("abandoned", func(t *testing.T) {
			c := f.begin(t, "gone", time.Minute)
			go func() {
				time.Sleep(30 * time.Millisecond)
				_, _ = f.store.Abandon(context.Background(), "gone", c.Owner)
			}()
			start := time.Now()
			got := f.begin(t, "gone", time.Minute, idempotency.WithWait(10*time.Second))
			wantState(t, got, idempotency.Started) // the waiter takes over
			if got.Owner == c.Owner {
				t.Fatal("the waiter got the abandoned owner token")
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("waited %v: the abandon notification was missed", d)
			}
		})

		t.Run("expired", func(t *testing.T) {
			c := f.begin(t, "dead", 100*time.Millisecond)
			done := make(chan struct{})
			go func() {
				defer close(done)
				time.Sleep(20 * time.Millisecond)
				b.Advance(150 * time.Millisecond) // the owner died: nobody completes
			}()
			got := f.begin(t, "dead", time.Minute, idempotency.WithWait(10*time.Second))
			<-done
			wantState(t, got, idempotency.Started)
			if got.Owner == c.Owner {
				t.Fatal("the waiter got the expired owner token")
			}
		})

		t.Run("bound", func(t *testing.T) {
			f.begin(t, "slow", time.Minute)
			start := time.Now()
			got := f.begin(t, "slow", time.Minute, idempotency.WithWait(80*time.Millisecond))
			wantState(t, got, idempotency.InProgress)
			if d := time.Since(start); d < 80*time.Millisecond || d > 3*time.Second {
				t.Fatalf("returned after %v, want about 80ms", d)
			}
		})

		t.Run("caller gives up", func(t *testing.T) {
			f.begin(t, "stuck", time.Minute)
			cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			_, err := f.store.Begin(cctx, "stuck", time.Minute, idempotency.WithWait(10*time.Second))
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want the caller's deadline", err)
			}
		})

		t.Run("mismatch does not wait", func(t *testing.T) {
			f.begin(t, "other", time.Minute, idempotency.WithFingerprint("a"))
			start := time.Now()
			got := f.begin(t, "other", time.Minute, idempotency.WithFingerprint("b"), idempotency.WithWait(10*time.Second))
			wantState(t, got, idempotency.FingerprintMismatch)
			if d := time.Since(start); d > time.Second {
				t.Fatalf("a mismatch waited %v", d)
			}
		})
	})
}
