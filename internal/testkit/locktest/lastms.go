package locktest

import (
	"context"
	"errors"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// HolderReads are a single-holder lease's reads, for [LastMillisecond]:
// TryAcquire takes it (returning its owner token), Holder reads who holds
// it, Adopt takes it back by token (the handle is dropped).
type HolderReads struct {
	TryAcquire func(ctx context.Context, ttl time.Duration) (token string, err error)
	Holder     func(ctx context.Context) (coordination.Holder, error)
	Adopt      func(ctx context.Context, token string) error
}

// LastMillisecond checks that in a lease's last millisecond, where the
// key's PTTL is 0 (Redis rounds down), Holder and Adopt read the lease as
// free (ErrNotHeld) or as held with at least 1 ms, never as a corrupt key
// (ErrBadState: before, about 1,800 such errors in 200 rounds of a 3 ms
// lease read in a loop). On miniredis the millisecond is reached exactly
// (its clock is the test's); on real servers each of 30 leases is read in
// a loop until it is gone.
func LastMillisecond(t *testing.T, b *testharness.Backend, r HolderReads) {
	t.Helper()
	ctx := context.Background()
	rounds, reads := 30, 0
	if b.Kind == testharness.Embedded {
		rounds = 1
	}
	for round := range rounds {
		// The last round's key may outlive its read as free by under a
		// millisecond.
		tok, err := r.TryAcquire(ctx, 3*time.Millisecond)
		for end := time.Now().Add(time.Second); errors.Is(err, coordination.ErrNotAcquired) && time.Now().Before(end); {
			tok, err = r.TryAcquire(ctx, 3*time.Millisecond)
		}
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if b.Kind == testharness.Embedded {
			b.Advance(2500 * time.Microsecond) // 0.5 ms left: PTTL 0
		}
		for deadline := time.Now().Add(2 * time.Second); ; reads++ {
			h, err := r.Holder(ctx)
			if err != nil && !errors.Is(err, coordination.ErrNotHeld) {
				t.Fatalf("round %d: Holder = %v, want the holder or ErrNotHeld", round, err)
			}
			if aerr := r.Adopt(ctx, tok); aerr != nil && !errors.Is(aerr, coordination.ErrNotHeld) {
				t.Fatalf("round %d: Adopt = %v, want the lease or ErrNotHeld", round, aerr)
			}
			if errors.Is(err, coordination.ErrNotHeld) {
				break
			}
			if h.Token != tok || h.Remaining < time.Millisecond {
				t.Fatalf("round %d: Holder = %+v, want token %s with at least 1 ms", round, h, tok)
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the 3 ms lease is still held after 2 s", round)
			}
		}
	}
	t.Logf("%d reads", reads)
}
