package leakcheck_test

import (
	"net"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// The leak check of testharness.Main (testharness.FindLeaks, which the
// library's packages run after their tests without goleak) finds the same
// goroutines as goleak.Find, with and without an ignored function, while
// goroutines of several kinds are left running next to the test runner's
// and os/signal's own.
func TestHarnessLeakCheckFindsWhatGoleakFinds(t *testing.T) {
	ids := regexp.MustCompile(`(?i)goroutine (\d+) in state`)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	defer signal.Stop(sig)
	t.Run("paused", func(t *testing.T) { t.Parallel() })
	// Earlier tests' shared servers (os/exec waits) are found by both
	// checks too: count this test's goroutines apart from them.
	base := len(ids.FindAllString(errString(goleak.Find()), -1))

	stop := make(chan struct{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { <-stop }() // chan receive
	go func() {
		select {
		case <-stop:
		case <-time.After(time.Hour):
		}
	}() // select
	go func() { _, _ = ln.Accept() }() // IO wait
	go blockedInHelper(stop)           // ignored below
	defer func() { close(stop); _ = ln.Close() }()

	found := func(err error) []string {
		if err == nil {
			return nil
		}
		var out []string
		for _, m := range ids.FindAllStringSubmatch(err.Error(), -1) {
			out = append(out, m[1])
		}
		slices.Sort(out)
		return out
	}
	const helper = "github.com/coordkit/coordination/tests/leakcheck_test.blockedInHelper"
	for _, ignore := range [][]string{nil, {helper}} {
		var opts []goleak.Option
		for _, f := range ignore {
			opts = append(opts, goleak.IgnoreAnyFunction(f))
		}
		want := found(goleak.Find(opts...))
		got := found(testharness.FindLeaks(ignore...))
		if n := base + 4 - len(ignore); len(want) != n {
			t.Errorf("ignoring %q: goleak found goroutines %v, want %d", ignore, want, n)
		}
		if !slices.Equal(got, want) {
			t.Errorf("ignoring %q: the harness found goroutines %v, goleak %v", ignore, got, want)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func blockedInHelper(stop chan struct{}) { <-stop }
