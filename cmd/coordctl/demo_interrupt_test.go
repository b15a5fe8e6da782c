package main

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"
)

// demo --redis interrupted by Ctrl-C (SIGINT) stops the scenario under
// way, removes every key it wrote from the server, says so and exits 130.
func TestDemoInterruptedRemovesItsKeys(t *testing.T) {
	url, raw := leaderServer(t)
	ctx := context.Background()
	p := startCoordctl(t, "demo", "--redis", url, "--prefix", "itest:")
	// The fencing scenario runs first and holds keys for seconds.
	p.waitOutput(t, "== ", 30*time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for {
		keys, err := raw.Keys(ctx, "itest:coordctl-demo:*").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the demo wrote no key within 30 s:\n%s", p.out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := p.waitExit(t, 30*time.Second); code != 130 {
		t.Fatalf("exit %d after SIGINT, want 130:\n%s", code, p.out.String())
	}
	out := p.out.String()
	if !strings.Contains(out, "coordctl demo: interrupted") || !strings.Contains(out, "removed the demo's") {
		t.Fatalf("output lacks the interruption or the removal:\n%s", out)
	}
	if strings.Contains(out, "invariants held") {
		t.Fatalf("an interrupted demo reported invariants:\n%s", out)
	}
	keys, err := raw.Keys(ctx, "itest:coordctl-demo:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) > 0 {
		t.Fatalf("keys left after the interrupted demo: %q", keys)
	}
}
