//go:build unix && !linux

package main

import "syscall"

// becomeSubreaper does nothing here: only Linux has
// PR_SET_CHILD_SUBREAPER (a process that leaves the command's process
// group is not followed).
func becomeSubreaper() {}

// commandAttr puts the command in a process group of its own.
func commandAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

type procInfo struct{ pid, pgid int }

// descendants is not known here (no /proc): the process group stands for
// the tree.
func descendants() []procInfo { return nil }

// countDescendants is not known here.
func countDescendants() (int, bool) { return 0, false }
