package main

import (
	"strings"
	"testing"
)

// The redlock scenario runs on three embedded servers behind fault proxies
// whatever the backend (TestDemoEveryScenarioEveryBackend runs it with
// every --redis too).
func TestDemoRedlockScenario(t *testing.T) {
	code, out, errOut := runCmd(t, "demo", "--only", "redlock")
	if code != 0 {
		t.Fatalf("coordctl demo --only redlock exited %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"node C cut off", "acquired with one node cut off", "no quorum with two nodes cut off",
		"acquired again after healing", "4 invariants held, 0 failed"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
}
