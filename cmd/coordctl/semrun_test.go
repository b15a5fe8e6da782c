package main

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/semaphore"
)

// semaphore run holds the permits while the command runs, passes the key
// and the count in its environment, exits with the command's status and
// releases the permits; on every real backend (standalone and cluster).
func TestSemaphoreRunPropagatesStatusAndReleases(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Client(t)
		conn := append(serverArgs(b), "--prefix", b.Prefix())
		sem := func(extra ...string) []string {
			return append(append(append([]string{"semaphore", "run"}, conn...), "--key", "enc", "--capacity", "2"), extra...)
		}
		code, out, errOut := runCmd(t, sem("--permits", "2", "--", "sh", "-c", `echo "$COORD_SEMAPHORE_KEY $COORD_PERMITS"; exit 3`)...)
		if code != 3 || out != "enc 2\n" {
			t.Fatalf("semaphore run = %d, stdout %q; want 3 and the environment\nstderr:\n%s", code, out, errOut)
		}
		if n := raw.Exists(ctx, b.Key("enc")).Val(); n != 0 {
			t.Fatal("the permits were not released after the command exited")
		}
		// Both permits held elsewhere: --no-wait and --timeout exit 1 and
		// never start the command.
		s, err := semaphore.New(b.Coordinator(t), "enc", 2)
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.TryAcquireN(ctx, 2, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if code, out, _ := runCmd(t, sem("--no-wait", "--", "echo", "ran")...); code != exitRefused || out != "" {
			t.Fatalf("--no-wait on a full semaphore = %d %q, want 1 and no output", code, out)
		}
		start := time.Now()
		if code, _, _ := runCmd(t, sem("--timeout", "200ms", "--", "echo", "ran")...); code != exitRefused || time.Since(start) < 200*time.Millisecond {
			t.Fatalf("--timeout 200ms = %d after %v, want 1 after 200ms", code, time.Since(start))
		}
		// Another capacity while permits are live: refused (1).
		code, _, errOut = runCmd(t, append(append(append([]string{"semaphore", "run"}, conn...), "--key", "enc", "--capacity", "3", "--no-wait"), "--", "true")...)
		if code != exitRefused || !strings.Contains(errOut, "another capacity") {
			t.Fatalf("capacity mismatch = %d %q, want 1", code, errOut)
		}
		// A waiting run starts once the holder releases.
		done := make(chan int, 1)
		go func() {
			code, _, _ := runCmd(t, sem("--", "true")...)
			done <- code
		}()
		time.Sleep(100 * time.Millisecond)
		if _, err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case code := <-done:
			if code != 0 {
				t.Fatalf("waiting semaphore run = %d, want 0", code)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("waiting semaphore run did not run after the release")
		}
	}, testharness.RealOnly())
}

// SIGINT and SIGTERM to coordctl reach the command (its own process
// group), and the permit is released at once.
func TestSemaphoreRunForwardsSignalsAndReleases(t *testing.T) {
	url, raw := leaderServer(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			key := "sig-" + strings.ReplaceAll(sig.String(), " ", "")
			p := startCoordctl(t, "semaphore", "run", "--redis", url, "--key", key, "--capacity", "1", "--ttl", "30s",
				"--", "sh", "-c", `trap 'echo got TERM; exit 42' TERM; trap 'echo got INT; exit 42' INT; echo started; while :; do sleep 0.05; done`)
			p.waitOutput(t, "started", 5*time.Second)
			if n := raw.ZCard(context.Background(), key).Val(); n != 2 { // the capacity record and one holder
				t.Fatalf("ZCARD %s = %d while the command runs, want 2", key, n)
			}
			if err := p.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if code := p.waitExit(t, 5*time.Second); code != 42 {
				t.Fatalf("exit %d, want the command's 42; output:\n%s", code, p.out.String())
			}
			want := map[syscall.Signal]string{syscall.SIGTERM: "got TERM", syscall.SIGINT: "got INT"}[sig]
			if !strings.Contains(p.out.String(), want) {
				t.Fatalf("the command did not get %v:\n%s", sig, p.out.String())
			}
			if n := raw.Exists(context.Background(), key).Val(); n != 0 {
				t.Fatalf("the permit was not released on %v", sig)
			}
		})
	}
}

// When the permit is lost (an operator removed it), the command is stopped
// and coordctl exits 75, whatever the command's status.
func TestSemaphoreRunStopsTheCommandWhenThePermitIsLost(t *testing.T) {
	url, raw := leaderServer(t)
	// The 3s TTL is renewed every second, so the deletion is found within
	// about a second, and a loaded machine does not lose the permit before
	// the command has set its trap. The grace is long: a command stopped at
	// once by SIGTERM and one killed when the grace ran out are far apart.
	const grace = 20 * time.Second
	p := startCoordctl(t, "semaphore", "run", "--redis", url, "--key", "lost", "--capacity", "3", "--ttl", "3s", "--grace", grace.String(),
		"--", "sh", "-c", `trap 'echo got TERM; exit 0' TERM; echo started; while :; do sleep 0.05; done`)
	p.waitOutput(t, "started", 5*time.Second)
	if err := raw.Del(context.Background(), "lost").Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if code := p.waitExit(t, grace); code != exitLost {
		t.Fatalf("exit %d, want 75; output:\n%s", code, p.out.String())
	}
	if out := p.out.String(); !strings.Contains(out, "permit lost") || !strings.Contains(out, "got TERM") {
		t.Fatalf("output:\n%s", out)
	}
	if took := time.Since(start); took > grace/4 {
		t.Fatalf("coordctl took %v to exit after the loss, want well under the %v grace (stopped at once, not killed)", took, grace)
	}
}

func TestSemaphoreRunUsage(t *testing.T) {
	url, raw := leaderServer(t)
	for _, args := range [][]string{
		{"semaphore", "run", "--redis", url, "--capacity", "2", "--", "true"},                                 // no key
		{"semaphore", "run", "--redis", url, "--key", "k", "--", "true"},                                      // no capacity
		{"semaphore", "run", "--redis", url, "--key", "k", "--capacity", "2"},                                 // no command
		{"semaphore", "run", "--redis", url, "--key", "k", "--capacity", "2", "--permits", "3", "--", "true"}, // too many
		{"semaphore", "run", "--redis", url, "--key", "k", "--capacity", "x", "--", "true"},
		{"semaphore", "run", "--redis", url, "--key", "k", "--capacity", "2", "--ttl", "30", "--", "true"},
	} {
		if code, _, errOut := runCmd(t, args...); code != exitUsage || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line", args, code, errOut)
		}
	}
	code, _, errOut := runCmd(t, "semaphore", "run", "--redis", url, "--key", "nf", "--capacity", "1", "--", "/no/such/command")
	if code != 127 || !strings.Contains(errOut, "cannot start") {
		t.Fatalf("missing command: exit %d, stderr %q", code, errOut)
	}
	if n := raw.Exists(context.Background(), "nf").Val(); n != 0 {
		t.Fatal("a command that cannot be found took a permit")
	}
}
