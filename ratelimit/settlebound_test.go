package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// A new user's report: on a GCRA limiter of 10 a minute, Reserve(ctx, 1)
// then Settle(ctx, 1<<31) returned -2147483647 and a nil error, and every
// later decision on the key, in every process, failed with ErrBadState
// (the script had stored an arrival time past 2^53 µs, which it refuses
// to read) while the key's PTTL was some 408 years; Settle(ctx,
// 100_000_000) locked the key for 19 years; on a token bucket, RetryAfter
// became math.MaxInt64. Now actual is at most estimate + capacity, checked
// before anything is admitted or sent; the reservation can still be
// settled, and the key keeps working.
func TestSettleAboveTheBoundSendsNothing(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		client := b.Client(t)
		count := testharness.CountCommands(client)
		coord := withClient(t, b, client)
		t.Cleanup(func() { _ = coord.Shutdown(context.Background()) })
		raw := b.Raw(t)
		for _, c := range []struct {
			name string
			s    Settings
			// debt is the RetryAfter of Allow(1) after Reserve(1) and
			// Settle(11): GCRA, 6 s a permit and 11 taken from a burst of
			// 10: 2 intervals; the bucket, 9 - 10 = -1 tokens: one period.
			debt time.Duration
		}{
			{"gcra", GCRA{Burst: 10, Rate: 10, Period: time.Minute}, 12 * time.Second},
			{"bucket", TokenBucket{Limit: 10, TokensPerPeriod: 10, Period: time.Minute}, time.Minute},
		} {
			t.Run(c.name, func(t *testing.T) {
				key := "quota:" + c.name
				lim, err := New(coord, key, c.s)
				if err != nil {
					t.Fatal(err)
				}
				defer lim.Close()
				start := time.Now() // before the reservation's server time
				res, err := lim.Reserve(ctx, 1)
				if err != nil || !res.Allowed() {
					t.Fatalf("Reserve(1): %v allowed=%v", err, res != nil && res.Allowed())
				}
				before, err := raw.Get(ctx, b.Key(key)).Result()
				if err != nil {
					t.Fatal(err)
				}
				count.Reset()
				for _, actual := range []int{1 << 31, 100_000_000, 12} {
					back, err := res.Settle(ctx, actual)
					want := fmt.Sprintf("coordination: rate limit settle %q: invalid argument actual: must be at most 11 (the estimate, 1, plus the limiter's capacity, 10), got %d", key, actual)
					if back != 0 || err == nil || err.Error() != want || !errors.Is(err, coordination.ErrInvalidArgument) {
						t.Fatalf("Settle(%d) = %d, %v\nwant 0, %s", actual, back, err, want)
					}
					if name, _ := check.ArgumentName(err); name != "actual" {
						t.Fatalf("Settle(%d) names %q, want actual", actual, name)
					}
				}
				if n := count.Count(); n != 0 {
					t.Fatalf("refused Settles sent %v", count.Names())
				}
				if after, err := raw.Get(ctx, b.Key(key)).Result(); err != nil || after != before {
					t.Fatalf("key after refused Settles: %q %v, want %q unchanged", after, err, before)
				}
				// Still to settle: at the bound, 10 more are charged.
				if back, err := res.Settle(ctx, 11); err != nil || back != -10 {
					t.Fatalf("Settle(11) after the refusals: %d %v, want -10", back, err)
				}
				if back, err := res.Settle(ctx, 11); back != 0 || !errors.Is(err, ErrSettled) {
					t.Fatalf("a second Settle(11): %d %v, want ErrSettled", back, err)
				}
				// The key keeps deciding: refused until the debt is paid.
				d, err := lim.Allow(ctx, 1)
				if err != nil {
					t.Fatalf("Allow after the settlement: %v", err)
				}
				wantRetrySince(t, b, Lease{Decision: d}, c.debt, start)
			})
		}
	})
}

// A Settle refused by the server (its debt beyond what the key holds) or
// never sent (a failed dial) leaves the reservation to settle again, the
// key unchanged; one that may have been applied (its reply lost) leaves it
// settled.
func TestSettleRefusedOrUnsentLeavesTheReservation(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		client := b.Client(t)
		faults := &testharness.ScriptFaults{}
		client.AddHook(faults)
		coord := withClient(t, b, client)
		t.Cleanup(func() { _ = coord.Shutdown(context.Background()) })
		raw := b.Raw(t)
		s := GCRA{Burst: 10, Interval: time.Second} // stored as g:10:1000000:1
		lim, err := New(coord, "near", s)
		if err != nil {
			t.Fatal(err)
		}
		defer lim.Close()
		res, err := lim.Reserve(ctx, 1)
		if err != nil || !res.Allowed() {
			t.Fatalf("Reserve(1): %v", err)
		}
		// Debt up to 5 s before 2^53 µs (as if other reservations had been
		// settled far above their estimates).
		near := fmt.Sprintf("g:10:1000000:1|%d|0", maxN-5_000_000)
		if err := raw.Set(ctx, b.Key("near"), near, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		back, err := res.Settle(ctx, 11) // 10 s more: past 2^53
		want := `coordination: rate limit settle "near": the adjustment would take the limiter state out of range (COORD_BADARG)`
		if back != 0 || err == nil || err.Error() != want || !errors.Is(err, coordination.ErrInvalidArgument) {
			t.Fatalf("Settle(11) past 2^53 = %d, %v\nwant 0, %s", back, err, want)
		}
		wantValue(t, b, "near", near)
		// Every attempt's dial fails (the engine re-sends an unsent
		// settlement itself, MaxRetries times).
		faults.Add(testharness.Fault{SHA: gcraScripts.adjust.Hash(), Times: -1, Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}})
		if _, err := res.Settle(ctx, 5); err == nil || coordination.IsAmbiguous(err) {
			t.Fatalf("Settle with a failed dial: %v, want an error that is not ambiguous", err)
		}
		faults.Clear()
		wantValue(t, b, "near", near)
		if back, err := res.Settle(ctx, 5); err != nil || back != -4 {
			t.Fatalf("Settle(5) after the refusals: %d %v, want -4", back, err)
		}
		if v, _ := raw.Get(ctx, b.Key("near")).Result(); v != fmt.Sprintf("g:10:1000000:1|%d|0", maxN-1_000_000) {
			t.Fatalf("after Settle(5): %q, want the arrival time 4 s later", v)
		}

		// A lost reply: the settlement ran; the reservation is settled.
		lost, err := New(coord, "lost", GCRA{Burst: 10, Interval: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		defer lost.Close()
		res, err = lost.Reserve(ctx, 2)
		if err != nil || !res.Allowed() {
			t.Fatalf("Reserve(2): %v", err)
		}
		faults.Add(testharness.Fault{SHA: gcraScripts.adjust.Hash(), Forward: true, Err: testharness.ErrLostReply})
		if _, err := res.Settle(ctx, 1); err == nil || !coordination.IsAmbiguous(err) {
			t.Fatalf("Settle with a lost reply: %v, want an ambiguous error", err)
		}
		if _, err := res.Settle(ctx, 1); !errors.Is(err, ErrSettled) {
			t.Fatalf("Settle after an ambiguous one: %v, want ErrSettled", err)
		}
		if n := available(t, &tlim{Limiter: lost}); n != 9 {
			t.Fatalf("after a settlement of 2 at 1 (its reply lost): %d available, want 9", n)
		}
	})
}
