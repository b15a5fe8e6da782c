package engine_test

import (
	"strconv"
	"testing"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// NoteFence reports a token that is not above the highest one handed out
// from the same counter, per counter, and remembers a bounded number of
// counters.
func TestNoteFence(t *testing.T) {
	b := testharness.Get(t, "miniredis")
	e := eng(t, must(coordination.New(b.Client(t)))(t))
	for _, c := range []struct {
		key   string
		token int64
		back  bool
	}{
		{"a", 1, false}, {"a", 2, false}, {"b", 1, false}, {"a", 5, false},
		{"a", 5, true}, {"a", 1, true}, {"b", 2, false}, {"a", 6, false},
	} {
		if got := e.NoteFence(c.key, c.token); got != c.back {
			t.Errorf("NoteFence(%s, %d) = %v, want %v", c.key, c.token, got, c.back)
		}
	}
	for i := range engine.MaxWatchedCounters + 10 {
		e.NoteFence("k"+strconv.Itoa(i), 10)
	}
	forgotten := 0
	for i := range engine.MaxWatchedCounters + 10 {
		if !e.NoteFence("k"+strconv.Itoa(i), 10) {
			forgotten++
		}
	}
	if forgotten < 10 || forgotten > engine.MaxWatchedCounters {
		t.Errorf("%d of %d counters forgotten, want at least the 10 past the bound", forgotten, engine.MaxWatchedCounters+10)
	}
}
