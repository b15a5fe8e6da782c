package semaphorecore

import (
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordination/internal/layout"
)

// A tombstone (a member scored in (-1, 0)) is no permit: neither used
// nor a holder, listed as abandoned with its time left while in force,
// left out once expired, and no problem.
func TestDecodeTombstones(t *testing.T) {
	const now = 1_700_000_000_000
	tok := "AAAAAAAAAAAAAAAAAAAAAA"
	s := &layout.Snapshot{Key: "sem", Type: "zset", PTTL: 30_000, NowMs: now, ZSet: []layout.Member{
		{Member: "capacity", Score: -3},
		{Member: "P:2:" + tok, Score: -float64(now+30_000) / TombstoneScale},
		{Member: "P:1:expired-stone", Score: -float64(now-1) / TombstoneScale},
		{Member: "P:1:BBBBBBBBBBBBBBBBBBBBBB", Score: now + 10_000},
	}}
	r := layout.Decode(s, []layout.Layout{SemaphoreLayout})
	var fields []string
	for _, f := range r.Fields {
		fields = append(fields, f.K+"="+layout.ValueText(f.V))
	}
	if got, want := strings.Join(fields, ","), "capacity=3,used=1,free=2,holders=1,without expiry=0,notifies on release=false,tombstones=1"; r.Kind != "semaphore" || got != want || r.Problem != "" {
		t.Fatalf("kind %q, fields %q, problem %q; want %q", r.Kind, got, r.Problem, want)
	}
	if len(r.Entries) != 2 {
		t.Fatalf("entries %v, want the tombstone and the permit", r.Entries)
	}
	e := r.Entries[0]
	if e[1].K != "abandoned" || e[1].V != layout.Tok(tok) || e[2].V != 30*time.Second {
		t.Fatalf("tombstone entry %v", e)
	}
}

// A tombstone expiring more than TombstoneMaxMs (two minutes) after the
// server's time is outside the layout, as the scripts say; one at the
// bound is in force.
func TestDecodeTombstoneBound(t *testing.T) {
	const now = 1_700_000_000_000
	for _, c := range []struct {
		until   float64
		problem bool
	}{
		{now + 60_000, false},
		{now + TombstoneMaxMs, false},
		{now + TombstoneMaxMs + 1, true},
		{now + 3_600_000, true},
	} {
		s := &layout.Snapshot{Key: "sem", Type: "zset", PTTL: 3_600_000, NowMs: now, ZSet: []layout.Member{
			{Member: "capacity", Score: -3},
			{Member: "P:1:AAAAAAAAAAAAAAAAAAAAAA", Score: -c.until / TombstoneScale},
		}}
		r := layout.Decode(s, []layout.Layout{SemaphoreLayout})
		if got := strings.Contains(r.Problem, "over two minutes from now"); got != c.problem {
			t.Errorf("tombstone until now+%v: problem %q, want one: %v", c.until-now, r.Problem, c.problem)
		}
	}
}
