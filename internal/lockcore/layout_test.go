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
