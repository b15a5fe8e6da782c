package testharness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is one redis-server or valkey-server process on 127.0.0.1.
type Server struct {
	Flavor string
	Port   int
	Addr   string // 127.0.0.1:port
	server string
	cli    string
	dir    string
	args   []string

	aclUser bool // the shared server of ACLFlavor: clients of its backend connect as ACLUser
	shared  bool // a server shared by the test binary: its death is reported (see watchShared)

	mu   sync.Mutex
	cmd  *exec.Cmd
	exit chan struct{}
}

// freePort returns a loopback TCP port that was free a moment ago; when
// withBus is set, port+10000 (the Cluster bus port) was free too.
func freePort(withBus bool) (int, error) {
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		p := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !withBus {
			return p, nil
		}
		if p+10000 > 65535 {
			continue
		}
		if b, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000)); err == nil {
			_ = b.Close()
			return p, nil
		}
	}
	return 0, errors.New("testharness: no free port")
}

// startServer starts a server of flavor with extra arguments, retrying on a
// port clash, and waits until it answers PING.
func startServer(flavor string, withBus bool, extra ...string) (*Server, error) {
	return startProcess(flavor, withBus, func(port int, dir string) ([]string, error) {
		return append([]string{
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", dir, "--logfile", filepath.Join(dir, "server.log"), "--daemonize", "no",
			"--repl-diskless-sync-delay", "0", "--enable-debug-command", "local",
		}, extra...), nil
	})
}

// startProcess starts the server binary of flavor with the arguments args
// returns for a free port and a fresh folder, retrying on a port clash, and
// waits until it answers PING.
func startProcess(flavor string, withBus bool, args func(port int, dir string) ([]string, error)) (*Server, error) {
	server, cli, ok := binaries(flavor)
	if !ok {
		return nil, errMissing{flavor}
	}
	var last error
	for range 5 {
		port, err := freePort(withBus)
		if err != nil {
			return nil, err
		}
		dir, err := os.MkdirTemp("", "coord-"+flavor+"-")
		if err != nil {
			return nil, err
		}
		s := &Server{Flavor: flavor, Port: port, Addr: "127.0.0.1:" + strconv.Itoa(port), server: server, cli: cli, dir: dir}
		if s.args, err = args(port, dir); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		if err := s.start(); err != nil {
			last = err
			_ = os.RemoveAll(dir)
			continue
		}
		return s, nil
	}
	return nil, last
}

type errMissing struct{ flavor string }

// Error says how to get the missing server.
func (e errMissing) Error() string { return howToGet(e.flavor) }

func (s *Server) start() error {
	cmd := exec.Command(s.server, s.args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	exit := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		s.mu.Lock()
		died := s.shared && s.cmd == cmd // not stopped by Stop or Kill
		s.mu.Unlock()
		if died {
			// Every test on it now fails with "connection refused": say
			// why once, with the server's own crash report.
			fmt.Fprintf(deathReports, "testharness: the shared %s server on port %d died while tests ran (%v); the end of its log:\n%s\n",
				s.Flavor, s.Port, cmd.ProcessState, s.logLines(60))
		}
		close(exit)
	}()
	s.mu.Lock()
	s.cmd, s.exit = cmd, exit
	s.mu.Unlock()

	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exit:
			return fmt.Errorf("testharness: %s on port %d exited at start: %s", s.Flavor, s.Port, s.logTail())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		info, err := c.Info(ctx, "server").Result()
		cancel()
		if err == nil {
			// The answer must come from this process: another test's server
			// may own the port (one restarted on it after this one found it
			// free), and this one then exits failing to bind.
			if !strings.Contains(info, "process_id:"+strconv.Itoa(cmd.Process.Pid)+"\r") {
				s.Kill()
				return fmt.Errorf("testharness: %s: port %d answered by another process", s.Flavor, s.Port)
			}
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.Kill()
	return fmt.Errorf("testharness: %s on port %d did not answer PING: %s", s.Flavor, s.Port, s.logTail())
}

func (s *Server) logTail() string {
	return strings.ReplaceAll(s.logLines(5), "\n", " | ")
}

// logLines returns the last n lines of the server's log.
func (s *Server) logLines(n int) string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// deathReports is where a shared server's unexpected death is reported.
var deathReports io.Writer = os.Stderr

// markShared makes the server's unexpected death (not by Stop or Kill)
// print its log's end on stderr: a server shared by every test of the
// binary fails them all at once, and the tests see only refused
// connections.
func (s *Server) markShared() {
	s.mu.Lock()
	s.shared = true
	s.mu.Unlock()
}

// Stop stops the server with SIGTERM (SIGKILL after 5 s) and waits for it
// to exit. The data folder is kept so that Restart works.
func (s *Server) Stop() { s.signal(syscall.SIGTERM) }

// Kill stops the server with SIGKILL and waits for it to exit.
func (s *Server) Kill() { s.signal(syscall.SIGKILL) }

// Pause stops the process with SIGSTOP: it keeps its connections but answers
// nothing until Resume.
func (s *Server) Pause() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(syscall.SIGSTOP)
	}
}

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(syscall.SIGCONT)
	}
}

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	cmd, exit := s.cmd, s.exit
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Signal(sig)
	select {
	case <-exit:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-exit
	}
}

// Restart starts the server again on the same port and folder (after Stop
// or Kill) and waits until it answers PING. Its data is gone (no
// persistence).
func (s *Server) Restart() error {
	var err error
	for range 20 {
		if err = s.start(); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond) // the port may linger briefly
	}
	return err
}

// Running reports whether the process is up.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// close stops the server and removes its folder.
func (s *Server) close() {
	s.Kill()
	_ = os.RemoveAll(s.dir)
}

// Options returns go-redis options for this server. Retries are left at the
// go-redis default (3).
func (s *Server) Options() *redis.Options {
	return &redis.Options{Addr: s.Addr, DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second}
}

// CLI runs the flavor's command-line client against the server and returns
// its output.
func (s *Server) CLI(args ...string) (string, error) {
	out, err := exec.Command(s.cli, append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(s.Port)}, args...)...).CombinedOutput()
	return string(out), err
}
