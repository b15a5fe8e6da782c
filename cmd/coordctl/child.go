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
// leader run) and must be able to stop: started with extra environment
// variables, stopped with SIGTERM and then SIGKILL after a grace period,
// its exit status propagated. The command runs in its own process group,
// so that stop reaches whatever it started, and with stdin from /dev/null;
// on Linux it is killed (SIGKILL) if coordctl itself dies, so that it never
// outlives the lease it was started under.
//
// Its methods are safe for concurrent use.
type child struct {
	cmd      *exec.Cmd
	done     chan struct{} // closed once the process has exited and been reaped
	code     int           // exit status; valid once done is closed
	stopOnce sync.Once
}

// startChild starts args[0] with arguments args[1:] and the environment of
// coordctl plus env ("KEY=value" entries, which take precedence), writing
// its output to stdout and stderr. The error is the start error (wrapping
// exec.ErrNotFound when the command is not found); see [exitStatusFor].
func startChild(args, env []string, stdout, stderr io.Writer) (*child, error) {
	if len(args) == 0 {
		return nil, errors.New("no command given")
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = unwrap(stdout), unwrap(stderr)
	cmd.SysProcAttr = procAttr()
	// A grandchild holding the output pipes open must not block wait
	// forever once the command itself has exited.
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		c.code = exitCode(cmd.ProcessState, err)
		close(c.done)
	}()
	return c, nil
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
	if errors.Is(startErr, exec.ErrNotFound) || errors.Is(startErr, os.ErrNotExist) {
		return 127
	}
	return 126
}

// exited returns a channel that is closed when the command has exited.
func (c *child) exited() <-chan struct{} { return c.done }

// wait blocks until the command exits and returns its exit status.
func (c *child) wait() int {
	<-c.done
	return c.code
}

// stop asks the command to exit with SIGTERM (sent to its process group),
// sends SIGKILL to the group if it is still running after grace, and waits
// for it; it returns the exit status. After the command exited it only
// returns the status. A grace of 0 sends SIGKILL at once.
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
			terminate(c.cmd.Process, sig)
			t := time.NewTimer(grace)
			defer t.Stop()
			select {
			case <-c.done:
				return
			case <-t.C:
			}
		}
		kill(c.cmd.Process)
	})
	return c.wait()
}
