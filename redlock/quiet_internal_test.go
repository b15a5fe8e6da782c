package redlock

import (
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
	w.quiet(150 * time.Millisecond)
	if len(w.wake) != 0 {
		t.Fatal("quiet kept the wake-up pending from before it began")
	}
	start := time.Now()
	go w.notify()
	select {
	case <-w.wake:
		if took := time.Since(start); took < 140*time.Millisecond {
			t.Fatalf("a notification during the quiet period woke after %v, before it ended", took)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a notification held by the quiet period never woke")
	}
	// A notification held by a quiet period that is extended meanwhile
	// waits for the new end.
	w.quiet(50 * time.Millisecond)
	start = time.Now()
	go w.notify()
	time.Sleep(20 * time.Millisecond)
	w.quiet(150 * time.Millisecond)
	select {
	case <-w.wake:
		if took := time.Since(start); took < 160*time.Millisecond {
			t.Fatalf("woke after %v, before the extended quiet period ended", took)
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
