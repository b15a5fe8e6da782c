//go:build !unix

package main

import (
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// startPlatform starts the command directly: on this system there is no
// supervisor, so the command (and what it started) is not killed when
// coordctl dies; see the README's coordctl section.
func startPlatform(args, env []string, _ time.Duration, stdout, stderr io.Writer, _ func(string, ...any)) (*child, error) {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, &startError{code: exitStatusFor(err), msg: err.Error()}
	}
	c := &child{
		done:    make(chan struct{}),
		signal:  func(syscall.Signal) { _ = cmd.Process.Kill() }, // no SIGTERM here
		killAll: func() { _ = cmd.Process.Kill() },
	}
	go func() {
		err := cmd.Wait()
		c.code = exitCode(cmd.ProcessState, err)
		close(c.done)
	}()
	return c, nil
}

// procAttr is the process attributes of a process that coordctl's tests
// start.
func procAttr() *syscall.SysProcAttr { return nil }

// killProcess kills p.
func killProcess(p *os.Process) { _ = p.Kill() }
