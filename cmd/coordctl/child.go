package main

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// child is a command that coordctl runs on someone's behalf (lock run,
// semaphore run, leader run) and must be able to stop: started with extra
// environment variables and stdin from /dev/null, stopped with SIGTERM
// (or the signal coordctl received) and then SIGKILL after a grace period,
// its exit status propagated.
//
// The command and every process it starts must never outlive what
// coordctl holds for it. On Unix the command runs under a supervisor (see
// supervise.go): coordctl itself, re-executed, in coordctl's process group,
// with the command in a process group of its own. The supervisor kills the
// command's whole tree (its process group and, on Linux, every descendant,
// including those that left the group: it is their subreaper) when
// coordctl dies, SIGKILL included (it reads EOF on a pipe the kernel closes
// when coordctl exits, however it exits), and when the command exits
// leaving processes behind (SIGTERM, then SIGKILL after the grace period).
// It exits once the tree is gone, with the command's status.
//
// Its methods are safe for concurrent use.
type child struct {
	done     chan struct{} // closed once the command's tree is gone (or abandoned)
	code     int           // exit status; valid once done is closed
	stopOnce sync.Once
	// signal asks the command's tree to stop with sig (SIGINT, SIGTERM).
	signal func(sig syscall.Signal)
	// killAll kills the command's tree at once (SIGKILL).
	killAll func()
}

// minRunTTL is the shortest lease the run commands accept: on Unix the
// supervisor kills the command's tree within milliseconds of coordctl's
// death (measured: under 200ms on a loaded 2-core machine, see
// TestRunCommandTreeDiesWithCoordctl), and a lease renewed every third of
// its TTL (a leader's every half) has at least half of it left when
// coordctl dies, while its renewals succeed.
const minRunTTL = time.Second

// startError is a command that could not be started: code is the status a
// shell gives it (127 not found, 126 otherwise).
type startError struct {
	code int
	msg  string
}

// Error returns the error's message.
func (e *startError) Error() string { return e.msg }

// startChild starts args[0] with arguments args[1:] and the environment of
// coordctl plus env ("KEY=value" entries, which take precedence), writing
// its output to stdout and stderr. grace is the time between SIGTERM and
// SIGKILL for the processes the command leaves running when it exits;
// logf (may be nil) says what the supervisor did. The error is the start
// error (see [exitStatusFor]).
func startChild(args, env []string, grace time.Duration, stdout, stderr io.Writer, logf func(string, ...any)) (*child, error) {
	if len(args) == 0 {
		return nil, errors.New("no command given")
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return startPlatform(args, env, grace, stdout, stderr, logf)
}

// exitCode returns a shell-style exit status: the command's exit code, or
// 128+N when it was killed by signal N.
func exitCode(ps *os.ProcessState, err error) int {
	if ps == nil {
		if err != nil {
			return 1
		}
		return 0
	}
	if code := ps.ExitCode(); code >= 0 {
		return code
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return 1
}

// exitStatusFor returns the status a shell gives a command that could not
// be started: 127 when it was not found, 126 otherwise.
func exitStatusFor(startErr error) int {
	var se *startError
	if errors.As(startErr, &se) {
		return se.code
	}
	if errors.Is(startErr, exec.ErrNotFound) || errors.Is(startErr, os.ErrNotExist) {
		return 127
	}
	return 126
}

// exited returns a channel that is closed when the command has exited and
// nothing it started is left.
func (c *child) exited() <-chan struct{} { return c.done }

// wait blocks until the command exits and returns its exit status.
func (c *child) wait() int {
	<-c.done
	return c.code
}

// stop asks the command to exit with SIGTERM (sent to its whole tree),
// kills the tree if it is still running after grace, and waits for it; it
// returns the exit status. After the command exited it only returns the
// status. A grace of 0 kills at once.
func (c *child) stop(grace time.Duration) int { return c.stopWith(nil, grace) }

// stopWith is stop with sig (SIGINT or SIGTERM, forwarded from coordctl)
// in place of SIGTERM; a nil sig is SIGTERM.
func (c *child) stopWith(sig os.Signal, grace time.Duration) int {
	c.stopOnce.Do(func() {
		select {
		case <-c.done:
			return
		default:
		}
		if grace > 0 {
			s, ok := sig.(syscall.Signal)
			if !ok {
				s = syscall.SIGTERM
			}
			c.signal(s)
			t := time.NewTimer(grace)
			defer t.Stop()
			select {
			case <-c.done:
				return
			case <-t.C:
			}
		}
		c.killAll()
	})
	return c.wait()
}
