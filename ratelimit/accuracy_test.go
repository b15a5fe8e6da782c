package ratelimit

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// TestAdmissionAccuracy runs a fixed scenario per algorithm on every backend
// and compares the admitted count of each step with the count the
// algorithm's definition gives. Each step offers more requests than the
// limit allows, back to back; between steps the clock moves (miniredis) or
// the test sleeps (real servers). The table is logged (go test -v) for the
// report.
func TestAdmissionAccuracy(t *testing.T) {
	t.Parallel()
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		c := b.Coordinator(t)
		ctx := context.Background()
		type step struct {
			advance time.Duration // before the step
			offered int
			want    int
			what    string
		}
		type scenario struct {
			name  string
			lim   *tlim
			steps []step
			// margin: how late a step may run (behind the ideal time line,
			// the sum of the advances) before its count may change: the
			// distance from each ideal step time to the algorithm's next
			// boundary, at least 100 ms.
			margin time.Duration
			// most is the algorithm's own bound: the most permits it can
			// admit in the given time since the first request.
			most func(elapsed time.Duration) int
		}
		mk := func(l *tlim, err error) *tlim {
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close() })
			return l
		}
		// Steps close to a boundary offer few requests, so that on real
		// servers the time the requests take (δ) stays well inside the
		// margins (at least 100 ms).
		const u = 250 * time.Millisecond
		scenarios := []scenario{
			{"fixed window 10 per 2u", mk(newT(c, "acc:fixed", FixedWindow{Limit: 10, Window: 2 * u})), []step{
				{0, 15, 10, "first window"},
				{u, 5, 0, "same window, 1u later"},
				{u, 15, 10, "next window"},
				{2 * u, 15, 10, "third window"},
			}, u, func(e time.Duration) int { return 10 * (int(e/(2*u)) + 1) }},
			{"sliding window 10 per 2u, 2 segments", mk(newT(c, "acc:sliding", SlidingWindow{Limit: 10, Window: 2 * u, Segments: 2})), []step{
				{0, 15, 10, "t0"},
				{u, 5, 0, "t0+1u (never early)"},
				{2 * u, 15, 10, "t0+3u (at most one segment late)"},
			}, u, func(e time.Duration) int { return 10 * (int(e/u) + 1) }},
			{"token bucket 10, +5 per 2u", mk(newT(c, "acc:bucket", TokenBucket{Limit: 10, TokensPerPeriod: 5, Period: 2 * u})), []step{
				{0, 15, 10, "burst"},
				{2 * u, 8, 5, "one period"},
				{u, 3, 0, "half a period"},
				{8 * u, 15, 10, "four periods, capped"},
			}, u, func(e time.Duration) int { return 10 + 5*int(e/(2*u)) }},
			{"GCRA burst 10, interval u/2", mk(newT(c, "acc:gcra", GCRA{Burst: 10, Interval: u / 2})), []step{
				{0, 15, 10, "burst"},
				{5 * u / 2, 8, 5, "5 intervals"},
				{0, 3, 0, "no time (never B+1)"},
				{10 * u, 15, 10, "20 intervals, capped at the burst"},
			}, u / 2, func(e time.Duration) int { return 10 + int(e/(u/2)) }},
		}
		var (
			mu    sync.Mutex
			table []string
		)
		// On miniredis the clock moves only when the test says, and every
		// step's count must be the exact one. On a real server the steps
		// run behind the ideal time line by the time the requests and the
		// sleeps actually took; a step whose end is within the scenario's
		// margin of its ideal time must still give the exact count. Once a
		// step runs later than that (a loaded machine: 11 requests under
		// the race detector took more than the 125-ms GCRA interval), the
		// counts from there on are those of a later time line, and the
		// test checks what the algorithm promises for the time that
		// actually passed: never fewer permits in total than the ideal
		// time line admits, never more than the algorithm's own bound for
		// the measured elapsed time.
		run := func(t *testing.T, s scenario) {
			var start time.Time
			ideal, late := time.Duration(0), time.Duration(0)
			total, totalWant := 0, 0
			for i, st := range s.steps {
				if st.advance > 0 {
					b.Advance(st.advance)
				}
				ideal += st.advance
				if i == 0 {
					start = time.Now()
				}
				got := 0
				for range st.offered {
					le, err := s.lim.Allow(ctx, 1)
					if err != nil {
						t.Fatal(err)
					}
					if le.Acquired() {
						got++
					}
				}
				total += got
				totalWant += st.want
				note := ""
				if !b.IsMini() {
					elapsed := time.Since(start)
					late = max(late, elapsed-ideal)
					if late >= s.margin {
						note = fmt.Sprintf(" (ran %v late)", late.Round(time.Millisecond))
						if total < totalWant || total > s.most(elapsed) {
							t.Errorf("%s, %s: %d admitted in total after %v, want %d..%d (the ideal count, the algorithm's bound)",
								s.name, st.what, total, elapsed, totalWant, s.most(elapsed))
						}
					}
				}
				mu.Lock()
				table = append(table, fmt.Sprintf("| %s | %s%s | %d | %d | %d |", s.name, st.what, note, st.offered, st.want, got))
				mu.Unlock()
				if note == "" && got != st.want {
					t.Errorf("%s, %s: admitted %d of %d, want %d", s.name, st.what, got, st.offered, st.want)
				}
			}
		}
		// miniredis has one clock: its scenarios run one after another. On
		// real servers each sleeps on its own, in parallel.
		t.Run("scenarios", func(t *testing.T) {
			for _, s := range scenarios {
				t.Run(s.name, func(t *testing.T) {
					if !b.IsMini() {
						t.Parallel()
					}
					run(t, s)
				})
			}
		})
		sort.SliceStable(table, func(i, j int) bool { return strings.SplitN(table[i], "|", 3)[1] < strings.SplitN(table[j], "|", 3)[1] })
		// Concurrency: 10 held at most; releasing 4 admits exactly 4 more.
		cl := mk(newT(c, "acc:conc", Concurrency{Limit: 10, LeaseDuration: 10 * time.Second}))
		var held []Lease
		for range 15 {
			if le := acquire(t, cl, 1); le.Acquired() {
				held = append(held, le)
			}
		}
		table = append(table, fmt.Sprintf("| concurrency 10 | 15 acquisitions | 15 | 10 | %d |", len(held)))
		for _, le := range held[:4] {
			if err := le.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		again := burst(t, cl, 6)
		table = append(table, fmt.Sprintf("| concurrency 10 | after 4 releases | 6 | 4 | %d |", again))
		if len(held) != 10 || again != 4 {
			t.Errorf("concurrency: held %d (want 10), then %d (want 4)", len(held), again)
		}
		t.Logf("admission accuracy (u = %v):\n| limiter | step | offered | expected | admitted |\n|---|---|---|---|---|\n%s", u, strings.Join(table, "\n"))
	})
}
