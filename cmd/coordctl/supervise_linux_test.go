package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/fencing"
	"github.com/coordkit/coordination/semaphore"
)

// markedProcesses returns the pids of the live processes whose
// environment holds mark (a "KEY=value" entry), this test's process
// excepted.
func markedProcesses(t *testing.T, mark string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []string
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' || e.Name() == strconv.Itoa(os.Getpid()) {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		if i := bytes.LastIndexByte(stat, ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' {
			continue // gone, or a zombie: dead
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		for kv := range bytes.SplitSeq(env, []byte{0}) {
			if string(kv) == mark {
				pids = append(pids, e.Name())
				break
			}
		}
	}
	return pids
}

// startMarked starts coordctl (see startCoordctl) with mark added to its
// environment, so that every process of the command carries it too.
func startMarked(t *testing.T, mark string, args ...string) *coordctlProc {
	t.Helper()
	return startWithEnv(t, []string{mark}, args...)
}

// kill -9 of coordctl while its command runs: the command, the shell's
// child (sleep 30, which "; true" keeps from being exec'd in the shell's
// place) and a process that left the command's process group (setsid) are
// all gone before a second holder gets the lock, the permit or the
// leadership (issue 22: they used to run on, re-parented, next to the
// second holder). The lease is renewed every third (half, for a leader)
// of its 3s, so it outlives coordctl by 2s at least: the tree must be gone
// within that.
func TestRunCommandTreeDiesWithCoordctl(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid (util-linux) to start a process that leaves the command's group")
	}
	url, raw := leaderServer(t)
	coord, err := coordination.New(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		args   []string
		second func(ctx context.Context) error // becomes the second holder
	}{
		{"lock run", []string{"lock", "run", "--key", "k9", "--ttl", "3s"}, func(ctx context.Context) error {
			mu, err := fencing.New(coord, "{k9}:lock", "{k9}:fence")
			if err != nil {
				return err
			}
			_, err = mu.Acquire(ctx, time.Minute)
			return err
		}},
		{"semaphore run", []string{"semaphore", "run", "--key", "s9", "--capacity", "1", "--ttl", "3s"}, func(ctx context.Context) error {
			sem, err := semaphore.New(coord, "s9", 1)
			if err != nil {
				return err
			}
			_, err = sem.Acquire(ctx, time.Minute)
			return err
		}},
		{"leader run", []string{"leader", "run", "--key", "l9", "--lease", "3s"}, func(ctx context.Context) error {
			mu, err := fencing.New(coord, "{l9}:leader", "{l9}:fence")
			if err != nil {
				return err
			}
			_, err = mu.Acquire(ctx, time.Minute)
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := make([]byte, 8)
			_, _ = rand.Read(b)
			mark := "COORDCTL_TEST_TREE=" + hex.EncodeToString(b)
			args := append(append(c.args, "--redis", url, "--"), "sh", "-c", `setsid sleep 31 & echo started; sleep 30; true`)
			p := startMarked(t, mark, args...)
			p.waitOutput(t, "started", 10*time.Second)
			// coordctl, sh, sleep 30 and the setsid'd sleep 31 (and the supervisor).
			deadline := time.Now().Add(5 * time.Second)
			for len(markedProcesses(t, mark)) < 4 {
				if time.Now().After(deadline) {
					t.Fatalf("the command's processes were not all found: %v\n%s", markedProcesses(t, mark), p.out.String())
				}
				time.Sleep(10 * time.Millisecond)
			}
			killed := time.Now()
			// SIGKILL: coordctl releases nothing. (Not waiting for p.done:
			// a process left running holds the output pipe open.)
			killProcess(p.cmd.Process)

			gone := make(chan time.Duration, 1)
			go func() {
				for len(markedProcesses(t, mark)) > 0 {
					time.Sleep(time.Millisecond)
				}
				gone <- time.Since(killed)
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := c.second(ctx); err != nil {
				t.Fatal(err)
			}
			tookOver := time.Since(killed)
			if left := markedProcesses(t, mark); len(left) > 0 {
				t.Fatalf("a second holder got in %v after coordctl's SIGKILL while the command's processes %v still ran", tookOver, left)
			}
			took := <-gone
			t.Logf("the command's tree was gone %v after coordctl's SIGKILL; the second holder got in after %v", took, tookOver)
		})
	}
}

// A command that exits leaving a process running (a background job) does
// not leave it behind either: the supervisor stops it (SIGTERM, SIGKILL
// after --grace) before coordctl releases the lock and exits with the
// command's status.
func TestRunCommandLeftoversStoppedBeforeRelease(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid (util-linux) to start a process that leaves the command's group")
	}
	url, raw := leaderServer(t)
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	mark := "COORDCTL_TEST_TREE=" + hex.EncodeToString(b)
	p := startMarked(t, mark, "lock", "run", "--redis", url, "--key", "bg", "--grace", "1s", "--",
		"sh", "-c", `trap '' TERM; sleep 30 & setsid sleep 31 & echo started; exit 4`)
	if code := p.waitExit(t, 10*time.Second); code != 4 {
		t.Fatalf("exit %d, want the command's 4; output:\n%s", code, p.out.String())
	}
	if left := markedProcesses(t, mark); len(left) > 0 {
		t.Fatalf("processes %v of the command outlived coordctl; output:\n%s", left, p.out.String())
	}
	if n := raw.Exists(context.Background(), "{bg}:lock").Val(); n != 0 {
		t.Fatal("the lock was not released")
	}
	out := p.out.String()
	stopped := strings.Index(out, "leaving 2 process(es) running")
	released := strings.Index(out, "lock released")
	if stopped < 0 || released < stopped {
		t.Fatalf("the leftovers were not reported before the release:\n%s", out)
	}
}
