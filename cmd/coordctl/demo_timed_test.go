package main

import (
	"bytes"
	"slices"
	"testing"
)

// A timed check whose invariant holds late is marked [slow] and listed,
// never failed; one whose invariant breaks fails whatever its timing.
func TestDemoTimedChecks(t *testing.T) {
	var out bytes.Buffer
	d := &demo{out: &out}
	d.timed("in time", true, true, "fast")
	d.timed("late", true, false, "took %d ms", 900)
	d.timed("broken", false, true, "no successor")
	d.timed("broken late", false, false, "no successor")
	want := "  [ok  ] in time: fast\n  [slow] late: took 900 ms\n  [FAIL] broken: no successor\n  [FAIL] broken late: no successor\n"
	if out.String() != want {
		t.Fatalf("output:\n%s\nwant:\n%s", out.String(), want)
	}
	if d.passed != 2 || !slices.Equal(d.late, []string{"late"}) || !slices.Equal(d.failed, []string{"broken", "broken late"}) {
		t.Fatalf("passed %d, late %v, failed %v", d.passed, d.late, d.failed)
	}
}
