package leakcheck_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/coordtest"
	"github.com/coordkit/coordination/lock"
)

// A user's goleak-checked test of their own code on a coordtest.Env: a
// lock kept alive, a waiter blocked on it, a pause never resumed, faults
// still armed, an ambiguous acquisition's background release. The end of
// the Env's test stops all of it: the blocked waiter returns (ErrClosed),
// and no goroutine is left.
func TestCoordtestEnvEndsEverything(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	waiter := make(chan error, 1)
	t.Run("user", func(t *testing.T) {
		env := coordtest.New(t)
		ctx := context.Background()
		mu, err := lock.New(env.Coordinator(), "jobs")
		if err != nil {
			t.Fatal(err)
		}
		l, err := mu.TryAcquire(ctx, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		l.KeepAlive()
		go func() {
			_, err := mu.Acquire(ctx, time.Second)
			waiter <- err
		}()
		other, err := lock.New(env.Coordinator(), "other")
		if err != nil {
			t.Fatal(err)
		}
		env.LoseReplies(1)
		if _, err := other.TryAcquire(ctx, time.Minute); !coordination.IsAmbiguous(err) {
			t.Fatalf("TryAcquire with a lost reply: %v, want ambiguous", err)
		}
		time.Sleep(50 * time.Millisecond) // the waiter blocks
		env.FailCommands(3)
		env.Pause() // never resumed: the test's end resumes
	})
	select {
	case err := <-waiter:
		if !errors.Is(err, coordination.ErrClosed) {
			t.Errorf("the blocked waiter returned %v, want ErrClosed", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the blocked waiter has not returned 15 s after its Env's test ended")
	}
	goleak.VerifyNone(t, ignore)
}
