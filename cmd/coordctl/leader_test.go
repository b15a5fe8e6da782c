package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// The test binary doubles as coordctl: with COORDCTL_TEST_AS_MAIN=1 it runs
// run(os.Args[1:]) and exits, so tests can start real coordctl processes
// and send them signals.
func init() {
	if os.Getenv("COORDCTL_TEST_AS_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
}

// syncBuffer is a buffer safe for a writer and a reader.
type syncBuffer = testharness.LogBuffer

// coordctlProc is a coordctl process started by a test.
type coordctlProc struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	code int
}

func startCoordctl(t *testing.T, args ...string) *coordctlProc {
	t.Helper()
	return startWithEnv(t, nil, args...)
}

// startWithEnv is startCoordctl with env added to coordctl's environment.
func startWithEnv(t *testing.T, env []string, args ...string) *coordctlProc {
	t.Helper()
	p := &coordctlProc{out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(os.Args[0], args...)
	// GORACE: a race-enabled binary otherwise sleeps 1 s before exiting.
	p.cmd.Env = append(append(os.Environ(), "COORDCTL_TEST_AS_MAIN=1", "GORACE=atexit_sleep_ms=0"), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	// A process group of its own, and on Linux SIGKILL when its parent,
	// this test binary, dies (a panic, a -timeout, a killed go test), which
	// cleanups do not survive. The commands coordctl starts die with it
	// (their supervisor kills their tree: see child), so no shell loop
	// outlives the test however it ends.
	p.cmd.SysProcAttr = procAttr()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.code = exitCode(p.cmd.ProcessState, nil)
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done: // reaped: its pid (and group id) may be reused
		default:
			// SIGKILL to coordctl alone: its supervisor (in coordctl's
			// group) must live on to kill the command's tree.
			killProcess(p.cmd.Process)
		}
		<-p.done
	})
	return p
}

// waitExit waits for the process to exit and returns its status.
func (p *coordctlProc) waitExit(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(within):
		t.Fatalf("coordctl did not exit within %v; output:\n%s", within, p.out.String())
		return 0
	}
}

// waitOutput waits until the output contains s.
func (p *coordctlProc) waitOutput(t *testing.T, s string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(p.out.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("output lacks %q after %v:\n%s", s, within, p.out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func leaderServer(t *testing.T) (url string, raw *redis.Client) {
	t.Helper()
	srv := testharness.StartStandalone(t, testharness.FirstFlavor(t))
	raw = redis.NewClient(srv.Options())
	t.Cleanup(func() { _ = raw.Close() })
	return "redis://" + srv.Addr + "/0", raw
}

func runCoordctl(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

// leader run runs the command with the token and identity in its
// environment, propagates its exit status and releases leadership.
func TestLeaderRunPropagatesStatusAndReleases(t *testing.T) {
	url, raw := leaderServer(t)
	code, out, errs := runCoordctl("leader", "run", "--redis", url, "--key", "job", "--id", "alpha", "--lease", "2s",
		"--", "sh", "-c", `echo "id=$COORD_LEADER_ID token=$COORD_FENCING_TOKEN"; exit 3`)
	if code != 3 || out != "id=alpha token=1\n" {
		t.Fatalf("leader run = %d, stdout %q; want 3 and the environment\nstderr:\n%s", code, out, errs)
	}
	if n := raw.Exists(context.Background(), "{job}:leader").Val(); n != 0 {
		t.Fatal("the lease was not released after the command exited")
	}
	code, out, _ = runCoordctl("leader", "status", "--redis", url, "--key", "job")
	if code != exitRefused || !strings.Contains(out, "no leader") {
		t.Fatalf("leader status = %d %q, want 1 and no leader", code, out)
	}
	// The next term gets the next token.
	code, out, _ = runCoordctl("leader", "run", "--redis", url, "--key", "job", "--id", "beta",
		"--", "sh", "-c", `echo "$COORD_FENCING_TOKEN"`)
	if code != 0 || out != "2\n" {
		t.Fatalf("second run = %d %q, want 0 and token 2", code, out)
	}
}

func TestLeaderRunUsageAndStartErrors(t *testing.T) {
	url, _ := leaderServer(t)
	for _, args := range [][]string{
		{"leader", "run", "--redis", url, "--", "true"},                           // no --key
		{"leader", "run", "--redis", url, "--key", "k"},                           // no command
		{"leader", "run", "--redis", url, "--key", "k", "--lease", "1ms", "true"}, // lease too short
		{"leader", "status", "--redis", url},                                      // no --key
		{"leader", "run", "--bogus"},
	} {
		if code, _, _ := runCoordctl(args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	if code, _, _ := runCoordctl("leader", "run", "-h"); code != 0 {
		t.Errorf("leader run -h: exit %d, want 0", code)
	}
	code, _, errs := runCoordctl("leader", "run", "--redis", url, "--key", "k", "--", filepath.Join(t.TempDir(), "missing"))
	if code != 127 || !strings.Contains(errs, "cannot start") {
		t.Errorf("missing command: exit %d, stderr %q; want 127", code, errs)
	}
	code, _, errs = runCoordctl("leader", "status", "--redis", "redis://127.0.0.1:1/0", "--key", "k")
	if code != exitConn || !strings.Contains(errs, "cannot reach") {
		t.Errorf("unreachable server: exit %d, stderr %q; want 3", code, errs)
	}
}

// Two coordctl processes: the first leads and runs its command, the second
// waits; SIGTERM to the first stops its command and releases the lease, and
// the second takes over at once with the next token. When the second's
// lease is taken away, its command is stopped (SIGTERM) and it campaigns
// and runs the command again.
func TestLeaderRunTwoProcesses(t *testing.T) {
	url, raw := leaderServer(t)
	// The trap is set before "started" is printed, so a SIGTERM after that
	// always runs it.
	script := `trap 'echo "stopping $COORD_LEADER_ID"; exit 0' TERM; echo "started $COORD_LEADER_ID $COORD_FENCING_TOKEN"; while :; do sleep 0.05; done`
	args := func(id, lease string) []string {
		return []string{"leader", "run", "--redis", url, "--key", "svc", "--id", id, "--lease", lease, "--retry", "100ms", "--grace", "2s", "--", "sh", "-c", script}
	}
	// alpha's lease is long: had alpha not released it on SIGTERM, beta
	// could not take over before it expired, at least half of it (alpha
	// renews every half lease) after the signal. beta's lease is short, so
	// that its renewal finds it taken away soon (every second).
	a := startCoordctl(t, args("alpha", "20s")...)
	a.waitOutput(t, "started alpha 1", 5*time.Second)
	b := startCoordctl(t, args("beta", "2s")...)
	b.waitOutput(t, `campaigning for "svc"`, 5*time.Second)

	code, out, _ := runCoordctl("leader", "status", "--redis", url, "--key", "svc")
	if code != 0 || !strings.Contains(out, "leader:        alpha") || !strings.Contains(out, "fencing token: 1") {
		t.Fatalf("status = %d:\n%s", code, out)
	}
	// What is left of alpha's lease: beta cannot be elected before that
	// has passed unless alpha released the lease.
	left := raw.PTTL(context.Background(), "{svc}:leader").Val()
	if left < 5*time.Second {
		t.Fatalf("alpha's 20s lease has %v left, want at least half of it (it renews every half lease)", left)
	}
	stopped := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	b.waitOutput(t, "started beta 2", left+5*time.Second)
	// Released at once vs. expired: beta's election (and the start of its
	// command, and this test seeing it) within half of what was left of
	// alpha's lease, which an expiry takes all of.
	if took := time.Since(stopped); took > left/2 {
		t.Errorf("beta took over %v after alpha was stopped, want well under the %v left of alpha's lease (released, not expired)\nalpha:\n%s\nbeta:\n%s",
			took, left, a.out.String(), b.out.String())
	}
	if code := a.waitExit(t, 5*time.Second); code != 0 {
		t.Fatalf("alpha exited %d, want its command's 0; output:\n%s", code, a.out.String())
	}
	// alpha's command was stopped (it trapped SIGTERM) before beta's began.
	aOut, bOut := a.out.String(), b.out.String()
	if !strings.Contains(aOut, "stopping alpha") {
		t.Fatalf("alpha's command was not stopped with SIGTERM:\n%s", aOut)
	}
	if stampOf(t, aOut, "command stopped") > stampOf(t, bOut, "elected with fencing token 2") {
		t.Errorf("beta was elected before alpha's command stopped:\nalpha:\n%s\nbeta:\n%s", aOut, bOut)
	}

	// Take beta's lease away: its command is stopped and it leads again
	// with a new token.
	if err := raw.Del(context.Background(), "{svc}:leader").Err(); err != nil {
		t.Fatal(err)
	}
	b.waitOutput(t, "stopping beta", 5*time.Second)
	b.waitOutput(t, "started beta 3", 5*time.Second)
	if err := b.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := b.waitExit(t, 5*time.Second); code != 0 {
		t.Fatalf("beta exited %d; output:\n%s", code, b.out.String())
	}
	if n := raw.Exists(context.Background(), "{svc}:leader").Val(); n != 0 {
		t.Fatal("the lease was not released on SIGINT")
	}
	t.Logf("alpha:\n%s\nbeta:\n%s", a.out.String(), b.out.String())
}

// A command that ignores SIGTERM is killed after the grace period, and the
// command dies with a killed coordctl (it must not outlive its lease).
func TestLeaderRunGraceAndOrphans(t *testing.T) {
	url, _ := leaderServer(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	p := startCoordctl(t, "leader", "run", "--redis", url, "--key", "stubborn", "--id", "s", "--grace", "300ms",
		"--", "sh", "-c", fmt.Sprintf(`echo $$ > %s; trap '' TERM; echo ready; while :; do sleep 0.05; done`, pidFile))
	p.waitOutput(t, "ready", 5*time.Second)
	start := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	code := p.waitExit(t, 5*time.Second)
	if took := time.Since(start); code != 128+int(syscall.SIGKILL) || took < 300*time.Millisecond {
		t.Fatalf("exit %d after %v, want %d after the 300ms grace; output:\n%s", code, took, 128+int(syscall.SIGKILL), p.out.String())
	}

	p = startCoordctl(t, "leader", "run", "--redis", url, "--key", "orphan", "--id", "o",
		"--", "sh", "-c", fmt.Sprintf(`echo $$ > %s; echo ready; while :; do sleep 0.05; done`, pidFile))
	p.waitOutput(t, "ready", 5*time.Second)
	var pid int
	b, _ := os.ReadFile(pidFile)
	if _, err := fmt.Sscan(string(b), &pid); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Process.Kill()
	p.waitExit(t, 5*time.Second)
	deadline := time.Now().Add(2 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatal("the command outlived its killed coordctl")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestLeaderStatusWatch(t *testing.T) {
	url, _ := leaderServer(t)
	w := startCoordctl(t, "leader", "status", "--redis", url, "--key", "w", "--watch", "--poll", "20ms")
	w.waitOutput(t, "no leader", 5*time.Second)
	// The leader's command runs until the watch has reported it (the file
	// seen appears), not for a fixed time a loaded machine may let pass
	// before the watch polls.
	seen := filepath.Join(t.TempDir(), "seen")
	markSeen := sync.OnceFunc(func() {
		if err := os.WriteFile(seen, nil, 0o600); err != nil {
			t.Error(err)
		}
	})
	ran := make(chan int, 1)
	go func() {
		code, _, _ := runCoordctl("leader", "run", "--redis", url, "--key", "w", "--id", "watched",
			"--", "sh", "-c", `while [ ! -e "$0" ]; do sleep 0.01; done`, seen)
		ran <- code
	}()
	t.Cleanup(func() { markSeen(); <-ran })
	w.waitOutput(t, "leader watched  fencing token 1", 5*time.Second)
	markSeen()
	select {
	case code := <-ran:
		ran <- code // for the cleanup
		if code != 0 {
			t.Fatalf("leader run exit %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("leader run did not exit after its command was told to")
	}
	// After the command exited the lease was released: no leader again.
	deadline := time.Now().Add(5 * time.Second)
	for strings.Count(w.out.String(), "no leader") < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("watch did not report the release:\n%s", w.out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = w.cmd.Process.Signal(syscall.SIGINT)
	if code := w.waitExit(t, 5*time.Second); code != 0 {
		t.Fatalf("watch exited %d:\n%s", code, w.out.String())
	}
	lines := strings.Split(strings.TrimSpace(w.out.String()), "\n")
	if len(lines) != 3 || !strings.HasSuffix(lines[2], "no leader") {
		t.Fatalf("watch output:\n%s\nwant no leader, the leader, no leader", w.out.String())
	}
}

// stampOf returns the time stamp of the first coordctl log line holding s.
func stampOf(t *testing.T, out, s string) string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, s) && strings.Contains(line, " coordctl ") {
			return strings.Fields(line)[0]
		}
	}
	t.Fatalf("no log line with %q in:\n%s", s, out)
	return ""
}
