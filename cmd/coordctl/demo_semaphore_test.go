package main

import (
	"strings"
	"testing"
)

// The semaphore scenario holds all its invariants (on the embedded server;
// TestDemoEveryScenarioEveryBackend runs it on the real ones).
func TestDemoSemaphoreScenario(t *testing.T) {
	code, out, errOut := runCmd(t, "demo", "--only", "semaphore")
	if code != 0 {
		t.Fatalf("coordctl demo --only semaphore exited %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"semaphore never exceeded (server)", "latch gated the final step", "6 invariants held, 0 failed"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
}
