package leader_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordination/internal/fencingcore"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/leader"
)

// A campaign whose winning reply is slow starts its term with little of
// the lease left. The term's keep-alive renews at once (its first renewal
// is due half a lease after the campaign's request was sent), instead of
// half a lease after the election, past the local deadline: the term is
// not lost while the server still holds its lease, and no second term
// (with the next fencing token) follows.
func TestSlowElectionReplyKeepsTheTerm(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		const lease = 4 * time.Second // renewed every 2 s
		faults := &testharness.ScriptFaults{}
		// The winning reply comes 2.6 s after the server set the lease's
		// TTL, leaving about 1.3 s: less than the renewal period.
		faults.Add(testharness.Fault{SHA: fencingcore.Acquire.Hash(), After: 2600 * time.Millisecond})
		coord := coordWith(t, b, []redis.Hook{faults})
		j := newJournal()
		started := time.Now()
		c := startContender(t, coord, "a", j, leader.WithLeaseDuration(lease), leader.WithRetryDelay(50*time.Millisecond))
		r := j.next(t, 10*time.Second)
		// The reply was slow: the term began 2.6 s or more into its lease.
		// What is left of it by now depends on whether the renewal, sent
		// at once, has already come back (a loaded machine may run this
		// line late): about 1.3 s before, about 4 s after.
		if took := r.start.Sub(started); took < 2600*time.Millisecond {
			t.Fatalf("the term began %v after the campaign, want at least the reply's delay, 2.6 s", took)
		}
		t.Logf("the term's lease had %v left when read", r.term.Remaining())
		waitFor(t, 2*time.Second, "the term's first renewal", func() bool { return r.term.Remaining() > 3*time.Second })
		select {
		case <-r.term.Context().Done():
			t.Fatalf("the term ended while its keep-alive ran: %v", context.Cause(r.term.Context()))
		case <-time.After(3 * lease):
		}
		if cur := c.e.Current(); cur != r.term || cur.FencingToken() != 1 {
			t.Fatalf("Current() = %+v, want the first term (token 1)", cur)
		}
		if n := len(j.snapshot()); n != 1 {
			t.Fatalf("%d terms, want 1", n)
		}
		info := must(c.e.Leader(context.Background()))(t)
		if info.Identity != "a" || info.FencingToken != 1 || info.TTL < lease/4 {
			t.Fatalf("Leader() = %+v, want a with token 1 and a TTL of at least a quarter lease", info)
		}
		must(0, c.stop(t))(t)
		j.check(t)
	})
}
