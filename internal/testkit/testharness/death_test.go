package testharness

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// A shared server that dies while tests run (here SIGKILL from outside,
// as a crash would) is reported once with the end of its log; one stopped
// by the harness (Stop, Kill) is not.
func TestSharedServerDeathIsReported(t *testing.T) {
	var out LogBuffer
	old := deathReports
	deathReports = &out
	t.Cleanup(func() { deathReports = old })

	stopped := StartStandalone(t, FirstFlavor(t))
	stopped.markShared()
	stopped.Stop()
	if got := out.String(); got != "" {
		t.Fatalf("a server stopped by the harness was reported: %q", got)
	}

	s := StartStandalone(t, FirstFlavor(t))
	s.markShared()
	s.mu.Lock()
	pid, exit := s.cmd.Process.Pid, s.exit
	s.mu.Unlock()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exit:
	case <-time.After(10 * time.Second):
		t.Fatal("the killed server did not exit")
	}
	got := out.String()
	if !strings.Contains(got, "died while tests ran (signal: killed)") || !strings.Contains(got, "Ready to accept connections") {
		t.Fatalf("report = %q, want the death and the log's end", got)
	}
}
