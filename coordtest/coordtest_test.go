package coordtest_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/coordtest"
	"github.com/coordkit/coordination/lock"
)

// set sets key to "v" through the Env's client and returns its error.
func set(env *coordtest.Env, key string) error {
	return env.Client().Set(context.Background(), key, "v", 0).Err()
}

// exists reports whether key is on the server, reading it past any fault.
func exists(t *testing.T, env *coordtest.Env, key string) bool {
	t.Helper()
	n, err := env.Client().Exists(context.Background(), key).Result()
	if err != nil {
		t.Fatalf("EXISTS %s: %v", key, err)
	}
	return n == 1
}

func TestLoseRepliesLosesExactlyN(t *testing.T) {
	env := coordtest.New(t)
	env.LoseReplies(1)
	err := set(env, "a")
	if !errors.Is(err, coordtest.ErrInjected) || !coordination.IsAmbiguous(err) || !coordination.IsTransient(err) {
		t.Fatalf("SET a with a lost reply: %v (injected %v, ambiguous %v, transient %v), want an injected, ambiguous, transient error",
			err, errors.Is(err, coordtest.ErrInjected), coordination.IsAmbiguous(err), coordination.IsTransient(err))
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("SET a with a lost reply: %v, want a net.Error timeout", err)
	}
	if !exists(t, env, "a") {
		t.Error("SET a whose reply was lost did not run on the server")
	}
	if err := set(env, "b"); err != nil {
		t.Errorf("SET b after LoseReplies(1) lost one reply: %v, want nil", err)
	}

	env.LoseReplies(2)
	env.LoseReplies(1) // calls add up
	for i := range 3 {
		if err := set(env, "c"); !errors.Is(err, coordtest.ErrInjected) {
			t.Errorf("SET %d of 3 after LoseReplies(2) and (1): %v, want a lost reply", i+1, err)
		}
	}
	if err := set(env, "c"); err != nil {
		t.Errorf("SET 4 after LoseReplies(2) and (1): %v, want nil", err)
	}
	env.LoseReplies(0)
	if err := set(env, "c"); err != nil {
		t.Errorf("SET after LoseReplies(0): %v, want nil", err)
	}
}

func TestFailCommandsFailsExactlyNUnsent(t *testing.T) {
	env := coordtest.New(t)
	env.FailCommands(2)
	for i := range 2 {
		err := set(env, "a")
		if !errors.Is(err, coordtest.ErrInjected) || !errors.Is(err, syscall.ECONNREFUSED) ||
			coordination.IsAmbiguous(err) || !coordination.IsTransient(err) {
			t.Fatalf("SET %d of 2 after FailCommands(2): %v, want an injected refused dial, transient and not ambiguous", i+1, err)
		}
	}
	if exists(t, env, "a") {
		t.Fatal("a failed SET reached the server")
	}
	if err := set(env, "a"); err != nil || !exists(t, env, "a") {
		t.Fatalf("SET 3 after FailCommands(2): %v, want it run", err)
	}

	// Through the library: an acquisition that fails so wrote nothing.
	mu, err := lock.New(env.Coordinator(), "jobs")
	if err != nil {
		t.Fatal(err)
	}
	env.FailCommands(1)
	if _, err := mu.TryAcquire(context.Background(), time.Minute); !errors.Is(err, coordtest.ErrInjected) || coordination.IsAmbiguous(err) {
		t.Fatalf("TryAcquire with a failed command: %v (ambiguous %v), want the injected error, not ambiguous", err, coordination.IsAmbiguous(err))
	}
	if exists(t, env, "jobs") {
		t.Fatal("an acquisition that failed before the server holds the lock")
	}
	l, err := mu.TryAcquire(context.Background(), time.Minute)
	if err != nil {
		t.Fatalf("TryAcquire after the failure: %v", err)
	}
	if got, _ := env.Client().Get(context.Background(), "jobs").Result(); got != l.Token() {
		t.Errorf("GET jobs = %q, want the holder's token %q", got, l.Token())
	}
}

func TestFailedCommandsComeBeforeLostReplies(t *testing.T) {
	env := coordtest.New(t)
	env.LoseReplies(1)
	env.FailCommands(1)
	if err := set(env, "a"); coordination.IsAmbiguous(err) || !errors.Is(err, coordtest.ErrInjected) {
		t.Fatalf("first SET: %v, want the failure (not ambiguous)", err)
	}
	if err := set(env, "b"); !coordination.IsAmbiguous(err) || !errors.Is(err, coordtest.ErrInjected) {
		t.Fatalf("second SET: %v, want the lost reply (ambiguous)", err)
	}
	if exists(t, env, "a") || !exists(t, env, "b") {
		t.Fatal("the failed SET ran, or the one whose reply was lost did not")
	}
}

func TestLostAcquisitionIsReleasedInTheBackground(t *testing.T) {
	env := coordtest.New(t, coordination.WithKeyPrefix("app:"))
	mu, err := lock.New(env.Coordinator(), "jobs")
	if err != nil {
		t.Fatal(err)
	}
	env.LoseReplies(1)
	if _, err := mu.TryAcquire(context.Background(), time.Minute); !coordination.IsAmbiguous(err) {
		t.Fatalf("TryAcquire with a lost reply: %v, want an ambiguous error", err)
	}
	// The background cleanup leaves the lock free: a tombstone that only
	// the lost acquisition's own late request cannot pass.
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := mu.Holder(context.Background())
		if errors.Is(err, coordination.ErrNotHeld) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lock taken by an acquisition whose reply was lost is still held after 5 s (its TTL is a minute): %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	l, err := mu.TryAcquire(context.Background(), time.Minute)
	if err != nil {
		t.Fatalf("TryAcquire after the cleanup: %v", err)
	}
	if _, err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestAdvanceMovesTimeAndTTLs(t *testing.T) {
	env := coordtest.New(t)
	ctx := context.Background()
	rdb := env.Client()
	before, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, "k", "v", 10*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	env.Advance(4 * time.Second)
	ttl, err := rdb.PTTL(ctx, "k").Result()
	if err != nil || ttl > 6*time.Second || ttl < 5*time.Second {
		t.Fatalf("PTTL after Advance(4s) of a 10 s TTL = %v, %v; want about 6 s", ttl, err)
	}
	after, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if d := after.Sub(before); d < 4*time.Second || d > 5*time.Second {
		t.Errorf("TIME moved %v across Advance(4s), want 4 s and a little", d)
	}
	// The server's clock follows the real clock between jumps.
	time.Sleep(50 * time.Millisecond)
	later, err := rdb.Time(ctx).Result()
	if err != nil || later.Sub(after) < 50*time.Millisecond {
		t.Errorf("TIME moved %v in 50 ms of real time (%v), want at least 50 ms", later.Sub(after), err)
	}
	env.Advance(6 * time.Second)
	if n, err := rdb.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Errorf("EXISTS k after its TTL passed = %d, %v; want 0", n, err)
	}
	env.Advance(0)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Advance(-1s) did not panic")
			}
		}()
		env.Advance(-time.Second)
	}()
}

func TestAdvanceEndsALeaseOnTheServerOnly(t *testing.T) {
	env := coordtest.New(t)
	ctx := context.Background()
	mu, err := lock.New(env.Coordinator(), "jobs")
	if err != nil {
		t.Fatal(err)
	}
	l, err := mu.TryAcquire(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	env.Advance(10 * time.Second)
	if r := l.Remaining(); r < 9*time.Second {
		t.Errorf("Remaining after Advance = %v, want the local estimate (above 9 s): Advance does not move the process's clock", r)
	}
	if held, err := l.Verify(ctx); held || err != nil {
		t.Fatalf("Verify after the TTL passed on the server = %v, %v; want false, nil", held, err)
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, coordination.ErrLost) {
		t.Errorf("lease context cause = %v, want ErrLost", cause)
	}
}

func TestPauseHoldsCommandsUntilResume(t *testing.T) {
	env := coordtest.New(t)
	resume1 := env.Pause()
	resume2 := env.Pause()
	done := make(chan error, 1)
	go func() { done <- set(env, "a") }()

	time.Sleep(50 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("SET returned while paused: %v", err)
	default:
	}
	resume1()
	resume1() // a second call does nothing
	time.Sleep(50 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("SET returned with one of two pauses resumed: %v", err)
	default:
	}
	resume2()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("SET after resume: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("SET still held 5 s after every resume")
	}
	if !exists(t, env, "a") {
		t.Fatal("the resumed SET did not run")
	}
}

func TestPausedCommandEndsWithItsContextUnsent(t *testing.T) {
	env := coordtest.New(t)
	resume := env.Pause()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := env.Client().Set(ctx, "a", "v", 0).Err()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("paused SET with a 50 ms deadline: %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("paused SET returned after %v, want about 50 ms", d)
	}
	resume()
	if exists(t, env, "a") {
		t.Fatal("a paused SET whose context ended reached the server")
	}
}

// The Pub/Sub connection's handshake (a new connection) goes through the
// client's hooks and does not count as a command.
func TestConnectionHandshakeIsNotCounted(t *testing.T) {
	env := coordtest.New(t)
	ctx := context.Background()
	env.FailCommands(1)
	sub := env.Client().Subscribe(ctx, "ch")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatalf("SUBSCRIBE with a failure armed: %v", err)
	}
	if err := set(env, "a"); !errors.Is(err, coordtest.ErrInjected) {
		t.Fatalf("first command after a new connection: %v, want the armed failure", err)
	}
}

// Faults armed from the test's goroutine while others send commands are
// each taken exactly once: a failed command did not run, a lost reply's
// did.
func TestFaultsUnderConcurrencyAreExact(t *testing.T) {
	env := coordtest.New(t)
	ctx := context.Background()
	const lose, fail = 5, 7
	var ok, lost, failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				err := env.Client().Incr(ctx, "n").Err()
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, coordtest.ErrInjected) && coordination.IsAmbiguous(err):
					lost.Add(1)
				case errors.Is(err, coordtest.ErrInjected):
					failed.Add(1)
				default:
					t.Errorf("goroutine %d: INCR: %v", g, err)
					return
				}
			}
		}()
	}
	for range lose {
		env.LoseReplies(1)
		env.Advance(time.Millisecond)
	}
	env.FailCommands(fail)
	deadline := time.Now().Add(10 * time.Second)
	for lost.Load() < lose || failed.Load() < fail {
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // more commands, which no fault may reach
	close(stop)
	wg.Wait()
	if lost.Load() != lose || failed.Load() != fail {
		t.Fatalf("lost %d replies and failed %d commands, want %d and %d", lost.Load(), failed.Load(), lose, fail)
	}
	got, err := env.Client().Get(ctx, "n").Result()
	if err != nil {
		t.Fatal(err)
	}
	if want := strconv.FormatInt(ok.Load()+lose, 10); got != want {
		t.Errorf("n = %s, want %s: the %d successful INCRs and the %d whose replies were lost, not the %d failed", got, want, ok.Load(), lose, fail)
	}
}

// The end of the test resumes a paused command and drops armed faults.
func TestEndOfTestResumes(t *testing.T) {
	done := make(chan error, 1)
	t.Run("sub", func(t *testing.T) {
		env := coordtest.New(t)
		env.LoseReplies(3)
		env.Pause()
		client := env.Client()
		go func() { done <- client.Ping(context.Background()).Err() }()
		time.Sleep(20 * time.Millisecond)
	})
	select {
	case err := <-done:
		if errors.Is(err, coordtest.ErrInjected) {
			t.Errorf("the held PING got an injected fault after the test ended: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("a paused command is still held after its test ended")
	}
}
