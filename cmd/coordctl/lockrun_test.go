package main

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coordkit/coordination/fencing"
	"github.com/coordkit/coordination/internal/testkit/faultproxy"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// lock run holds the lock while the command runs, passes the fencing token,
// exits with the command's status and releases the lock; on every backend
// that is a real server (standalone and cluster).
func TestLockRunRunsUnderTheLock(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		conn := append(serverArgs(b), "--prefix", b.Prefix())
		script := `echo "token=$COORD_FENCING_TOKEN key=$COORD_LOCK_KEY"; exit 3`
		code, out, errOut := runCmd(t, append(append([]string{"lock", "run"}, conn...), "--key", "job", "--", "sh", "-c", script)...)
		if code != 3 || out != "token=1 key=job\n" {
			t.Fatalf("lock run = %d, stdout %q; want 3 and the token\nstderr:\n%s", code, out, errOut)
		}
		if n := raw.Exists(ctx, b.Key("{job}:lock")).Val(); n != 0 {
			t.Fatal("the lock was not released after the command exited")
		}
		// While another process holds the lock, --no-wait and --timeout give up
		// with 1 and never start the command.
		coord := b.Coordinator(t)
		mu, err := fencing.New(coord, "{job}:lock", "{job}:fence")
		if err != nil {
			t.Fatal(err)
		}
		holder, err := mu.TryAcquire(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		code, out, errOut = runCmd(t, append(append([]string{"lock", "run"}, conn...), "--key", "job", "--no-wait", "--", "echo", "ran")...)
		if strings.Contains(errOut, "waiting for") || !strings.Contains(errOut, "(--no-wait)") {
			t.Errorf("--no-wait logs that it waits:\n%s", errOut)
		}
		if code != exitRefused || out != "" {
			t.Fatalf("--no-wait on a held lock = %d %q, want 1 and no output", code, out)
		}
		start := time.Now()
		code, _, _ = runCmd(t, append(append([]string{"lock", "run"}, conn...), "--key", "job", "--timeout", "200ms", "--", "echo", "ran")...)
		if code != exitRefused || time.Since(start) < 200*time.Millisecond {
			t.Fatalf("--timeout 200ms = %d after %v, want 1 after 200ms", code, time.Since(start))
		}
		// A blocked lock run starts the command once the holder releases.
		type res struct {
			code int
			out  string
		}
		done := make(chan res, 1)
		go func() {
			code, out, _ := runCmd(t, append(append([]string{"lock", "run"}, conn...), "--key", "job", "--", "sh", "-c", `echo "$COORD_FENCING_TOKEN"`)...)
			done <- res{code, out}
		}()
		time.Sleep(100 * time.Millisecond)
		if _, err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-done:
			if r.code != 0 || r.out != "3\n" {
				t.Fatalf("waiting lock run = %d %q, want 0 and token 3", r.code, r.out)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("waiting lock run did not run after the release")
		}
	}, testharness.RealOnly())
}

// When the lock is lost, the command is stopped (SIGTERM) and coordctl
// exits 75 (lost while running), whatever the command's status.
func TestLockRunStopsTheCommandWhenTheLockIsLost(t *testing.T) {
	url, raw := leaderServer(t)
	// The 3s TTL is renewed every second, so the deletion is found within
	// about a second, and a loaded machine does not lose the lock before
	// the command has set its trap (as a 300ms one could).
	p := startCoordctl(t, "lock", "run", "--redis", url, "--key", "lost", "--ttl", "3s", "--grace", "2s",
		"--", "sh", "-c", `trap 'echo got SIGTERM; exit 42' TERM; echo started; while :; do sleep 0.05; done`)
	p.waitOutput(t, "started", 5*time.Second)
	// Someone deletes the lock (an operator, or an expiry during a pause):
	// the next renewal finds it gone.
	if err := raw.Del(context.Background(), "{lost}:lock").Err(); err != nil {
		t.Fatal(err)
	}
	if code := p.waitExit(t, 5*time.Second); code != exitLost {
		t.Fatalf("exit %d, want 75; output:\n%s", code, p.out.String())
	}
	if out := p.out.String(); !strings.Contains(out, "lock lost") || !strings.Contains(out, "got SIGTERM") || !strings.Contains(out, "status was 42") {
		t.Fatalf("output:\n%s", out)
	}
}

// A command that exits 0 after the lock was lost does not make coordctl
// report success: its work was cut short.
func TestLockRunLostThenCleanExitIs75(t *testing.T) {
	url, raw := leaderServer(t)
	// A 3s TTL, as in TestLockRunStopsTheCommandWhenTheLockIsLost.
	p := startCoordctl(t, "lock", "run", "--redis", url, "--key", "lost0", "--ttl", "3s", "--grace", "2s",
		"--", "sh", "-c", `trap 'exit 0' TERM; echo started; while :; do sleep 0.05; done`)
	p.waitOutput(t, "started", 5*time.Second)
	if err := raw.Del(context.Background(), "{lost0}:lock").Err(); err != nil {
		t.Fatal(err)
	}
	if code := p.waitExit(t, 5*time.Second); code != exitLost {
		t.Fatalf("exit %d, want 75; output:\n%s", code, p.out.String())
	}
}

// SIGTERM to coordctl stops the command and releases the lock at once.
func TestLockRunReleasesOnSignal(t *testing.T) {
	url, raw := leaderServer(t)
	p := startCoordctl(t, "lock", "run", "--redis", url, "--key", "sig", "--ttl", "30s",
		"--", "sh", "-c", `echo started; exec sleep 30`)
	p.waitOutput(t, "started", 5*time.Second)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.waitExit(t, 5*time.Second); code != 128+15 {
		t.Fatalf("exit %d, want 143 (the command killed by SIGTERM); output:\n%s", code, p.out.String())
	}
	if n := raw.Exists(context.Background(), "{sig}:lock").Val(); n != 0 {
		t.Fatal("the lock was not released on SIGTERM")
	}
}

func TestLockRunUsageAndStartErrors(t *testing.T) {
	url, raw := leaderServer(t)
	for _, args := range [][]string{
		{"lock", "run", "--redis", url, "--", "true"},                               // no key
		{"lock", "run", "--redis", url, "--key", "k"},                               // no command
		{"lock", "run", "--redis", url, "--key", "k", "--ttl", "1ms", "--", "true"}, // ttl too small
		{"lock", "run", "--redis", url, "--key", "k", "--grace", "-1s", "--", "true"},
		{"lock", "run", "--bogus"},
	} {
		if code, _, _ := runCmd(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	if code, out, _ := runCmd(t, "lock", "run", "-h"); code != 0 && out == "" {
		t.Errorf("-h: exit %d", code)
	}
	code, _, errOut := runCmd(t, "lock", "run", "--redis", url, "--key", "nf", "--", "/no/such/command")
	if code != 127 || !strings.Contains(errOut, "cannot start") {
		t.Fatalf("missing command: exit %d, stderr %q", code, errOut)
	}
	if n := raw.Exists(context.Background(), "{nf}:lock", "{nf}:fence").Val(); n != 0 {
		t.Fatal("a command that cannot be found took the lock (or drew a fencing token)")
	}
	if code, _, _ := runCmd(t, "lock", "run", "--redis", url, "--key", "k", "--no-wait", "--timeout", "1s", "--", "true"); code != 2 {
		t.Errorf("--no-wait with --timeout: exit %d, want 2", code)
	}
	if code, _, _ := runCmd(t, "lock", "run", "--redis", url, "--cluster", "127.0.0.1:1", "--key", "k", "--", "true"); code != 2 {
		t.Errorf("--redis with --cluster: exit %d, want 2", code)
	}
	t.Setenv("COORD_REDIS_URL", "redis://bob:s3cret@127.0.0.1:1/0")
	if _, out, errOut := runCmd(t, "lock", "run", "-h"); strings.Contains(out+errOut, "s3cret") {
		t.Error("-h prints the password of $COORD_REDIS_URL")
	}
	if code, _, errOut := runCmd(t, "lock"); code != 2 || !strings.Contains(errOut, "lock run") {
		t.Errorf("coordctl lock: exit %d, stderr %q", code, errOut)
	}
	if code, _, _ := runCmd(t, "lock", "run", "--redis", "redis://127.0.0.1:1/0", "--key", "k", "--", "true"); code != exitConn {
		t.Fatalf("unreachable server: exit %d, want 3", code)
	}
}

// After the lock is lost to a server that stopped answering, lock run does
// not wait seconds on a release that cannot succeed: the release is bounded
// by what is left of the lease (nothing).
func TestLockRunBoundedReleaseAfterLoss(t *testing.T) {
	srv := testharness.StartStandalone(t, testharness.FirstFlavor(t))
	p := faultproxy.Start(t, srv.Addr)
	// The 2s TTL is renewed every 667ms: a loaded machine does not lose the
	// lock before the server is black-holed (the release would succeed).
	c := startCoordctl(t, "lock", "run", "--redis", "redis://"+p.Addr()+"/0", "--key", "bh", "--ttl", "2s", "--grace", "1s",
		"--", "sh", "-c", `trap 'exit 0' TERM; echo started; while :; do sleep 0.05; done`)
	c.waitOutput(t, "started", 5*time.Second)
	p.BlackHole(faultproxy.Both)
	if code := c.waitExit(t, 10*time.Second); code != exitLost {
		t.Fatalf("exit %d, want 75; output:\n%s", code, c.out.String())
	}
	// The release itself, timed by coordctl's own log (from the command's
	// exit to the release's failure), not by when this test saw the loss
	// and the exit: bounded, it gets 250ms; unbounded, it would wait
	// seconds (the 5s cap of releaseTimeout, or the client's 3s read
	// timeout on the black hole).
	out := c.out.String()
	stopped := stampAt(t, stampOf(t, out, "command stopped"))
	failed := stampAt(t, stampOf(t, out, "release failed"))
	if took := failed.Sub(stopped); took > 2*time.Second {
		t.Fatalf("the release after the loss took %v (unbounded); output:\n%s", took, out)
	}
}

// stampAt parses a time stamp of stampOf, as an instant of today.
func stampAt(t *testing.T, stamp string) time.Time {
	t.Helper()
	at, err := time.Parse("15:04:05.000", stamp)
	if err != nil {
		t.Fatalf("log time stamp %q: %v", stamp, err)
	}
	return at
}

// When renewals fail (a black-holed server), a command that ignores
// SIGTERM is killed when the lock's local deadline passes, before the lock
// can expire on the server and pass to a successor: SIGTERM comes when
// what is left falls to --grace capped at TTL/4 (500ms of a 2s TTL), not
// after the loss, and SIGKILL follows within what was left, not --grace
// (5s) after it. Before, the command got SIGTERM at the loss and ran on,
// beside the next holder, for the whole --grace.
func TestLockRunStopsTheCommandBeforeTheLockEnds(t *testing.T) {
	srv := testharness.StartStandalone(t, testharness.FirstFlavor(t))
	p := faultproxy.Start(t, srv.Addr)
	c := startCoordctl(t, "lock", "run", "--redis", "redis://"+p.Addr()+"/0", "--key", "ahead", "--ttl", "2s", "--grace", "5s",
		"--", "sh", "-c", `trap '' TERM; echo started; while :; do sleep 0.05; done`)
	c.waitOutput(t, "started", 5*time.Second)
	p.BlackHole(faultproxy.Both)
	if code := c.waitExit(t, 10*time.Second); code != exitLost {
		t.Fatalf("exit %d, want 75; output:\n%s", code, c.out.String())
	}
	out := c.out.String()
	if !strings.Contains(out, "lock not renewed") || strings.Contains(out, "lock lost") || !strings.Contains(out, "command stopped with status 137") {
		t.Fatalf("want the command killed (137) ahead of the loss, no loss logged; output:\n%s", out)
	}
	term := stampAt(t, stampOf(t, out, "lock not renewed"))
	killed := stampAt(t, stampOf(t, out, "command stopped"))
	if took := killed.Sub(term); took > 2*time.Second {
		t.Fatalf("SIGKILL came %v after SIGTERM, want within what was left of the 2s lock; output:\n%s", took, out)
	}
}
