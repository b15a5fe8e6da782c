package main

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER (linux/prctl.h).
const prSetChildSubreaper = 36

// becomeSubreaper makes the supervisor the reaper of its orphaned
// descendants, so that a process that left the command's process group
// stays in reach.
func becomeSubreaper() {
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
}

// commandAttr puts the command in a process group of its own and has the
// kernel kill it if the supervisor dies.
func commandAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

type procInfo struct{ pid, pgid int }

// descendants returns the live (not zombie) descendants of this process,
// read from /proc.
func descendants() []procInfo {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	type stat struct {
		ppid, pgid int
		zombie     bool
	}
	all := map[int]stat{}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 > len(b) {
			continue
		}
		f := strings.Fields(string(b[i+2:]))
		if len(f) < 3 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		pgid, _ := strconv.Atoi(f[2])
		all[pid] = stat{ppid, pgid, f[0] == "Z"}
		children[ppid] = append(children[ppid], pid)
	}
	var out []procInfo
	queue := []int{os.Getpid()}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			queue = append(queue, c)
			if s := all[c]; !s.zombie {
				out = append(out, procInfo{c, s.pgid})
			}
		}
	}
	return out
}

// countDescendants counts the live descendants.
func countDescendants() (int, bool) { return len(descendants()), true }
