package lockcore

import (
	"testing"

	"github.com/coordkit/coordination/internal/layout"
)

// A waiter queue of owner tokens (a lock's) or of permit ids (a
// semaphore's) is no problem; another member is.
func TestFIFOQueueMembers(t *testing.T) {
	tok := "AAAAAAAAAAAAAAAAAAAAAA"
	for _, c := range []struct {
		member string
		bad    bool
	}{{tok, false}, {"P:2:" + tok, false}, {"P:0:" + tok, true}, {"P:x:" + tok, true}, {"garbage", true}} {
		s := &layout.Snapshot{Key: "k\x00fifo{1}", Type: "zset", PTTL: 3000, ZCard: 1, ZSet: []layout.Member{{Member: c.member, Score: 1}}}
		r := layout.Decode(s, []layout.Layout{FIFOQueueLayout})
		if (r.Problem != "") != c.bad {
			t.Errorf("%q: problem %q, want bad=%v", c.member, r.Problem, c.bad)
		}
	}
}

// The alive times hold waiters' times and lock_fifo_abandon's records of
// abandoned tokens ('!' and the record's end), told apart; a value that is
// neither is a problem.
func TestFIFOAliveRecords(t *testing.T) {
	tok, other := "AAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBB"
	for _, c := range []struct {
		value           string
		bad             bool
		waiters, record int64
	}{{"5000", false, 1, 0}, {"!5000", false, 0, 1}, {"!500", false, 0, 1}, {"!x", true, 0, 1}, {"x", true, 1, 0}} {
		s := &layout.Snapshot{Key: "k\x00fifo-alive{1}", Type: "hash", PTTL: 3000, NowMs: 1000, HashLen: 2,
			Hash: map[string]string{tok: c.value, other: "9000"}}
		r := layout.Decode(s, []layout.Layout{FIFOAliveLayout})
		if (r.Problem != "") != c.bad {
			t.Errorf("%q: problem %q, want bad=%v", c.value, r.Problem, c.bad)
		}
		if !c.bad && len(r.Entries) != 2 {
			t.Errorf("%q: %d entries, want 2", c.value, len(r.Entries))
		}
		got := map[string]any{}
		for _, f := range r.Fields {
			got[f.K] = f.V
		}
		if got["waiters"] != c.waiters+1 { // the other token waits
			t.Errorf("%q: waiters %v, want %d", c.value, got["waiters"], c.waiters+1)
		}
		if rec, ok := got["abandoned acquisitions (not queued)"]; (c.record > 0) != ok || ok && rec != int(c.record) {
			t.Errorf("%q: abandoned records %v (%v), want %d", c.value, rec, ok, c.record)
		}
	}
}
