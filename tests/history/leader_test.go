package history

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/leader"
)

// term is one OnElected call seen in a leader history.
type term struct {
	elector    int
	token      int64
	start, end time.Time
}

// TestLeaderHistories runs, on every real backend, histories of three
// electors campaigning for one election with a short lease (150 ms), each
// resigning after leading 30-230 ms (so terms change hands often),
// behind fault proxies (lost, replaced and delayed replies, cut
// connections, CLIENT KILL: the rig's faults), and checks what every
// leader election must keep: each fencing token is given to one term only
// (at most one leader per term), and terms started later carry larger
// tokens (fencing monotonic). Overlaps of a term's end, as its OnElected
// saw it, with the next term's start are reported, not failed: they
// measure timer and scheduling lag on the machine, which fencing tokens
// exist to make harmless. COORD_HISTORIES/4 (10 by default) histories per
// backend, each 1.2 s.
func TestLeaderHistories(t *testing.T) {
	if only := os.Getenv("COORD_HISTORY_ONLY"); only != "" && only != "leader" {
		t.Skip("COORD_HISTORY_ONLY names another workload")
	}
	n := max(envInt(t, "COORD_HISTORIES", 40)/4, 1)
	for _, name := range testharness.BackendNames() {
		if name == "miniredis" {
			continue // histories need real servers (TTLs, faults)
		}
		t.Run(name, func(t *testing.T) {
			b := testharness.Get(t, name)
			r := newRig(t, b, "leader")
			seed := uint64(time.Now().UnixNano())
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewPCG(seed, 7))
			var terms, faults, overlaps int
			for i := range n {
				ts, fired := leaderHistory(t, r, fmt.Sprintf("{lh%d}", i), rng)
				terms += len(ts)
				faults += fired
				overlaps += checkTerms(t, i, ts)
			}
			if terms < n {
				t.Errorf("%d terms in %d histories: the electors hardly ever led", terms, n)
			}
			t.Logf("leader on %s: %d histories, %d terms, %d faults, %d ends after the next start (lag)", name, n, terms, faults, overlaps)
		})
	}
}

// leaderHistory runs three electors on key for 1.2 s under the rig's
// faults and returns the terms they saw and the faults that fired.
func leaderHistory(t *testing.T, r *rig, key string, rng *rand.Rand) ([]term, int) {
	var (
		mu    sync.Mutex
		terms []term
		wg    sync.WaitGroup
	)
	hold := []time.Duration{}
	for range 3 {
		hold = append(hold, time.Duration(30+rng.IntN(200))*time.Millisecond)
	}
	f := r.inject(rng)
	ctx, cancel := context.WithTimeout(context.Background(), 1200*time.Millisecond)
	defer cancel()
	for c := range 3 {
		el, err := leader.New(r.coord(), key+":lease", key+":fence", fmt.Sprintf("elector-%d", c),
			leader.WithLeaseDuration(150*time.Millisecond), leader.WithRetryDelay(20*time.Millisecond),
			leader.OnElected(func(ctx context.Context, tm *leader.Term) error {
				start := time.Now()
				select { // lead for a while, then resign (or lose the lease)
				case <-ctx.Done():
				case <-time.After(hold[c]):
				}
				mu.Lock()
				terms = append(terms, term{elector: c, token: tm.FencingToken(), start: start, end: time.Now()})
				mu.Unlock()
				return nil
			}))
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if err := el.Run(ctx); err != nil {
				t.Errorf("elector %d: Run = %v", c, err)
			}
		})
	}
	wg.Wait()
	fired, _ := f.end()
	for _, k := range []string{key + ":lease", key + ":fence"} {
		if err := r.raw.Del(context.Background(), r.prefix+k).Err(); err != nil {
			t.Errorf("DEL: %v", err)
		}
	}
	return terms, fired
}

// checkTerms fails the test when a token was given to two terms or when a
// later term carries a smaller token, and returns how many terms ended
// (as OnElected saw it) after the next term started.
func checkTerms(t *testing.T, history int, ts []term) int {
	t.Helper()
	seen := map[int64]int{}
	for _, tm := range ts {
		if c, dup := seen[tm.token]; dup {
			t.Errorf("history %d: fencing token %d given to two terms (electors %d and %d)", history, tm.token, c, tm.elector)
		}
		seen[tm.token] = tm.elector
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].start.Before(ts[j].start) })
	overlaps := 0
	for i := 1; i < len(ts); i++ {
		prev, next := ts[i-1], ts[i]
		if next.token <= prev.token {
			t.Errorf("history %d: a term started at %v with token %d, after one with token %d",
				history, next.start.Format("15:04:05.000"), next.token, prev.token)
		}
		if prev.end.After(next.start) {
			overlaps++
		}
	}
	return overlaps
}
