package main

import (
	"bytes"
	"strings"
	"testing"
)

// The semaphore scenario runs on the embedded server and every invariant
// it checks holds.
func TestDemoSemaphoreScenario(t *testing.T) {
	var out, errOut bytes.Buffer
	if rc := run([]string{"demo", "--only", "semaphore"}, &out, &errOut); rc != 0 {
		t.Fatalf("coordctl demo --only semaphore exited %d\n%s%s", rc, out.String(), errOut.String())
	}
	for _, want := range []string{"semaphore never exceeded (server)", "latch gated the final step", "6 invariants held, 0 failed"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
}
