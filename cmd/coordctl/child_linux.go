package main

import "syscall"

// procAttr puts the command in its own process group and has the kernel
// kill it if coordctl dies.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
