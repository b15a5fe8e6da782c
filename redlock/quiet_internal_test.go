package redlock

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// A wake-up pending when a quiet period begins (a release heard during
// the split round, such as the other contender's release of its part) is
// dropped: it would end the desynchronising delay at once, and contenders
// that retry together split again, round after round. A notification
// during the quiet period is held until it ends, then wakes.
func TestQuietDropsPendingWake(t *testing.T) {
	w := newWatches()
	defer w.close()
	if !w.notify() {
		t.Fatal("notify on open watches reported closed")
	}
	if len(w.wake) != 1 {
		t.Fatal("a notification outside a quiet period did not wake at once")
	}
	// start is taken before the quiet period begins, so the period ends at
	// least 150ms after it however late quiet runs: a wake-up before that
	// broke the hold.
	start := time.Now()
	w.quiet(150 * time.Millisecond)
	if len(w.wake) != 0 {
		t.Fatal("quiet kept the wake-up pending from before it began")
	}
	go w.notify()
	select {
	case <-w.wake:
		if took := time.Since(start); took < 150*time.Millisecond {
			t.Fatalf("a notification during the quiet period woke after %v, before it ended", took)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a notification held by the quiet period never woke")
	}

	// A notification held by a quiet period that is extended meanwhile
	// waits for the new end. notify is seen waiting out the first period
	// (so it checked it and holds), then the period is extended under
	// quietMu (what quiet does, minus the drain: nothing is pending) once
	// checked to be still running at that instant, so the extension
	// provably lands while the first period holds the notification, and
	// notify's re-check at the first end finds the new one.
	w.quiet(200 * time.Millisecond)
	go w.notify()
	waitNotifyHeld(t)
	w.quietMu.Lock()
	first := w.deaf
	extended := time.Now().Before(first)
	pending := len(w.wake)
	end := first // the earliest instant the notification may wake
	if extended {
		end = time.Now().Add(400 * time.Millisecond) // past first: an extension
		w.deaf = end
	}
	w.quietMu.Unlock()
	if extended && pending != 0 {
		t.Fatal("a notification woke during the quiet period")
	}
	if !extended {
		// This goroutine was descheduled past the first period's end
		// between seeing notify wait and extending: notify was free to
		// wake at that end, and only that is checked.
		t.Logf("the first quiet period ended before it could be extended; checking only its hold")
	}
	select {
	case <-w.wake:
		if early := end.Sub(time.Now()); early > 0 {
			t.Fatalf("woke %v before the extended quiet period ended (extended: %v)", early, extended)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a held notification never woke")
	}

	w.quiet(time.Hour)
	done := make(chan bool)
	go func() { done <- w.notify() }()
	w.close()
	if <-done {
		t.Fatal("notify held by a quiet period reported a wake-up after close")
	}
}

// waitNotifyHeld waits until a notify started by TestQuietDropsPendingWake
// waits out a quiet period: its goroutine is blocked in notify's select
// (on the hold's timer), which it reaches only after checking the quiet
// period and finding it running.
func waitNotifyHeld(t *testing.T) {
	t.Helper()
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := runtime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			header, _, _ := strings.Cut(g, "\n")
			if strings.Contains(header, "[select") && strings.Contains(g, "redlock.(*watches).notify(") &&
				strings.Contains(g, "created by github.com/coordkit/coordination/redlock.TestQuietDropsPendingWake") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("notify never waited out the quiet period; goroutines:\n%s", buf[:n])
		}
		time.Sleep(time.Millisecond)
	}
}
