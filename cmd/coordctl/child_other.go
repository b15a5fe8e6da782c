//go:build !unix

package main

import (
	"os"
	"syscall"
)

func procAttr() *syscall.SysProcAttr { return nil }

// terminate kills p: there is no SIGTERM on this system.
func terminate(p *os.Process, _ os.Signal) { _ = p.Kill() }

// kill kills p.
func kill(p *os.Process) { _ = p.Kill() }
