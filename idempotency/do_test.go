package idempotency_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/idempotency"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

func TestDo(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		f := newFixture(t, b)
		ctx := t.Context()
		var runs atomic.Int32
		ok := func(res string) func(context.Context) ([]byte, error) {
			return func(context.Context) ([]byte, error) {
				runs.Add(1)
				return []byte(res), nil
			}
		}
		failing := errors.New("card declined by upstream")

		t.Run("runs once then replays", func(t *testing.T) {
			runs.Store(0)
			res, replayed, err := f.store.Do(ctx, "once", time.Minute, "fp", ok("charged"))
			if err != nil || replayed || string(res) != "charged" {
				t.Fatalf("first Do = %q, %v, %v", res, replayed, err)
			}
			res, replayed, err = f.store.Do(ctx, "once", time.Minute, "fp", ok("charged again"))
			if err != nil || !replayed || string(res) != "charged" {
				t.Fatalf("second Do = %q, %v, %v; want the first result replayed", res, replayed, err)
			}
			if n := runs.Load(); n != 1 {
				t.Fatalf("fn ran %d times", n)
			}
			if _, _, err := f.store.Do(ctx, "once", time.Minute, "other", ok("x")); !errors.Is(err, idempotency.ErrFingerprintMismatch) {
				t.Fatalf("Do with another fingerprint: %v", err)
			}
		})

		// Changed by issue 24 item 9: a retry after a failure that was
		// not retry-safe is answered ErrOutcomeUnknown at once (it was
		// ErrInProgress while nothing ran); fn still does not run again
		// until the claim's TTL ends.
		t.Run("failure marks the claim failed", func(t *testing.T) {
			runs.Store(0)
			fn := func(context.Context) ([]byte, error) { runs.Add(1); return nil, failing }
			// The claim lasts 2 s: long enough for the retry to come while
			// it lasts on a loaded machine (50 ms was not).
			if _, _, err := f.store.Do(ctx, "fail", 2*time.Second, "fp", fn); !errors.Is(err, failing) {
				t.Fatalf("Do = %v, want fn's error", err)
			}
			_, _, err := f.store.Do(ctx, "fail", 2*time.Second, "fp", ok("x"))
			if !errors.Is(err, idempotency.ErrOutcomeUnknown) || errors.Is(err, idempotency.ErrInProgress) {
				t.Fatalf("retry while the failed claim lasts = %v, want ErrOutcomeUnknown", err)
			}
			c := f.begin(t, "fail", time.Minute, idempotency.WithFingerprint("fp"))
			wantState(t, c, idempotency.Failed)
			if c.Remaining <= 0 || c.Remaining > 2*time.Second || c.Owner != "" || c.Fence != 0 || c.Result != nil {
				t.Fatalf("failed claim = %+v; want only Remaining in (0, 2s]", c)
			}
			wantState(t, f.begin(t, "fail", time.Minute, idempotency.WithFingerprint("other")), idempotency.FingerprintMismatch)
			b.Advance(2100 * time.Millisecond)
			if res, _, err := f.store.Do(ctx, "fail", time.Minute, "fp", ok("second try")); err != nil || string(res) != "second try" {
				t.Fatalf("after expiry Do = %q, %v", res, err)
			}
			if n := runs.Load(); n != 2 {
				t.Fatalf("fn ran %d times, want 2", n)
			}
		})

		t.Run("retry-safe failure abandons", func(t *testing.T) {
			runs.Store(0)
			fn := func(context.Context) ([]byte, error) { runs.Add(1); return nil, idempotency.RetrySafe(failing) }
			_, _, err := f.store.Do(ctx, "safe", time.Minute, "fp", fn)
			if !errors.Is(err, failing) || !idempotency.IsRetrySafe(err) {
				t.Fatalf("Do = %v, want fn's retry-safe error", err)
			}
			if f.exists(t, "safe") {
				t.Fatal("claim kept after a retry-safe failure")
			}
			if res, replayed, err := f.store.Do(ctx, "safe", time.Minute, "fp", ok("ok now")); err != nil || replayed || string(res) != "ok now" {
				t.Fatalf("retry Do = %q, %v, %v", res, replayed, err)
			}
			if n := runs.Load(); n != 2 {
				t.Fatalf("fn ran %d times, want 2", n)
			}
			if idempotency.RetrySafe(nil) != nil {
				t.Fatal("RetrySafe(nil) != nil")
			}
		})

		t.Run("panic marks the claim failed", func(t *testing.T) {
			func() {
				defer func() {
					if recover() == nil {
						t.Fatal("the panic did not propagate")
					}
				}()
				_, _, _ = f.store.Do(ctx, "panic", time.Minute, "fp", func(context.Context) ([]byte, error) { panic("boom") })
			}()
			wantState(t, f.begin(t, "panic", time.Minute, idempotency.WithFingerprint("fp")), idempotency.Failed)
		})

		t.Run("claim lost", func(t *testing.T) {
			var thief idempotency.Claim
			res, _, err := f.store.Do(ctx, "lost", 30*time.Millisecond, "fp", func(context.Context) ([]byte, error) {
				b.Advance(50 * time.Millisecond)
				thief = f.begin(t, "lost", time.Minute, idempotency.WithFingerprint("fp"))
				return []byte("too late"), nil
			}, idempotency.WithKeepAlive(false))
			if !errors.Is(err, idempotency.ErrClaimLost) || !errors.Is(err, coordination.ErrLost) || string(res) != "too late" {
				t.Fatalf("Do = %q, %v; want fn's result and ErrClaimLost", res, err)
			}
			wantState(t, thief, idempotency.Started)
			wantState(t, f.begin(t, "lost", time.Minute, idempotency.WithFingerprint("fp")), idempotency.InProgress)
		})

		t.Run("concurrent callers wait and share one run", func(t *testing.T) {
			runs.Store(0)
			var (
				wg       sync.WaitGroup
				mu       sync.Mutex
				replays  int
				failures []error
			)
			for range 10 {
				wg.Go(func() {
					res, replayed, err := f.store.Do(ctx, "shared", time.Minute, "fp", func(context.Context) ([]byte, error) {
						runs.Add(1)
						time.Sleep(50 * time.Millisecond)
						return []byte("shared result"), nil
					}, idempotency.WithWait(10*time.Second))
					mu.Lock()
					defer mu.Unlock()
					if err != nil || string(res) != "shared result" {
						failures = append(failures, err)
					}
					if replayed {
						replays++
					}
				})
			}
			wg.Wait()
			if len(failures) > 0 || runs.Load() != 1 || replays != 9 {
				t.Fatalf("runs %d, replays %d, failures %v; want 1 run and 9 replays", runs.Load(), replays, failures)
			}
		})
	})
}
