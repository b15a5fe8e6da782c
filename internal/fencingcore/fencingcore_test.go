package fencingcore_test

import (
	"strconv"
	"testing"

	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/fencingcore"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

func TestMain(m *testing.M) { testharness.Main(m) }

func eng(t *testing.T) *engine.Engine {
	t.Helper()
	e, err := engine.Of(testharness.Get(t, "miniredis").Coordinator(t))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// NoteFence reports a token that is not above the highest one handed out
// from the same counter, per counter and per coordinator, and remembers a
// bounded number of counters.
func TestNoteFence(t *testing.T) {
	e, other := eng(t), eng(t)
	for _, c := range []struct {
		key   string
		token int64
		back  bool
	}{
		{"a", 1, false}, {"a", 2, false}, {"b", 1, false}, {"a", 5, false},
		{"a", 5, true}, {"a", 1, true}, {"b", 2, false}, {"a", 6, false},
	} {
		if got := fencingcore.NoteFence(e, c.key, c.token); got != c.back {
			t.Errorf("NoteFence(%s, %d) = %v, want %v", c.key, c.token, got, c.back)
		}
	}
	// Another coordinator has seen none of these tokens.
	if fencingcore.NoteFence(other, "a", 1) {
		t.Error("a second coordinator shares the first one's watch")
	}
	for i := range fencingcore.MaxWatchedCounters + 10 {
		fencingcore.NoteFence(e, "k"+strconv.Itoa(i), 10)
	}
	forgotten := 0
	for i := range fencingcore.MaxWatchedCounters + 10 {
		if !fencingcore.NoteFence(e, "k"+strconv.Itoa(i), 10) {
			forgotten++
		}
	}
	if forgotten < 10 || forgotten > fencingcore.MaxWatchedCounters {
		t.Errorf("%d of %d counters forgotten, want at least the 10 past the bound", forgotten, fencingcore.MaxWatchedCounters+10)
	}
}
