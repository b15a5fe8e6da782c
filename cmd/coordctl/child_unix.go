//go:build unix

package main

import (
	"os"
	"syscall"
)

// terminate sends sig (SIGTERM when nil) to p's process group (p leads
// it; see procAttr), or to p alone if that fails.
func terminate(p *os.Process, sig os.Signal) {
	s, ok := sig.(syscall.Signal)
	if !ok {
		s = syscall.SIGTERM
	}
	signalGroup(p, s)
}

// kill sends SIGKILL to p's process group, or to p alone if that fails.
func kill(p *os.Process) { signalGroup(p, syscall.SIGKILL) }

func signalGroup(p *os.Process, sig syscall.Signal) {
	if err := syscall.Kill(-p.Pid, sig); err != nil {
		_ = p.Signal(sig)
	}
}
