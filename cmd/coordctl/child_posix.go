//go:build unix && !linux

package main

import "syscall"

// procAttr puts the command in its own process group.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
