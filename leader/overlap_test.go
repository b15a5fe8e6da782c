package leader_test

import (
	"context"
	"errors"
	"sort"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/leader"
)

// Five contenders on a real server through 200 forced leader changes,
// cycling three ways to force one: the leader resigns; its lease is
// deleted behind its back (a takeover it only notices at its next renewal,
// so two terms believe they lead for a while); its process stops. Terms'
// fencing tokens strictly increase in election order, no two terms that
// believed they led at the same instant share a token, every term's
// OnRevoked ran once, and one elector's terms never overlap.
func TestFiveContendersTwoHundredChanges(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		const (
			contenders = 5
			changes    = 200
			lease      = 200 * time.Millisecond
			retry      = 20 * time.Millisecond
		)
		j := newJournal()
		opts := []leader.Option{leader.WithLeaseDuration(lease), leader.WithRetryDelay(retry)}
		ids := []string{"c0", "c1", "c2", "c3", "c4"}
		cs := map[string]*contender{}
		for _, id := range ids[:contenders] {
			cs[id] = startContender(t, b.Coordinator(t), id, j, opts...)
		}
		raw := b.Raw(t)
		start := time.Now()
		prev := j.next(t, 5*time.Second)
		var kinds [3]int
		takenOver := map[int64]bool{}
		for i := range changes {
			kind := i % 3
			kinds[kind]++
			switch kind {
			case 0:
				select {
				case cs[prev.id].resign <- struct{}{}:
				default:
				}
			case 1:
				takenOver[prev.token] = true
				if err := raw.Del(context.Background(), b.Key(leaseKey)).Err(); err != nil {
					t.Fatal(err)
				}
			case 2:
				cs[prev.id].cancel()
				cs[prev.id] = startContender(t, b.Coordinator(t), prev.id, j, opts...)
			}
			prev = j.next(t, 5*time.Second)
		}
		elapsed := time.Since(start)
		for _, c := range cs {
			if err := c.stop(t); err != nil {
				t.Errorf("%s: Run = %v", c.id, err)
			}
		}
		waitFor(t, 5*time.Second, "every OnRevoked", func() bool {
			for _, r := range j.snapshot() {
				if r.revokes == 0 || r.believed.IsZero() {
					return false
				}
			}
			return true
		})
		j.check(t)

		terms := j.snapshot()
		if len(terms) < changes+1 {
			t.Fatalf("%d terms for %d changes", len(terms), changes)
		}
		sort.Slice(terms, func(a, b int) bool { return terms[a].start.Before(terms[b].start) })
		seen := map[int64]bool{}
		pairs, lostFirst, maxOverlap := 0, 0, time.Duration(0)
		for i, a := range terms {
			if seen[a.token] {
				t.Errorf("token %d was handed to two terms", a.token)
			}
			seen[a.token] = true
			for _, c := range terms[i+1:] {
				if !c.start.Before(a.believed) {
					continue
				}
				// a and c believed they led at the same instant.
				pairs++
				if errors.Is(a.cause, coordination.ErrLost) {
					lostFirst++
				}
				end := a.believed
				if c.believed.Before(end) {
					end = c.believed
				}
				maxOverlap = max(maxOverlap, end.Sub(c.start))
				if a.token == c.token || c.token <= a.token {
					t.Errorf("overlapping terms with tokens %d (%s) and %d (%s)", a.token, a.id, c.token, c.id)
				}
				// Only a term whose lease was taken away overlaps a later
				// one: resigned and stopped leaders release after their
				// term ended.
				if !takenOver[a.token] {
					t.Errorf("term %d (ended by %v) overlaps term %d but its lease was not taken away", a.token, a.cause, c.token)
				}
			}
		}
		t.Logf("%d contenders, %d forced changes (%d resign, %d takeover, %d stop) in %v (%v per change); "+
			"tokens %d..%d; %d pairs of terms believed they led at once (each after a takeover; %d ended by noticing the loss, the rest stopped at the end), longest overlap %v",
			contenders, changes, kinds[0], kinds[1], kinds[2], elapsed.Round(time.Millisecond), (elapsed / changes).Round(time.Millisecond),
			terms[0].token, terms[len(terms)-1].token, pairs, lostFirst, maxOverlap.Round(time.Millisecond))
		// A superseded leader believes it leads until its next renewal,
		// never past its local deadline.
		if maxOverlap > lease {
			t.Errorf("a superseded term lasted %v after its successor began, more than the lease", maxOverlap)
		}
	}, testharness.RealOnly())
}
