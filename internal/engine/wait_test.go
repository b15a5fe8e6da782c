package engine_test

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/internal/timing"
)

func TestBackoffStaysInBounds(t *testing.T) {
	lo, hi := 10*time.Millisecond, time.Second
	for f := 1; f < 40; f++ {
		want := min(lo<<min(f-1, 16), hi)
		for range 50 {
			if d := timing.Backoff(f, lo, hi); d < want/2 || d > want {
				t.Fatalf("failure %d: backoff %v outside [%v, %v]", f, d, want/2, want)
			}
		}
	}
}

func TestWaitRetriesTransientAndStopsOnTerminal(t *testing.T) {
	b := testharness.Get(t, "miniredis")
	e := eng(t, b.Coordinator(t))
	ctx := context.Background()
	calls := 0
	err := e.Wait(ctx, engine.WaitConfig{MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}, func(context.Context) (engine.Attempt, error) {
		calls++
		if calls < 4 {
			return engine.Attempt{}, io.EOF // transient
		}
		return engine.Attempt{Done: true}, nil
	})
	if err != nil || calls != 4 {
		t.Fatalf("transient errors: err=%v after %d calls, want success after 4", err, calls)
	}
	terminal := check.InvalidArgument("x", "bad")
	calls = 0
	err = e.Wait(ctx, engine.WaitConfig{}, func(context.Context) (engine.Attempt, error) {
		calls++
		return engine.Attempt{}, terminal
	})
	if !errors.Is(err, terminal) || calls != 1 {
		t.Fatalf("terminal error: %v after %d calls", err, calls)
	}
}

func TestWaitGivesUpWithCause(t *testing.T) {
	b := testharness.Get(t, "miniredis")
	e := eng(t, b.Coordinator(t))
	cause := errors.New("shutting down")
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	// A guard: if the re-checks stopped, the test fails instead of waiting
	// an hour.
	guard := time.AfterFunc(time.Minute, func() { cancel(errors.New("no re-check within a minute")) })
	defer guard.Stop()
	const recheck, last = 20 * time.Millisecond, 6
	attempts := 0
	var second time.Time
	err := e.Wait(ctx, engine.WaitConfig{Key: b.Key("k"), Recheck: recheck}, func(context.Context) (engine.Attempt, error) {
		attempts++
		switch attempts {
		case 2: // at once after subscribing
			second = time.Now()
		case last:
			cancel(cause) // while the lease is still held
		}
		return engine.Attempt{RetryIn: time.Hour}, nil // held, no expiry soon
	})
	elapsed := time.Since(second)
	if !errors.Is(err, coordination.ErrNotAcquired) || !errors.Is(err, cause) || engine.Classify(err) != engine.Canceled {
		t.Fatalf("err = %v, want ErrNotAcquired joined with the cause, class canceled", err)
	}
	// 2 attempts before/after subscribing, then one per re-check; none
	// after the cancellation.
	if attempts != last {
		t.Fatalf("%d attempts, want %d: the wait must end at the cancellation", attempts, last)
	}
	if least := (last - 2) * recheck; elapsed < least {
		t.Fatalf("%d re-checks took %v, want at least %v with a %v re-check", last-2, elapsed, least, recheck)
	}
}

func TestWaitWakesOnNotificationAndWake(t *testing.T) {
	b := testharness.Get(t, "miniredis")
	e := eng(t, b.Coordinator(t))
	ctx := context.Background()
	pub := b.Client(t)
	// With a re-check of a minute, only the notification can end the sleep
	// after the third attempt within the test's bound.
	const recheck = time.Minute
	attempts := 0
	var published time.Time
	err := e.Wait(ctx, engine.WaitConfig{Key: b.Key("k"), Recheck: recheck}, func(context.Context) (engine.Attempt, error) {
		attempts++
		if attempts == 2 {
			// Wait subscribed after the first attempt: publish once the
			// server has the subscription.
			deadline := time.Now().Add(10 * time.Second)
			for {
				n, err := testharness.Subscribers(ctx, pub, b.Key("k"))
				if err != nil {
					return engine.Attempt{}, err
				}
				if n > 0 {
					break
				}
				if time.Now().After(deadline) {
					return engine.Attempt{}, check.InvalidArgument("test", "no subscriber within 10s")
				}
				time.Sleep(time.Millisecond)
			}
			if err := testharness.Publish(ctx, pub, b.Key("k"), "released"); err != nil {
				return engine.Attempt{}, err
			}
			published = time.Now()
		}
		return engine.Attempt{Done: attempts == 3}, nil
	})
	if err != nil || attempts != 3 {
		t.Fatalf("err=%v attempts=%d", err, attempts)
	}
	if el := time.Since(published); el >= recheck/2 {
		t.Fatalf("woke %v after the notification; the re-check is %v", el, recheck)
	}

	// No key (no subscription): a Wake channel ends the sleep, and FirstIn
	// delays the first attempt.
	const firstIn = 50 * time.Millisecond
	wake := make(chan struct{}, 1)
	attempts = 0
	start := time.Now()
	var woken time.Time
	err = e.Wait(ctx, engine.WaitConfig{FirstIn: firstIn, Recheck: recheck, Wake: wake}, func(context.Context) (engine.Attempt, error) {
		attempts++
		if attempts == 1 {
			if el := time.Since(start); el < firstIn {
				t.Errorf("first attempt after %v, before FirstIn (%v)", el, firstIn)
			}
			wake <- struct{}{} // a local release
			woken = time.Now()
		}
		return engine.Attempt{Done: attempts == 2}, nil
	})
	if el := time.Since(woken); err != nil || attempts != 2 || el >= recheck/2 {
		t.Fatalf("Wake: err=%v attempts=%d, %v after the wake-up (re-check %v)", err, attempts, el, recheck)
	}
}

// A wait whose context ends while Redis is failing reports the failure, not
// contention: the error wraps the last attempt's transient error and the
// context's cause, and does not match ErrNotAcquired. Once an attempt is
// answered again, giving up is contention as before. (The loop returned
// GaveUp(ctx) in both cases, so a lock Acquire against a refused port read
// "not acquired: context deadline exceeded".)
// A wait whose context ended before its first attempt (already ended, or
// during FirstIn's delay) asked Redis nothing: it returns the context's
// cause alone, neither contention (ErrNotAcquired) nor an outage (it
// returned "not acquired: context canceled"). A cause the caller gave
// still classifies as a cancellation, as does an outage's give-up with
// one (it classified as the outage's failure: Transient).
func TestWaitWithAnEndedContextAsksNothing(t *testing.T) {
	b := testharness.Get(t, "miniredis")
	e := eng(t, b.Coordinator(t))
	calls := 0
	try := func(context.Context) (engine.Attempt, error) {
		calls++
		return engine.Attempt{}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.Wait(ctx, engine.WaitConfig{}, try); err != context.Canceled {
		t.Fatalf("Wait with an ended context = %v, want context.Canceled itself", err)
	}
	stop := errors.New("the caller's cause")
	cctx, ccancel := context.WithCancelCause(context.Background())
	ccancel(stop)
	err := e.Wait(cctx, engine.WaitConfig{}, try)
	if !errors.Is(err, stop) || !errors.Is(err, context.Canceled) || errors.Is(err, coordination.ErrNotAcquired) ||
		err.Error() != stop.Error() || engine.Classify(err) != engine.Canceled {
		t.Fatalf("Wait with a context ended with a cause = %v (class %v), want the cause, matching context.Canceled, a cancellation", err, engine.Classify(err))
	}
	dctx, dcancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer dcancel()
	if err := e.Wait(dctx, engine.WaitConfig{FirstIn: time.Minute}, try); err != context.DeadlineExceeded {
		t.Fatalf("Wait whose context ended during FirstIn = %v, want context.DeadlineExceeded itself", err)
	}
	if calls != 0 {
		t.Fatalf("%d attempts, want none", calls)
	}

	outage := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	octx, ocancel := context.WithCancelCause(context.Background())
	err = e.Wait(octx, engine.WaitConfig{MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}, func(context.Context) (engine.Attempt, error) {
		ocancel(stop)
		return engine.Attempt{}, outage
	})
	if !errors.Is(err, stop) || !errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, coordination.ErrNotAcquired) ||
		engine.Classify(err) != engine.Canceled {
		t.Fatalf("Wait during an outage ended with a cause = %v (class %v), want the cause and the failure, a cancellation", err, engine.Classify(err))
	}
	if want := "the caller's cause; the last attempt failed: dial tcp: connection refused"; err.Error() != want {
		t.Fatalf("message %q, want %q", err.Error(), want)
	}
}

func TestWaitGivingUpDuringAnOutageNamesTheFailure(t *testing.T) {
	b := testharness.Get(t, "miniredis")
	e := eng(t, b.Coordinator(t))
	outage := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	cfg := engine.WaitConfig{Recheck: time.Millisecond, MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}
	for _, answered := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		calls := 0
		err := e.Wait(ctx, cfg, func(context.Context) (engine.Attempt, error) {
			calls++
			if calls == 5 {
				cancel()
			}
			if answered && calls >= 3 {
				return engine.Attempt{}, nil // refused: held by another
			}
			return engine.Attempt{}, outage
		})
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("answered=%v: %v, want it to match context.Canceled", answered, err)
		}
		if answered {
			if !errors.Is(err, coordination.ErrNotAcquired) || errors.Is(err, syscall.ECONNREFUSED) {
				t.Fatalf("gave up after answers: %v, want ErrNotAcquired without the earlier outage", err)
			}
			continue
		}
		if errors.Is(err, coordination.ErrNotAcquired) || !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("gave up during an outage: %v, want the refused dial and not ErrNotAcquired", err)
		}
		if want := "context canceled; the last attempt failed: dial tcp: connection refused"; err.Error() != want {
			t.Fatalf("message %q, want %q", err.Error(), want)
		}
	}
}

// An attempt that reports Failed (a try that keeps its own retry time, as
// redlock's rounds do) counts as failed, not answered: the wait sleeps
// RetryIn, does not call OnContended, and giving up names the failure and
// not ErrNotAcquired; once an attempt is answered again, giving up is
// contention's.
func TestWaitFailedAttemptIsAnOutage(t *testing.T) {
	b := testharness.Get(t, "miniredis")
	e := eng(t, b.Coordinator(t))
	outage := errors.New("redlock: acquire: 1 of 3 nodes confirmed, 2 needed; 2 failed")
	for _, answeredLast := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		calls, contended := 0, 0
		var gaps []time.Duration
		last := time.Now()
		err := e.Wait(ctx, engine.WaitConfig{Recheck: time.Millisecond, OnContended: func() { contended++ }}, func(context.Context) (engine.Attempt, error) {
			calls++
			gaps = append(gaps, time.Since(last))
			last = time.Now()
			if calls == 4 {
				cancel()
			}
			if answeredLast && calls == 4 {
				return engine.Attempt{}, nil // refused: held by another
			}
			return engine.Attempt{Failed: outage, RetryIn: 20 * time.Millisecond}, nil
		})
		cancel()
		for i, g := range gaps[1:] {
			if g < 20*time.Millisecond {
				t.Fatalf("answeredLast=%v: attempt %d came %v after the one before, want RetryIn (20ms) at least", answeredLast, i+2, g)
			}
		}
		if answeredLast {
			if contended != 1 || !errors.Is(err, coordination.ErrNotAcquired) || errors.Is(err, outage) {
				t.Fatalf("gave up after an answer: %v (OnContended %d times), want contention's error, OnContended once", err, contended)
			}
			continue
		}
		if contended != 0 || errors.Is(err, coordination.ErrNotAcquired) || !errors.Is(err, outage) || !errors.Is(err, context.Canceled) {
			t.Fatalf("gave up after failed attempts: %v (OnContended %d times), want the failure and the context's error, not ErrNotAcquired", err, contended)
		}
		if want := "context canceled; the last attempt failed: " + outage.Error(); err.Error() != want {
			t.Fatalf("message %q, want %q", err.Error(), want)
		}
	}
}
