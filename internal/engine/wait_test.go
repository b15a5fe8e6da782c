package engine_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testharness"
)

func TestBackoffStaysInBounds(t *testing.T) {
	lo, hi := 10*time.Millisecond, time.Second
	for f := 1; f < 40; f++ {
		want := min(lo<<min(f-1, 16), hi)
		for range 50 {
			if d := engine.Backoff(f, lo, hi); d < want/2 || d > want {
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
	terminal := engine.InvalidArgument("x", "bad")
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
	attempts := 0
	go func() {
		time.Sleep(100 * time.Millisecond)
		cancel(cause)
	}()
	err := e.Wait(ctx, engine.WaitConfig{Key: b.Key("k"), Recheck: 20 * time.Millisecond}, func(context.Context) (engine.Attempt, error) {
		attempts++
		return engine.Attempt{RetryIn: time.Hour}, nil // held, no expiry soon
	})
	if !errors.Is(err, coordination.ErrNotAcquired) || !errors.Is(err, cause) || engine.Classify(err) != engine.Canceled {
		t.Fatalf("err = %v, want ErrNotAcquired joined with the cause, class canceled", err)
	}
	// 2 attempts before/after subscribing, then one per 20ms re-check.
	if attempts < 3 || attempts > 10 {
		t.Fatalf("%d attempts in 100ms with a 20ms re-check", attempts)
	}
}

func TestWaitWakesOnNotificationAndWake(t *testing.T) {
	b := testharness.Get(t, "miniredis")
	e := eng(t, b.Coordinator(t))
	ctx := context.Background()
	attempts := 0
	start := time.Now()
	go func() {
		time.Sleep(100 * time.Millisecond)
		b.Client(t).Publish(ctx, engine.Channel(b.Key("k")), "released")
	}()
	err := e.Wait(ctx, engine.WaitConfig{Key: b.Key("k")}, func(context.Context) (engine.Attempt, error) {
		attempts++
		return engine.Attempt{Done: attempts == 3}, nil
	})
	if err != nil || attempts != 3 {
		t.Fatalf("err=%v attempts=%d", err, attempts)
	}
	if el := time.Since(start); el > time.Second {
		t.Fatalf("woke after %v; the notification should wake it at ~100ms (re-check is 5s)", el)
	}

	// No key (no subscription): a Wake channel ends the sleep, and FirstIn
	// delays the first attempt.
	wake := make(chan struct{}, 1)
	attempts = 0
	start = time.Now()
	go func() {
		time.Sleep(150 * time.Millisecond)
		wake <- struct{}{}
	}()
	err = e.Wait(ctx, engine.WaitConfig{FirstIn: 50 * time.Millisecond, Wake: wake}, func(context.Context) (engine.Attempt, error) {
		attempts++
		if attempts == 1 && time.Since(start) < 50*time.Millisecond {
			t.Error("first attempt before FirstIn")
		}
		return engine.Attempt{Done: attempts == 2}, nil
	})
	if el := time.Since(start); err != nil || attempts != 2 || el > time.Second {
		t.Fatalf("Wake: err=%v attempts=%d after %v", err, attempts, el)
	}
}
