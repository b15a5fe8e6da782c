package coordtest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/coordtest"
	"github.com/coordkit/coordination/lock"
	"github.com/coordkit/coordination/ratelimit"
	"github.com/coordkit/coordination/semaphore"
)

// exampleTB stands for the *testing.T an Example does not get; in a test,
// pass the test's t to coordtest.New.
type exampleTB struct {
	testing.TB
	cleanups []func()
}

func newExampleTB() *exampleTB                         { return &exampleTB{} }
func (t *exampleTB) Helper()                           {}
func (t *exampleTB) Cleanup(f func())                  { t.cleanups = append(t.cleanups, f) }
func (t *exampleTB) Logf(format string, args ...any)   {}
func (t *exampleTB) Fatal(args ...any)                 { panic(fmt.Sprint(args...)) }
func (t *exampleTB) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (t *exampleTB) Context() context.Context          { return context.Background() }

// end runs the cleanups, as the end of a test does.
func (t *exampleTB) end() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}

// runNightly is code under test: it runs job under the lock "jobs:nightly"
// with a keep-alive, and returns job's error, or why the lock ended when
// the job stopped because the lock was lost.
func runNightly(ctx context.Context, coord *coordination.Coordinator, ttl time.Duration, job func(context.Context) error) error {
	mu, err := lock.New(coord, "jobs:nightly")
	if err != nil {
		return err
	}
	l, err := mu.TryAcquire(ctx, ttl)
	if err != nil {
		return err
	}
	defer l.Release(context.WithoutCancel(ctx))
	l.KeepAlive()
	if err := job(l.Context()); err != nil {
		if cause := context.Cause(l.Context()); cause != nil {
			return fmt.Errorf("job stopped: %w", cause)
		}
		return err
	}
	return nil
}

// A lease that expires on the server while its holder works: the
// keep-alive's next renewal finds it gone and cancels the lease's context,
// and the code under test stops its job.
func ExampleEnv_Advance() {
	t := newExampleTB() // in a test: the test's t
	defer t.end()

	env := coordtest.New(t)
	ctx := context.Background()
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- runNightly(ctx, env.Coordinator(), 300*time.Millisecond, func(ctx context.Context) error {
			close(started)
			<-ctx.Done() // the job runs until the lease ends
			return ctx.Err()
		})
	}()
	<-started
	env.Advance(time.Second) // past the TTL: the lock expires on the server
	err := <-done
	fmt.Println(err)
	fmt.Println("lost:", errors.Is(err, coordination.ErrLost))
	// Output:
	// job stopped: coordination: lease lost: the lease is no longer held by this owner
	// lost: true
}

// A lease that expires on the server is still held locally (Remaining is
// measured on the process's clock) until the holder asks the server:
// Refresh then reports it lost and cancels its context.
func Example_lostLease() {
	t := newExampleTB() // in a test: the test's t
	defer t.end()

	env := coordtest.New(t)
	ctx := context.Background()
	mu, err := lock.New(env.Coordinator(), "jobs:nightly")
	if err != nil {
		t.Fatal(err)
	}
	l, err := mu.TryAcquire(ctx, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	env.Advance(31 * time.Second)
	fmt.Println("held locally:", l.Remaining() > 0)
	held, err := l.Refresh(ctx, 30*time.Second)
	fmt.Println("refresh:", held, err)
	fmt.Println("context lost:", errors.Is(context.Cause(l.Context()), coordination.ErrLost))
	next, err := mu.TryAcquire(ctx, 30*time.Second)
	fmt.Println("next holder:", err == nil && next.Token() != l.Token())
	// Output:
	// held locally: true
	// refresh: false <nil>
	// context lost: true
	// next holder: true
}

// allowWithRetry is code under test: it asks for one permit, trying again
// after a transient failure that provably did not run (at most 3 tries),
// never after an ambiguous one, which may have consumed the permit.
func allowWithRetry(ctx context.Context, lim *ratelimit.Limiter) (dec ratelimit.Decision, tries int, err error) {
	for tries = 1; ; tries++ {
		dec, err = lim.Allow(ctx, 1)
		if err == nil || tries == 3 || !coordination.IsTransient(err) || coordination.IsAmbiguous(err) {
			return dec, tries, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A decision whose reply is lost consumed its permit although the caller
// got an error: the error is ambiguous, and the code under test does not
// retry it.
func ExampleEnv_LoseReplies() {
	t := newExampleTB() // in a test: the test's t
	defer t.end()

	env := coordtest.New(t)
	ctx := context.Background()
	lim, err := ratelimit.New(env.Coordinator(), "limits:export", ratelimit.FixedWindow{Limit: 5, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()

	env.LoseReplies(1)
	_, tries, err := allowWithRetry(ctx, lim)
	fmt.Println("tries:", tries, "ambiguous:", coordination.IsAmbiguous(err), "injected:", errors.Is(err, coordtest.ErrInjected))
	dec, _, err := allowWithRetry(ctx, lim)
	fmt.Println("allowed:", dec.Allowed(), "left:", dec.Available(), err)
	// Output:
	// tries: 1 ambiguous: true injected: true
	// allowed: true left: 3 <nil>
}

// An acquisition whose reply is lost took the lock on the server; the
// library releases it in the background (owner-checked), so the caller,
// which got an ambiguous error, holds nothing and the lock frees at once,
// not at its TTL.
func ExampleEnv_LoseReplies_acquire() {
	t := newExampleTB() // in a test: the test's t
	defer t.end()

	env := coordtest.New(t)
	ctx := context.Background()
	mu, err := lock.New(env.Coordinator(), "jobs:nightly")
	if err != nil {
		t.Fatal(err)
	}
	env.LoseReplies(1)
	_, err = mu.TryAcquire(ctx, time.Minute)
	fmt.Println("ambiguous:", coordination.IsAmbiguous(err))

	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second) // far below the minute's TTL
	defer cancel()
	l, err := mu.Acquire(waitCtx, time.Minute)
	fmt.Println("acquired after the background release:", err == nil)
	if err == nil {
		_, _ = l.Release(ctx)
	}
	// Output:
	// ambiguous: true
	// acquired after the background release: true
}

// A command that fails before it reaches the server is transient and not
// ambiguous: nothing was consumed, and the code under test retries it.
func ExampleEnv_FailCommands() {
	t := newExampleTB() // in a test: the test's t
	defer t.end()

	env := coordtest.New(t)
	ctx := context.Background()
	lim, err := ratelimit.New(env.Coordinator(), "limits:export", ratelimit.FixedWindow{Limit: 5, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()

	env.FailCommands(2)
	dec, tries, err := allowWithRetry(ctx, lim)
	fmt.Println("tries:", tries, "allowed:", dec.Allowed(), "left:", dec.Available(), err)

	env.FailCommands(3)
	_, tries, err = allowWithRetry(ctx, lim)
	fmt.Println("tries:", tries, "transient:", coordination.IsTransient(err), "ambiguous:", coordination.IsAmbiguous(err))
	fmt.Println(err)
	dec, _, _ = allowWithRetry(ctx, lim)
	fmt.Println("left:", dec.Available())
	// Output:
	// tries: 3 allowed: true left: 4 <nil>
	// tries: 3 transient: true ambiguous: false
	// coordination: rate limit acquire "limits:export": dial tcp: coordtest: injected fault: connection refused
	// left: 3
}

// A server that stops answering: a call's deadline expires, and a holder
// whose keep-alive cannot renew stops trusting its lease at its local
// deadline.
func ExampleEnv_Pause() {
	t := newExampleTB() // in a test: the test's t
	defer t.end()

	env := coordtest.New(t)
	ctx := context.Background()
	mu, err := lock.New(env.Coordinator(), "jobs:nightly")
	if err != nil {
		t.Fatal(err)
	}
	l, err := mu.TryAcquire(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	l.KeepAlive()

	resume := env.Pause()
	callCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = l.Verify(callCtx)
	cancel()
	fmt.Println("verify while paused:", errors.Is(err, context.DeadlineExceeded))
	<-l.Context().Done()
	fmt.Println("lease lost:", errors.Is(context.Cause(l.Context()), coordination.ErrLost))
	resume()

	// The lease ends on the server at its TTL, after the holder stopped
	// trusting it: a waiter gets it then.
	waitCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	l2, err := mu.Acquire(waitCtx, time.Second)
	fmt.Println("next holder after resume:", err == nil && l2.Token() != l.Token())
	// Output:
	// verify while paused: true
	// lease lost: true
	// next holder after resume: true
}

// exportBatch is code under test: it takes one of the semaphore's permits
// and reports "busy" when every permit is taken.
func exportBatch(ctx context.Context, sem *semaphore.Semaphore) (string, error) {
	p, err := sem.TryAcquire(ctx, 30*time.Second)
	if errors.Is(err, coordination.ErrNotAcquired) {
		return "busy", nil
	}
	if err != nil {
		return "", err
	}
	defer p.Release(context.WithoutCancel(ctx))
	return "exported", nil
}

// A refused permit: another holder has the semaphore's only permit.
func Example_refusedPermit() {
	t := newExampleTB() // in a test: the test's t
	defer t.end()

	env := coordtest.New(t)
	ctx := context.Background()
	sem, err := semaphore.New(env.Coordinator(), "batch:permits", 1)
	if err != nil {
		t.Fatal(err)
	}
	other, err := sem.TryAcquire(ctx, 30*time.Second) // another process's
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println(exportBatch(ctx, sem))
	env.Advance(31 * time.Second) // the other holder's permit expires
	fmt.Println(exportBatch(ctx, sem))
	_ = other
	// Output:
	// busy <nil>
	// exported <nil>
}

// A rate-limit window that ends: the next decision starts a new one.
func ExampleEnv_Advance_window() {
	t := newExampleTB() // in a test: the test's t
	defer t.end()

	env := coordtest.New(t)
	ctx := context.Background()
	lim, err := ratelimit.New(env.Coordinator(), "limits:mail", ratelimit.FixedWindow{Limit: 2, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	for range 3 {
		dec, err := lim.Allow(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		retry, _ := dec.RetryAfter()
		fmt.Println("allowed:", dec.Allowed(), "retry within the hour:", retry > 59*time.Minute && retry <= time.Hour)
	}
	env.Advance(time.Hour)
	dec, err := lim.Allow(ctx, 1)
	fmt.Println("after an hour:", dec.Allowed(), dec.Available(), err)
	// Output:
	// allowed: true retry within the hour: false
	// allowed: true retry within the hour: false
	// allowed: false retry within the hour: true
	// after an hour: true 1 <nil>
}

// snippetTestingPage is the test body of docs/testing.md ("Testing your
// own code"), block by block.
func snippetTestingPage(t testing.TB) {
	env := coordtest.New(t) // stopped when the test ends
	mu, err := lock.New(env.Coordinator(), "jobs:nightly")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	l, err := mu.TryAcquire(ctx, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	env.Advance(31 * time.Second) // the lease expires on the server, not in the process
	if held, err := l.Refresh(ctx, 30*time.Second); held || err != nil {
		t.Fatalf("Refresh = %v, %v; want false, nil", held, err)
	}
	if !errors.Is(context.Cause(l.Context()), coordination.ErrLost) {
		t.Fatal("the lease's context is not cancelled as lost")
	}

	env.LoseReplies(1) // the next command runs on the server; its reply is lost
	_, err = mu.TryAcquire(ctx, 30*time.Second)
	if !coordination.IsAmbiguous(err) || !errors.Is(err, coordtest.ErrInjected) {
		t.Fatalf("TryAcquire = %v, want the injected ambiguous error", err)
	}
	// The library releases what the acquisition took, in the background.
	waitCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	l, err = mu.Acquire(waitCtx, 30*time.Second)
	if err != nil {
		t.Fatalf("Acquire after the background release: %v", err)
	}

	lim, err := ratelimit.New(env.Coordinator(), "limits:export", ratelimit.FixedWindow{Limit: 2, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	env.FailCommands(2) // the next 2 commands fail before they reach the server
	dec, tries, err := allowWithRetry(ctx, lim)
	if err != nil || tries != 3 || dec.Available() != 1 {
		t.Fatalf("allowWithRetry = %v after %d tries, %d left; want the third try granted, 1 left", err, tries, dec.Available())
	}

	if dec, err = lim.Allow(ctx, 1); err != nil || !dec.Allowed() {
		t.Fatalf("second Allow = %v, %v; want granted", dec.Allowed(), err)
	}
	if dec, err = lim.Allow(ctx, 1); err != nil || dec.Allowed() {
		t.Fatalf("third Allow in the hour = %v, %v; want refused", dec.Allowed(), err)
	}
	env.Advance(time.Hour) // the window ends
	if dec, err = lim.Allow(ctx, 1); err != nil || !dec.Allowed() {
		t.Fatalf("Allow in the next window = %v, %v; want granted", dec.Allowed(), err)
	}

	resume := env.Pause() // commands are held: the server stopped answering
	callCtx, cancelCall := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancelCall()
	if _, err := l.Verify(callCtx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Verify while paused = %v, want the deadline's error", err)
	}
	resume()
}

// The test of docs/testing.md's "Testing your own code" passes.
func Example_testingPage() {
	t := newExampleTB() // in a test: the test's t
	defer t.end()
	snippetTestingPage(t)
	fmt.Println("ok")
	// Output: ok
}
