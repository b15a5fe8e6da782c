package engine

import (
	"fmt"
	"testing"
	"time"
)

func TestFailureLogOncePerDistinctFailure(t *testing.T) {
	var l FailureLog
	t0 := time.Now()
	note := func(key string, at time.Time, wantLog bool, wantRepeats int) {
		t.Helper()
		if log, repeats := l.Note(key, at); log != wantLog || repeats != wantRepeats {
			t.Fatalf("Note(%q, +%v) = %v, %d; want %v, %d", key, at.Sub(t0), log, repeats, wantLog, wantRepeats)
		}
	}
	note("a", t0, true, 0)
	note("a", t0.Add(time.Second), false, 0)
	note("a", t0.Add(2*time.Second), false, 0)
	note("b", t0.Add(2*time.Second), true, 0) // another failure
	// A minute after it was logged, the repeating failure is logged again,
	// with the count of those not logged.
	note("a", t0.Add(failureLogEvery), true, 2)
	note("a", t0.Add(failureLogEvery+time.Second), false, 0)
	// Past the bound on distinct failures, new ones are still logged.
	for i := range 2 * failureLogDistinct {
		note(fmt.Sprint("k", i), t0.Add(failureLogEvery), true, 0)
	}
	if n := l.remembered(); n > failureLogDistinct {
		t.Fatalf("%d failures remembered, want at most %d", n, failureLogDistinct)
	}
}
