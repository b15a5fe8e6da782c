package main

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/lock"
)

// A first-in first-out lock's two queue keys decode as its waiter queue
// and its waiters' times, not as field leases or an unknown sorted set.
func TestInspectFIFOQueueKeys(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord := b.Coordinator(t)
		m, err := lock.New(coord, "fq", lock.WithFIFO(true))
		if err != nil {
			t.Fatal(err)
		}
		held, err := m.TryAcquire(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		waited := make(chan error, 1)
		go func() {
			_, err := m.Acquire(wctx, time.Minute)
			waited <- err
		}()
		var out string
		deadline := time.Now().Add(5 * time.Second)
		for {
			code, o, errOut := runCmd(t, cmdline(b, "inspect", "--scan", "fq*")...)
			if code != exitOK {
				t.Fatalf("inspect --scan = %d %s", code, errOut)
			}
			out = o
			if strings.Contains(out, "FIFO waiter queue") && strings.Contains(out, "FIFO waiter times") || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if !strings.Contains(out, "FIFO waiter queue") || !strings.Contains(out, "FIFO waiter times") || strings.Contains(out, "CORRUPT") || strings.Contains(out, "field leases") {
			t.Fatalf("inspect --scan of a FIFO lock with a waiter:\n%s", out)
		}
		// Each queue key can be inspected by the name --scan shows: Go-quoted
		// (it holds a NUL byte), without the prefix.
		for _, line := range strings.Split(out, "\n") {
			if !strings.Contains(line, "FIFO waiter") {
				continue
			}
			i := strings.Index(line, `"`)
			full, err := strconv.Unquote(strings.TrimSpace(line[i:]))
			if i < 0 || err != nil {
				t.Fatalf("no quoted key in %q: %v", line, err)
			}
			name := strconv.Quote(strings.TrimPrefix(full, b.Prefix()))
			code, o, errOut := runCmd(t, cmdline(b, "inspect", name)...)
			if code != exitOK || !strings.Contains(o, "FIFO waiter") {
				t.Fatalf("inspect %s = %d\n%s%s", name, code, o, errOut)
			}
		}
		cancel()
		if err := <-waited; !errors.Is(err, coordination.ErrNotAcquired) {
			t.Fatalf("the canceled waiter: %v", err)
		}
		if _, err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
