package waitloop

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testharness"
)

func TestMain(m *testing.M) { testharness.Main(m) }

func TestBackoffStaysInBounds(t *testing.T) {
	cfg := Config{MinBackoff: 10 * time.Millisecond, MaxBackoff: time.Second}
	for f := 1; f < 40; f++ {
		want := min(cfg.MinBackoff<<min(f-1, 16), cfg.MaxBackoff)
		for range 50 {
			d := backoff(cfg, f)
			if d < want/2 || d > want {
				t.Fatalf("failure %d: backoff %v outside [%v, %v]", f, d, want/2, want)
			}
		}
	}
}

func TestRunRetriesTransientAndStopsOnTerminal(t *testing.T) {
	b := testharness.Get(t, "miniredis")
	coord := b.Coordinator(t)
	ctx := context.Background()

	calls := 0
	err := Run(ctx, coord, "k", Config{MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}, func(context.Context) (Attempt, error) {
		calls++
		if calls < 4 {
			return Attempt{}, io.EOF // transient
		}
		return Attempt{Done: true}, nil
	})
	if err != nil || calls != 4 {
		t.Fatalf("transient errors: err=%v after %d calls, want success after 4", err, calls)
	}

	terminal := coordination.InvalidArgument("x", "bad")
	calls = 0
	err = Run(ctx, coord, "k", Config{}, func(context.Context) (Attempt, error) {
		calls++
		return Attempt{}, terminal
	})
	if !errors.Is(err, terminal) || calls != 1 {
		t.Fatalf("terminal error: %v after %d calls", err, calls)
	}
}

func TestRunGivesUpWithCause(t *testing.T) {
	b := testharness.Get(t, "miniredis")
	coord := b.Coordinator(t)
	cause := errors.New("shutting down")
	ctx, cancel := context.WithCancelCause(context.Background())
	attempts := 0
	go func() {
		time.Sleep(100 * time.Millisecond)
		cancel(cause)
	}()
	err := Run(ctx, coord, "k", Config{Recheck: 20 * time.Millisecond}, func(context.Context) (Attempt, error) {
		attempts++
		return Attempt{RetryIn: time.Hour}, nil // held, no expiry soon
	})
	if !errors.Is(err, coordination.ErrNotAcquired) || !errors.Is(err, cause) {
		t.Fatalf("err = %v, want ErrNotAcquired joined with the cause", err)
	}
	// 2 attempts before/after subscribing, then one per 20ms re-check.
	if attempts < 3 || attempts > 10 {
		t.Fatalf("%d attempts in 100ms with a 20ms re-check", attempts)
	}
}

func TestRunWakesOnNotification(t *testing.T) {
	b := testharness.Get(t, "miniredis")
	coord := b.Coordinator(t)
	ctx := context.Background()
	attempts := 0
	start := time.Now()
	go func() {
		time.Sleep(100 * time.Millisecond)
		b.Client(t).Publish(ctx, coord.Channel("k"), "released")
	}()
	err := Run(ctx, coord, "k", Config{}, func(context.Context) (Attempt, error) {
		attempts++
		return Attempt{Done: attempts == 3}, nil
	})
	if err != nil || attempts != 3 {
		t.Fatalf("err=%v attempts=%d", err, attempts)
	}
	if el := time.Since(start); el > time.Second {
		t.Fatalf("woke after %v; the notification should wake it at ~100ms (re-check is 5s)", el)
	}
}
