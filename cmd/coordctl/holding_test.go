package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordkit/coordination"
)

// fakeHeld is a held lease whose loss the test decides: Remaining is left
// until ctx ends, and 0 after (a lease lost at its local deadline).
type fakeHeld struct {
	ctx      context.Context
	left     time.Duration
	released atomic.Int32
}

func (f *fakeHeld) Context() context.Context { return f.ctx }

func (f *fakeHeld) Remaining() time.Duration {
	if f.ctx.Err() != nil {
		return 0
	}
	return f.left
}

func (f *fakeHeld) Release(context.Context) (coordination.ReleaseOutcome, error) {
	f.released.Add(1)
	return coordination.Released, nil
}

// lockedLog collects runHolding's log lines.
type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(&l.b, format+"\n", args...)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A lease that came back already at its end (a waiter's reply delayed by
// a stalled server past the lease's local deadline) is not used: the
// command is never started, the lease is released, and run exits 75.
// Before, the command started and was stopped at once, or (when the
// timers met) ran on for --grace beside the next holder.
func TestRunHoldingDoesNotStartOnAnEndedLease(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	h := &fakeHeld{ctx: ctx}
	marker := filepath.Join(t.TempDir(), "ran")
	var log lockedLog
	var out, errOut bytes.Buffer
	code := runHolding(h, "lock", 3*time.Second, []string{"sh", "-c", "touch " + marker}, nil, 10*time.Second,
		context.Background(), log.logf, &out, &errOut, "lock run")
	if code != exitLost || h.released.Load() != 1 || !strings.Contains(log.String(), "not starting the command") {
		t.Fatalf("exit %d, %d releases, want 75 and 1; log:\n%s", code, h.released.Load(), log.String())
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("the command ran on an ended lease; log:\n%s", log.String())
	}
}
