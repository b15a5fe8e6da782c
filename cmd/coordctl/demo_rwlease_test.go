package main

import (
	"strings"
	"testing"
)

// The rwlease scenario holds all its invariants and shows the key as the
// server holds it: readers and a waiting writer's marker while the writer
// waits, the writer alone while it writes (on the embedded server;
// TestDemoEveryScenarioEveryBackend runs it on the real ones).
func TestDemoRWLease(t *testing.T) {
	code, out, errOut := runCmd(t, "demo", "--only", "rwlease")
	if code != 0 {
		t.Fatalf("coordctl demo --only rwlease exited %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"4 invariants held, 0 failed", "while the writer waited:", " Q:", "while the writer held:   0 readers, 1 writer: W:"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
}

// On the embedded server (miniredis lacks HPEXPIRE) the leases scenario
// says the server lacks hash-field expiration and checks that nothing was
// written; TestDemoEveryScenarioEveryBackend runs it where it works.
func TestDemoLeasesOnEmbeddedServer(t *testing.T) {
	code, out, errOut := runCmd(t, "demo", "--only", "leases")
	if code != 0 {
		t.Fatalf("coordctl demo --only leases exited %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{unsupportedLine, "Redis 7.4", "[ok  ] leases: unsupported server refused before writing", "1 invariants held, 0 failed"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
}
