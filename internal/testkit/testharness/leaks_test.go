package testharness

import (
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"
)

// blockedForever is the function a leaked goroutine of the tests below
// runs: it blocks until stop is closed.
func blockedForever(stop chan struct{}) { <-stop }

// A goroutine that does not end is reported, with its state and its
// function on top of the stack; once it ends, nothing is; a goroutine that
// ends within the retries is not reported.
func TestFindLeaksReportsAGoroutineThatDoesNotEnd(t *testing.T) {
	if err := FindLeaks(); err != nil {
		t.Fatalf("before the leak: %v", err)
	}
	stop := make(chan struct{})
	go blockedForever(stop)
	start := time.Now()
	err := FindLeaks()
	took := time.Since(start)
	if err == nil {
		close(stop)
		t.Fatal("a goroutine blocked forever was not reported")
	}
	msg := err.Error()
	for _, want := range []string{"1 goroutines left", "in state chan receive",
		"with github.com/coordkit/coordination/internal/testkit/testharness.blockedForever on top of the stack",
		"created by github.com/coordkit/coordination/internal/testkit/testharness.TestFindLeaksReportsAGoroutineThatDoesNotEnd"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the report lacks %q:\n%s", want, msg)
		}
	}
	// goleak's retries: about 0.43 s in all.
	if took < 400*time.Millisecond || took > 5*time.Second {
		t.Errorf("FindLeaks took %v to report, want about 0.43 s of retries", took)
	}
	// The same goroutine, ignored by a function on its stack.
	if err := FindLeaks("github.com/coordkit/coordination/internal/testkit/testharness.blockedForever"); err != nil {
		t.Errorf("a goroutine with an ignored function on its stack was reported: %v", err)
	}
	// A function that only created it (the "created by" line) does not
	// ignore it: it is not on its stack.
	if err := FindLeaks("github.com/coordkit/coordination/internal/testkit/testharness.TestFindLeaksReportsAGoroutineThatDoesNotEnd"); err == nil {
		t.Error("a goroutine was ignored by the function that created it")
	}
	close(stop)
	if err := FindLeaks(); err != nil {
		t.Errorf("after the goroutine ended: %v", err)
	}

	// One that ends during the retries is not a leak.
	stop = make(chan struct{})
	go blockedForever(stop)
	time.AfterFunc(50*time.Millisecond, func() { close(stop) })
	if err := FindLeaks(); err != nil {
		t.Errorf("a goroutine that ended 50 ms later was reported: %v", err)
	}
}

// The test runner's goroutines (the main one blocked in t.Run, a parallel
// subtest paused in t.Parallel until its parent returns) and os/signal's
// goroutines are not leaks: FindLeaks finds nothing while they run.
func TestFindLeaksIgnoresTheRunnersGoroutines(t *testing.T) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1) // starts os/signal's loop
	defer signal.Stop(sig)
	paused := false
	t.Run("paused", func(t *testing.T) {
		t.Parallel()
		paused = true // only once the parent returned
	})
	if paused {
		t.Fatal("the parallel subtest ran before its parent returned")
	}
	stacks := goroutines(true)
	var tops []string
	for _, g := range stacks {
		tops = append(tops, g.top+" ["+g.state+"]")
	}
	// Any state: the paused subtest's goroutine may be caught runnable
	// (being scheduled) on a loaded machine.
	for _, want := range []string{"testing.(*T).Parallel [", "testing.(*T).Run [", "\nos/signal."} {
		if !strings.Contains("\n"+strings.Join(tops, "\n"), want) {
			t.Errorf("no goroutine with %s on top: %q", want, tops)
		}
	}
	if err := FindLeaks(); err != nil {
		t.Errorf("the runner's or os/signal's goroutines were reported: %v", err)
	}
}
