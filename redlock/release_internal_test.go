package redlock

import (
	"testing"

	"github.com/coordkit/coordination/internal/decode"
)

// The release outcome of five nodes (quorum 3) by their answers: released
// or not owned when a quorum answered so, already released when neither
// can reach a quorum with the nodes still running, undecided otherwise.
func TestReleaseTally(t *testing.T) {
	const r, a, n = decode.Released, decode.AlreadyReleased, decode.NotOwned
	for _, tc := range []struct {
		answers []decode.Outcome
		pending int
		want    decode.Outcome // 0: undecided
	}{
		{[]decode.Outcome{r, r, r}, 2, r},
		{[]decode.Outcome{r, r, r, a, n}, 0, r},
		{[]decode.Outcome{n, n, n}, 2, n},
		{[]decode.Outcome{n, n, n, r, r}, 0, n},
		{[]decode.Outcome{a, a, a}, 2, a}, // the other two cannot make a quorum of either
		{[]decode.Outcome{a, a, a, a}, 1, a},
		{[]decode.Outcome{r, a, a}, 2, 0}, // two more released answers would make a quorum
		{[]decode.Outcome{r, a, a, a}, 1, a},
		{[]decode.Outcome{r, r, a}, 2, 0},
		{[]decode.Outcome{r, r, a}, 0, a}, // the others failed
		{[]decode.Outcome{r, r, n, n, a}, 0, a},
		{[]decode.Outcome{n, n, a}, 1, 0},
		{[]decode.Outcome{r, r}, 3, 0}, // no quorum confirmed yet
		{[]decode.Outcome{r, r}, 0, 0}, // and it never will
	} {
		var tl tally
		for _, o := range tc.answers {
			tl.add(o)
		}
		got, ok := tl.outcome(3, tc.pending)
		if !ok {
			got = 0
		}
		if got != tc.want || ok != (tc.want != 0) {
			t.Errorf("answers %v with %d pending: %v (decided %v), want %v", tc.answers, tc.pending, got, ok, tc.want)
		}
	}
}
