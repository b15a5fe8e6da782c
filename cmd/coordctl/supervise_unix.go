//go:build unix

package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The supervisor: coordctl re-executed with superviseEnv set (its value is
// the grace period), between coordctl and the command it runs. It stays in
// coordctl's process group and puts the command in a process group of its
// own. It reads coordctl's orders on fd 3 (a pipe: one byte per signal to
// forward; EOF: kill the command's tree now) and reports on fd 4 (lines:
// "started PID", "error CODE MESSAGE", "exited CODE LEFT"). The kernel
// closes coordctl's end of the pipe when coordctl exits, however it exits
// (SIGKILL included), so the command's tree is killed within a few
// milliseconds of coordctl's death: long before the lease it ran under can
// expire (the lease is renewed every third of its TTL, and the run
// commands refuse a TTL under minRunTTL).
//
// On Linux the supervisor is the subreaper of the command's tree
// (PR_SET_CHILD_SUBREAPER): a process that leaves the command's process
// group (setsid, a daemon's double fork) is still its descendant, found
// and killed; the command itself gets SIGKILL if the supervisor dies
// (Pdeathsig). On other Unix systems only the command's process group is
// killed: a process that left it is not followed.

// superviseEnv marks a supervisor process; its value is the grace period.
const superviseEnv = "COORDCTL_INTERNAL_SUPERVISE"

func init() {
	if g, ok := os.LookupEnv(superviseEnv); ok {
		// syscall.Exit: nothing to flush, and a race-enabled test binary
		// acting as the supervisor does not sleep at exit.
		syscall.Exit(supervise(g))
	}
}

// selfPath is the executable to re-execute as the supervisor: the very
// file coordctl runs from on Linux (even when it was replaced on disk).
func selfPath() (string, error) {
	if runtime.GOOS == "linux" {
		return "/proc/self/exe", nil
	}
	return os.Executable()
}

// signal bytes on the control pipe.
var sigBytes = map[syscall.Signal]byte{syscall.SIGINT: 'I', syscall.SIGTERM: 'T', syscall.SIGHUP: 'H', syscall.SIGQUIT: 'Q'}

func sigOfByte(b byte) syscall.Signal {
	for s, c := range sigBytes {
		if c == b {
			return s
		}
	}
	return syscall.SIGTERM
}

// startPlatform starts the command under a supervisor (see above).
func startPlatform(args, env []string, grace time.Duration, stdout, stderr io.Writer, logf func(string, ...any)) (*child, error) {
	self, err := selfPath()
	if err != nil {
		return nil, &startError{code: 126, msg: "cannot find coordctl's own executable to supervise the command: " + err.Error()}
	}
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return nil, &startError{code: 126, msg: err.Error()}
	}
	stR, stW, err := os.Pipe()
	if err != nil {
		_ = ctlR.Close()
		_ = ctlW.Close()
		return nil, &startError{code: 126, msg: err.Error()}
	}
	cmd := &exec.Cmd{Path: self, Args: append([]string{"coordctl-supervisor", "--"}, args...)}
	cmd.Env = append(append(os.Environ(), env...), superviseEnv+"="+grace.String())
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.ExtraFiles = []*os.File{ctlR, stW}
	// A process holding the output pipes open must not block wait forever
	// (the supervisor kills the tree before it exits; this is a bound).
	cmd.WaitDelay = 2 * time.Second
	err = cmd.Start()
	_ = ctlR.Close()
	_ = stW.Close()
	if err != nil {
		_ = ctlW.Close()
		_ = stR.Close()
		return nil, &startError{code: 126, msg: "cannot start the supervisor: " + err.Error()}
	}
	br := bufio.NewReader(stR)
	line, _ := br.ReadString('\n')
	verb, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
	pid, perr := strconv.Atoi(rest)
	if verb != "started" || perr != nil || pid <= 0 {
		_ = ctlW.Close()
		_ = cmd.Wait()
		_ = stR.Close()
		if verb == "error" {
			codeText, msg, _ := strings.Cut(rest, " ")
			code, err := strconv.Atoi(codeText)
			if err != nil {
				code = 126
			}
			return nil, &startError{code: code, msg: msg}
		}
		return nil, &startError{code: 126, msg: fmt.Sprintf("the supervisor did not start the command (%s)", cmd.ProcessState)}
	}
	c := &child{done: make(chan struct{})}
	var (
		mu     sync.Mutex
		closed bool
	)
	c.signal = func(sig syscall.Signal) {
		mu.Lock()
		defer mu.Unlock()
		if b, ok := sigBytes[sig]; ok && !closed {
			_, _ = ctlW.Write([]byte{b})
		}
	}
	c.killAll = func() {
		mu.Lock()
		defer mu.Unlock()
		if !closed {
			closed = true
			_ = ctlW.Close()
		}
	}
	reports := make(chan struct{})
	go func() {
		defer close(reports)
		for {
			line, err := br.ReadString('\n')
			if verb, rest, _ := strings.Cut(strings.TrimSpace(line), " "); verb == "exited" {
				code, left, _ := strings.Cut(rest, " ")
				switch left {
				case "0", "":
				case "-1":
					logf("the command exited with status %s, leaving processes in its process group; stopping them (SIGTERM, SIGKILL after %v)", code, grace)
				default:
					logf("the command exited with status %s, leaving %s process(es) running; stopping them (SIGTERM, SIGKILL after %v)", code, left, grace)
				}
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		err := cmd.Wait()
		c.code = exitCode(cmd.ProcessState, err)
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			// The supervisor was killed (not by coordctl): its command died
			// with it on Linux (Pdeathsig); kill what is left of its group.
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			logf("the command's supervisor was killed (%v); killed the command's process group", ws.Signal())
		}
		c.killAll()
		<-reports
		_ = stR.Close()
		close(c.done)
	}()
	return c, nil
}

// supervise is the supervisor's main; it returns the command's exit status.
func supervise(graceText string) int {
	// The command's Pdeathsig follows the thread that started it: the
	// main goroutine keeps this thread until the supervisor exits.
	runtime.LockOSThread()
	grace, _ := time.ParseDuration(graceText)
	// fds 3 and 4 must not reach the command: were it to inherit the
	// status pipe, coordctl would wait for the command's tree to close it.
	syscall.CloseOnExec(3)
	syscall.CloseOnExec(4)
	ctl := os.NewFile(3, "coordctl-control")
	status := os.NewFile(4, "coordctl-status")
	// Signals to coordctl's process group (a terminal's ^C) reach the
	// supervisor too: coordctl decides, and forwards them.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	go func() {
		for range sigs {
		}
	}()
	becomeSubreaper()
	args := os.Args[2:] // after "--"
	if len(args) == 0 {
		fmt.Fprintf(status, "error 126 no command\n")
		return 126
	}
	env := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, superviseEnv+"=") {
			env = append(env, kv)
		}
	}
	path, err := exec.LookPath(args[0])
	if err != nil {
		code := exitStatusFor(err)
		fmt.Fprintf(status, "error %d %s\n", code, oneLine(err.Error()))
		return code
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		fmt.Fprintf(status, "error 126 %s\n", oneLine(err.Error()))
		return 126
	}
	pid, err := syscall.ForkExec(path, args, &syscall.ProcAttr{
		Env: env, Files: []uintptr{devnull.Fd(), 1, 2}, Sys: commandAttr(),
	})
	_ = devnull.Close()
	if err != nil {
		code := 126
		if errors.Is(err, syscall.ENOENT) {
			code = 127
		}
		fmt.Fprintf(status, "error %d %s: %s\n", code, oneLine(args[0]), oneLine(err.Error()))
		return code
	}
	fmt.Fprintf(status, "started %d\n", pid)

	type reaped struct {
		pid int
		ws  syscall.WaitStatus
	}
	reapedCh := make(chan reaped, 16)
	noChildren := make(chan struct{})
	go func() {
		for {
			var ws syscall.WaitStatus
			p, err := syscall.Wait4(-1, &ws, 0, nil)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if err != nil { // ECHILD: nothing of the tree is left (on Linux)
				close(noChildren)
				return
			}
			reapedCh <- reaped{p, ws}
		}
	}()
	ctlCh := make(chan byte, 8)
	go func() {
		b := make([]byte, 1)
		for {
			n, err := ctl.Read(b)
			if n == 1 {
				ctlCh <- b[0]
			}
			if err != nil {
				close(ctlCh)
				return
			}
		}
	}()

	code := 1
	var (
		done, childrenGone, killing bool
		graceC                      <-chan time.Time
		tick                        <-chan time.Time
		giveUp                      <-chan time.Time
	)
	startTicking := func() {
		if tick == nil {
			tick = time.NewTicker(5 * time.Millisecond).C
		}
	}
	for {
		select {
		case r := <-reapedCh:
			if r.pid != pid {
				break
			}
			done = true
			code = statusOf(r.ws)
			left := leftovers(pid)
			fmt.Fprintf(status, "exited %d %d\n", code, left)
			startTicking()
			if left != 0 && !killing {
				signalTree(pid, syscall.SIGTERM)
				if grace > 0 {
					graceC = time.After(grace)
				} else {
					killing = true
				}
			}
		case b, ok := <-ctlCh:
			if !ok {
				ctlCh = nil
				killing = true
				break
			}
			if !killing {
				signalTree(pid, sigOfByte(b))
			}
		case <-graceC:
			graceC = nil
			killing = true
		case <-noChildren:
			noChildren = nil
			childrenGone = true
			startTicking()
		case <-tick:
		case <-giveUp:
			// Processes that do not die of SIGKILL (stuck in the kernel):
			// nothing more can be done.
			return code
		}
		if killing {
			if giveUp == nil {
				giveUp = time.After(10 * time.Second)
			}
			signalTree(pid, syscall.SIGKILL)
			startTicking()
		}
		if done && childrenGone && !groupAlive(pid) {
			return code
		}
	}
}

// signalTree sends sig to the command's process group and, on Linux, to
// every other descendant of the supervisor (those that left the group).
func signalTree(pgid int, sig syscall.Signal) {
	_ = syscall.Kill(-pgid, sig)
	for _, p := range descendants() {
		if p.pgid != pgid {
			_ = syscall.Kill(p.pid, sig)
		}
	}
}

// groupAlive reports whether a process of group pgid is left.
func groupAlive(pgid int) bool {
	return !errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
}

// leftovers counts the processes the command left running when it exited
// (-1: some, the number unknown).
func leftovers(pgid int) int {
	if n, ok := countDescendants(); ok {
		return n
	}
	if groupAlive(pgid) {
		return -1
	}
	return 0
}

// statusOf is a shell-style exit status.
func statusOf(ws syscall.WaitStatus) int {
	switch {
	case ws.Exited():
		return ws.ExitStatus()
	case ws.Signaled():
		return 128 + int(ws.Signal())
	}
	return 1
}

func oneLine(s string) string { return strings.NewReplacer("\n", " ", "\r", " ").Replace(s) }

// procAttr is the process attributes of a coordctl process that a test
// starts: a process group of its own, and on Linux SIGKILL when the test
// binary dies.
func procAttr() *syscall.SysProcAttr {
	a := commandAttr()
	return a
}

// killProcess sends SIGKILL to p alone.
func killProcess(p *os.Process) { _ = p.Signal(syscall.SIGKILL) }
