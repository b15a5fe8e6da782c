package idempotency_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/fencing"
	"github.com/coordkit/coordination/idempotency"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// Every claim lifetime on a key carries a larger fencing token than the
// one before: after an expiry (takeover), after an Abandon, and a re-sent
// Begin reports its claim's token again.
func TestFenceIncreasesPerClaimLifetime(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		f := newFixture(t, b)
		first := f.begin(t, "k", 50*time.Millisecond)
		wantState(t, first, idempotency.Started)
		b.Advance(100 * time.Millisecond)
		second := f.begin(t, "k", time.Minute)
		wantState(t, second, idempotency.Started)
		if second.Fence <= first.Fence {
			t.Fatalf("fence after a takeover = %d, want > %d", second.Fence, first.Fence)
		}
		if !f.abandon(t, "k", second.Owner) {
			t.Fatal("Abandon = false")
		}
		third := f.begin(t, "k", time.Minute)
		wantState(t, third, idempotency.Started)
		if third.Fence <= second.Fence {
			t.Fatalf("fence after an Abandon = %d, want > %d", third.Fence, second.Fence)
		}
		if f.complete(t, "k", first.Owner, []byte("late")) {
			t.Fatal("the taken-over original completed")
		}
	})
}

// The scenario: the original pauses past its claim's TTL without
// keep-alive, a second caller takes the key over with a higher token and
// writes through a resource that checks tokens, and the original's late
// guarded write is refused; its Complete reports the claim lost.
func TestPausedOriginalIsFencedOff(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		f := newFixture(t, b)
		ctx := t.Context()
		var takeover idempotency.Claim
		ledger, err := fencing.NewGuarded(f.coord, "ledger")
		if err != nil {
			t.Fatal(err)
		}
		res, _, err := f.store.Do(ctx, "pay", 50*time.Millisecond, "fp", func(ctx context.Context) ([]byte, error) {
			fence, ok := idempotency.FenceFrom(ctx)
			if !ok || fence < 3 {
				t.Errorf("FenceFrom = %d, %v", fence, ok)
			}
			b.Advance(100 * time.Millisecond) // paused past the TTL
			takeover = f.begin(t, "pay", time.Minute, idempotency.WithFingerprint("fp"))
			wantState(t, takeover, idempotency.Started)
			if takeover.Fence <= fence {
				t.Errorf("takeover fence %d, want > the original's %d", takeover.Fence, fence)
			}
			if ok, _, err := ledger.Set(ctx, takeover.Fence, []byte("second"), time.Minute); err != nil || !ok {
				t.Errorf("the takeover's guarded write: %v, %v", ok, err)
			}
			// The original resumes: its late write is refused.
			ok, current, err := ledger.Set(ctx, fence, []byte("first, late"), time.Minute)
			if err != nil || ok || current != takeover.Fence {
				t.Errorf("the original's late guarded write: accepted=%v current=%d err=%v; want refused, current %d", ok, current, err, takeover.Fence)
			}
			return []byte("first"), nil
		}, idempotency.WithKeepAlive(false))
		if !errors.Is(err, idempotency.ErrClaimLost) || string(res) != "first" {
			t.Fatalf("the original's Do = %q, %v; want ErrClaimLost", res, err)
		}
		v, tok, found, err := ledger.Get(ctx)
		if err != nil || !found || string(v) != "second" || tok != takeover.Fence {
			t.Fatalf("ledger = %q (token %d, found %v, %v), want the takeover's write", v, tok, found, err)
		}
	})
}

// With the keep-alive (Do's default) a claim outlives its TTL while its
// work runs: a second caller is refused (ErrInProgress) throughout, and the
// original completes. The TTL is seconds (renewed every ttl/3, a second),
// so a renewal delayed by a loaded machine still has two seconds of margin;
// the work spans three TTLs.
func TestKeepAliveHoldsTheClaimWhileTheWorkRuns(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		f := newFixture(t, b)
		ctx := t.Context()
		const ttl = 3 * time.Second
		var refused atomic.Int32
		res, replayed, err := f.store.Do(ctx, "long", ttl, "fp", func(work context.Context) ([]byte, error) {
			for range 9 { // 3 TTLs in all: most checks are past the first TTL
				time.Sleep(ttl / 3)
				_, _, err := f.store.Do(ctx, "long", ttl, "fp", func(context.Context) ([]byte, error) {
					t.Error("the second caller ran while the original's claim was kept alive")
					return nil, nil
				})
				if !errors.Is(err, idempotency.ErrInProgress) {
					t.Errorf("second caller: %v, want ErrInProgress", err)
				}
				refused.Add(1)
				if work.Err() != nil {
					t.Errorf("the work's context ended: %v", context.Cause(work))
				}
			}
			return []byte("done"), nil
		})
		if err != nil || replayed || string(res) != "done" || refused.Load() != 9 {
			t.Fatalf("Do = %q, %v, %v (refused %d)", res, replayed, err, refused.Load())
		}
		f.wantResult(t, "long", "done", idempotency.WithFingerprint("fp"))
	}, testharness.RealOnly())
}

// A kept-alive claim that is lost (deleted under the work: the renewal
// finds it gone) cancels the work's context with a cause matching
// coordination.ErrLost; Do then reports the claim lost.
func TestKeepAliveLossCancelsTheWork(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		f := newFixture(t, b)
		ctx := t.Context()
		const ttl = 300 * time.Millisecond
		_, _, err := f.store.Do(ctx, "gone", ttl, "fp", func(work context.Context) ([]byte, error) {
			if err := f.raw.Del(ctx, b.Key("gone")).Err(); err != nil {
				t.Error(err)
			}
			select {
			case <-work.Done():
				if !errors.Is(context.Cause(work), coordination.ErrLost) {
					t.Errorf("the work's context ended with %v, want ErrLost", context.Cause(work))
				}
			case <-time.After(5 * ttl):
				t.Error("the work's context was not cancelled after the claim was lost")
			}
			return []byte("x"), nil
		})
		if !errors.Is(err, idempotency.ErrClaimLost) {
			t.Fatalf("Do = %v, want ErrClaimLost", err)
		}
	}, testharness.RealOnly())
}

// KeepAlive refuses a claim that is not Started, and stop ends the work's
// context with ErrReleased without sending anything.
func TestKeepAliveArguments(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		f := newFixture(t, b)
		ctx := t.Context()
		if _, _, err := f.store.KeepAlive(ctx, "k", idempotency.Claim{State: idempotency.Completed, Owner: "x"}, time.Second); !errors.Is(err, coordination.ErrInvalidArgument) {
			t.Fatalf("KeepAlive of a completed claim: %v", err)
		}
		c := f.begin(t, "k", time.Minute)
		if _, _, err := f.store.KeepAlive(ctx, "k", c, 0); !errors.Is(err, coordination.ErrInvalidArgument) {
			t.Fatalf("KeepAlive with ttl 0: %v", err)
		}
		work, stop, err := f.store.KeepAlive(ctx, "k", c, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		stop()
		stop()
		if !errors.Is(context.Cause(work), coordination.ErrReleased) {
			t.Fatalf("after stop: %v, want ErrReleased", context.Cause(work))
		}
		if !f.complete(t, "k", c.Owner, []byte("ok")) {
			t.Fatal("Complete after stop = false")
		}
	})
}
