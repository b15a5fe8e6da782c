package ratelimit

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// A rolling deploy: two instances with other settings (old and new) take
// turns on one key, in an irregular order, while time advances. Each
// decision by the instance whose settings are not the stored ones moves
// the state to its settings, settling the usage once by its algorithm's
// rule (Limiter.Update), and only a grant writes that move (a refusal
// writes nothing: the next decision settles from the same stored state).
// The model follows exactly that: it moves with the decision and keeps the
// move only when the decision was a grant. A script that settled a move
// twice (refilled the elapsed periods at both rates, rescaled a debt
// twice, placed segments twice), or kept a refusal's move, grants where
// the model says it must refuse, or refuses where it must grant, on
// miniredis exactly and on real servers within the server clock's bounds
// (timing_test.go).
func TestRollingDeploySettlesEachMoveOnce(t *testing.T) {
	t.Parallel() // sleeps on real servers
	cases := []struct {
		name     string
		old, neu Settings
		step     time.Duration // time between decisions
		model    func() model
	}{
		{"token bucket",
			TokenBucket{Limit: 8, TokensPerPeriod: 1, Period: 100 * time.Millisecond},
			TokenBucket{Limit: 5, TokensPerPeriod: 3, Period: 100 * time.Millisecond},
			37 * time.Millisecond,
			func() model {
				return newBucketModel(TokenBucket{Limit: 8, TokensPerPeriod: 1, Period: 100 * time.Millisecond})
			}},
		{"GCRA",
			GCRA{Burst: 4, Interval: 50 * time.Millisecond},
			GCRA{Burst: 6, Rate: 3, Period: 100 * time.Millisecond},
			29 * time.Millisecond,
			func() model {
				return newGCRAModel(GCRA{Burst: 4, Interval: 50 * time.Millisecond}, GCRA{Burst: 6, Rate: 3, Period: 100 * time.Millisecond})
			}},
		{"sliding window",
			SlidingWindow{Limit: 6, Window: 400 * time.Millisecond, Segments: 4},
			SlidingWindow{Limit: 9, Window: 600 * time.Millisecond, Segments: 3},
			41 * time.Millisecond,
			func() model {
				return newSlidingModel(SlidingWindow{Limit: 6, Window: 400 * time.Millisecond, Segments: 4})
			}},
	}
	// The turns: a fixed irregular order (runs of one instance, then the
	// other), the same on every backend.
	const turns = "oonoonnnononoooonnonnoonononnnoonnoonoo"
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				c := b.Coordinator(t)
				key := "rolling-settle:" + tc.name
				old, err := newT(c, key, tc.old)
				if err != nil {
					t.Fatal(err)
				}
				neu, err := newT(c, key, tc.neu)
				if err != nil {
					t.Fatal(err)
				}
				sc := serverClock(t, b)
				raw := b.Raw(t)
				m, stored := tc.model(), tc.old
				moves, refused := 0, 0
				var history []string // each turn: the state it found, its answer
				defer func() {
					if t.Failed() {
						t.Log("the turns:\n" + strings.Join(history, "\n"))
					}
				}()
				for i, who := range turns {
					l, s := old, tc.old
					if who == 'n' {
						l, s = neu, tc.neu
					}
					k := 1 + i%2
					found := raw.Get(context.Background(), b.Key(key)).Val()
					le, x := sc.allow(l, k)
					ra, _ := le.RetryAfter()
					history = append(history, fmt.Sprintf("turn %d at %v: %c asks %d, finds %q: granted %v, RetryAfter %v", i, x, who, k, found, le.Acquired(), ra))
					at := m
					if s != stored {
						at = cloneModel(m)
						moveModel(at, x, s)
					}
					checkStep(t, at, fmt.Sprintf("turn %d (%c, %d permits)", i, who, k), le, x, k)
					switch {
					case !le.Acquired():
						refused++
					case s != stored:
						m, stored = at, s
						moves++
					}
					b.Advance(tc.step)
				}
				// The scenario must exercise moves and refusals (checked on
				// miniredis, where it is exact).
				if b.IsMini() && (moves < 6 || refused < 3) {
					t.Fatalf("%d moves and %d refusals: the scenario exercises too little", moves, refused)
				}
				t.Logf("%d moves, %d refusals in %d turns", moves, refused, len(turns))
			})
		}
	})
}

// checkStep checks a decision for k permits at x against m (the bounds
// only: no planned answer) and records a grant in m.
func checkStep(t *testing.T, m model, what string, le Lease, x stamp, k int) {
	t.Helper()
	mayGrant, mayRefuse, raLo, raHi := m.one(x, k)
	if le.Acquired() {
		if !mayGrant {
			t.Fatalf("%s at %v: granted; the settled state must refuse it (RetryAfter %v..%v)", what, x, raLo, raHi)
		}
		m.took(x, x, k, 0)
		return
	}
	if !mayRefuse {
		t.Fatalf("%s at %v: refused; the settled state must grant it", what, x)
	}
	if ra, ok := le.RetryAfter(); !ok || ra < raLo || ra > raHi {
		t.Fatalf("%s at %v: RetryAfter %v (%v), want %v..%v", what, x, ra, ok, raLo, raHi)
	}
	m.took(x, x, 0, k)
}

// cloneModel copies a model of the token bucket, GCRA or sliding window.
func cloneModel(m model) model {
	switch m := m.(type) {
	case *bucketModel:
		c := *m
		return &c
	case *gcraModel:
		c := *m
		return &c
	case *slidingModel:
		c := *m
		c.charges = slices.Clone(m.charges)
		return &c
	}
	panic(fmt.Sprintf("cloneModel: %T", m))
}

// moveModel moves m to s at an instant of x (the decision's).
func moveModel(m model, x stamp, s Settings) {
	switch m := m.(type) {
	case *bucketModel:
		m.update(x, s.(TokenBucket))
	case *gcraModel:
		m.update(x, s.(GCRA))
	case *slidingModel:
		m.update(x, s.(SlidingWindow))
	default:
		panic(fmt.Sprintf("moveModel: %T", m))
	}
}
