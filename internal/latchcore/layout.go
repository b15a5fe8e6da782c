// The stored layout of package latch, for coordctl inspect and repair
// (package layout): a latch is a hash {id, gen, count, initial, deadline}
// (deadline in server ms, 0 for none) and an "s:<signal id>" field per
// accepted count-down of the generation.

package latchcore

import (
	"strconv"
	"strings"
	"time"

	"github.com/coordkit/coordination/internal/layout"
)

// LatchLayout is a latch's hash: its generation, count, initial count,
// count-downs, state (open, complete or broken) and time to its deadline.
// A broken latch gets the repair command that replaces or deletes it.
var LatchLayout = layout.Layout{
	Kind:   "latch",
	Type:   "hash",
	Match:  func(s *layout.Snapshot) bool { return s.Has("id", "gen") },
	Decode: decode,
}

func decode(s *layout.Snapshot, r *layout.Report) {
	h := s.Hash
	geti := func(k string) (int64, bool) {
		n, err := strconv.ParseInt(h[k], 10, 64)
		return n, err == nil
	}
	gen, ok1 := geti("gen")
	count, ok2 := geti("count")
	initial, ok3 := geti("initial")
	deadline, ok4 := geti("deadline")
	if !ok1 || !ok2 || !ok3 || !ok4 {
		r.Bad("a latch hash with a missing or non-numeric gen, count, initial or deadline")
		return
	}
	downs := 0
	for k := range h {
		if strings.HasPrefix(k, "s:") {
			downs++
		}
	}
	r.Add("generation", gen)
	r.Add("count", count)
	r.Add("initial", initial)
	r.Add("count-downs", downs)
	state := "open"
	switch {
	case count == 0:
		state = "complete"
	case deadline > 0 && deadline <= s.NowMs:
		state = "broken (deadline passed)"
	}
	r.Add("state", state)
	if deadline > 0 {
		r.Add("deadline in", time.Duration(deadline-s.NowMs)*time.Millisecond)
	} else {
		r.Add("deadline in", layout.None)
	}
	if strings.HasPrefix(state, "broken") {
		r.Add("repair", "coordctl repair latch --key KEY --reset N | --delete")
	}
	if count < 0 || count > initial {
		r.Bad("count %d is outside 0..initial (%d)", count, initial)
	}
}
