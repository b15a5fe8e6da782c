package lincheck

import (
	"errors"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	coordination "github.com/coordkit/coordination"
)

// The models must accept what the primitives may do and reject what they
// must not: each test gives a valid history (expiries, refusals and
// unknown outcomes included) and bad ones, each differing from a valid one
// in one operation. A model that accepted everything would fail here.

const t0 = int64(1_700_000_000_000_000) // µs

// at builds an operation of client called at call ms and returned at ret
// ms (after t0), with output out.
func at(client int, in any, out any, call, ret int64) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: Call{In: in, At: Interval{t0 + call*1000 - Micros(Slack), t0 + ret*1000 + Micros(Slack)}},
		Output: Result{Out: out}, Call: call * 1000, Return: ret * 1000}
}

// lost builds an operation whose outcome is unknown.
func lost(client int, in any, call, ret int64) porcupine.Operation {
	o := at(client, in, nil, call, ret)
	c := o.Input.(Call)
	c.At.Hi += Micros(Ambiguity)
	o.Input, o.Output, o.Return = c, Result{Unknown: true, Err: errors.New("i/o timeout")}, o.Return+Micros(Ambiguity)
	return o
}

func check[S any](t *testing.T, name string, sp Spec[S], valid []porcupine.Operation, bad map[string][]porcupine.Operation) {
	t.Helper()
	m := sp.Model()
	if res := porcupine.CheckOperationsTimeout(m, valid, 10*time.Second); res != porcupine.Ok {
		t.Errorf("%s: a valid history was not accepted: %v", name, res)
	}
	for what, h := range bad {
		if res := porcupine.CheckOperationsTimeout(m, h, 10*time.Second); res != porcupine.Illegal {
			t.Errorf("%s: a history with %s was not rejected: %v", name, what, res)
		}
	}
}

// with returns h with operation i replaced by o (or appended when i is
// len(h)).
func with(h []porcupine.Operation, i int, o porcupine.Operation) []porcupine.Operation {
	out := append([]porcupine.Operation(nil), h...)
	if i == len(out) {
		return append(out, o)
	}
	out[i] = o
	return out
}

func TestLockModel(t *testing.T) {
	ttl := 100 * time.Millisecond
	acq := func(id string) Acquire { return Acquire{ID: id, TTL: ttl} }
	valid := []porcupine.Operation{
		at(0, acq("a"), true, 0, 1),
		at(1, acq("b"), false, 10, 11),                     // a holds
		at(0, Refresh{ID: "a", TTL: ttl}, true, 50, 51),    // until ~150
		at(1, acq("b"), false, 120, 121),                   // still a's
		at(1, acq("b2"), true, 160, 161),                   // a expired
		at(0, Refresh{ID: "a", TTL: ttl}, false, 170, 171), // gone
		at(0, Release{ID: "a"}, coordination.AlreadyReleased, 172, 173),
		at(1, Verify{ID: "b2"}, true, 180, 181),
		at(1, Release{ID: "b2"}, coordination.Released, 190, 191),
		lost(2, acq("c"), 200, 201),                              // may hold until ~301
		at(1, acq("d"), false, 210, 211),                         // c's ghost
		at(1, acq("e"), true, 220, 221),                          // the ghost was released
		at(2, Release{ID: "e"}, coordination.Released, 230, 231), // (the ids are handles: any client may use one)
		at(0, acq("f"), true, 240, 241),
		at(1, Verify{ID: "f", MaybeLocal: true}, false, 250, 251), // the handle answered itself
		at(1, Release{ID: "f"}, coordination.Released, 260, 261),
	}
	check(t, "lock", LeaseSpec(LeaseRules{Capacity: 1}), valid, map[string][]porcupine.Operation{
		"two holders":                      with(valid, 1, at(1, acq("b"), true, 10, 11)),
		"a refusal with nobody holding":    with(valid, 4, at(1, acq("b2"), false, 160, 161)),
		"a refresh after expiry":           with(valid, 5, at(0, Refresh{ID: "a", TTL: ttl}, true, 170, 171)),
		"a refresh that did not extend":    with(valid, 3, at(1, acq("b"), true, 120, 121)),
		"a verify of a released lease":     with(valid, 9, at(1, Verify{ID: "b2"}, true, 195, 196)),
		"a release of an expired lease":    with(valid, 6, at(0, Release{ID: "a"}, coordination.Released, 172, 173)),
		"a second holder after a lost one": append(valid[:12:12], at(0, acq("x"), true, 222, 223)),
	})
	// A refresh whose outcome is unknown may have shortened the lease (a
	// TTL shorter than what was left of it).
	long := Acquire{ID: "a", TTL: 400 * time.Millisecond}
	shortened := []porcupine.Operation{
		at(0, long, true, 0, 1),
		lost(0, Refresh{ID: "a", TTL: ttl}, 10, 11), // until ~110, or ~400
		at(1, acq("b"), true, 150, 151),
	}
	check(t, "lock, a lost refresh", LeaseSpec(LeaseRules{Capacity: 1}), shortened, map[string][]porcupine.Operation{
		"a second holder before either expiry": with(shortened, 2, at(1, acq("b"), true, 60, 61)),
	})
}

func TestSemaphoreModel(t *testing.T) {
	ttl := 100 * time.Millisecond
	acq := func(id string, n int64) Acquire { return Acquire{ID: id, N: n, TTL: ttl} }
	valid := []porcupine.Operation{
		at(0, acq("a", 2), true, 0, 1),
		at(1, acq("b", 1), true, 2, 3),
		at(2, acq("c", 1), false, 4, 5), // 3 of 3 held
		at(1, Release{ID: "b"}, coordination.Released, 6, 7),
		at(2, acq("c", 1), true, 8, 9),
		at(2, acq("d", 2), true, 150, 151), // a and c expired
	}
	check(t, "semaphore", LeaseSpec(LeaseRules{Capacity: 3}), valid, map[string][]porcupine.Operation{
		"4 of 3 permits":                    with(valid, 2, at(2, acq("c", 1), true, 4, 5)),
		"a refusal with a permit free":      with(valid, 4, at(2, acq("c", 1), false, 8, 9)),
		"2 permits granted beside 2 of 3":   with(valid, 5, at(2, acq("d", 2), true, 50, 51)),
		"a refusal once everything expired": with(valid, 5, at(2, acq("d", 2), false, 150, 151)),
	})
}

func TestReadWriteModel(t *testing.T) {
	ttl := 100 * time.Millisecond
	r := func(id string) Acquire { return Acquire{ID: id, TTL: ttl} }
	w := func(id string) Acquire { return Acquire{ID: id, Write: true, TTL: ttl} }
	valid := []porcupine.Operation{
		at(0, r("a"), true, 0, 1),
		at(1, r("b"), true, 2, 3), // readers share
		at(2, w("c"), false, 4, 5),
		at(0, Release{ID: "a"}, coordination.Released, 6, 7),
		at(1, Release{ID: "b"}, coordination.Released, 8, 9),
		at(2, w("c"), true, 10, 11),
		at(0, r("d"), false, 12, 13),
		at(0, r("d"), true, 120, 121), // the writer expired
	}
	check(t, "rwlease", LeaseSpec(LeaseRules{RW: true}), valid, map[string][]porcupine.Operation{
		"a writer beside readers":  with(valid, 2, at(2, w("c"), true, 4, 5)),
		"a reader beside a writer": with(valid, 6, at(0, r("d"), true, 12, 13)),
		"a writer refused, free":   with(valid, 5, at(2, w("c"), false, 10, 11)),
	})
}

func TestConcurrencyModel(t *testing.T) {
	acq := func(id string) Acquire { return Acquire{ID: id} }
	rules := LeaseRules{Capacity: 1, Renewed: 300 * time.Millisecond}
	valid := []porcupine.Operation{
		at(0, acq("a"), true, 0, 1),
		at(1, acq("b"), false, 500, 501), // a renews itself while held
		at(0, Release{ID: "a"}, coordination.Released, 600, 601),
		at(1, acq("b"), true, 602, 603),
		lost(0, Release{ID: "b"}, 700, 701), // ends by ~1001 at the latest
		at(1, acq("c"), true, 1100, 1101),
	}
	check(t, "concurrency", LeaseSpec(rules), valid, map[string][]porcupine.Operation{
		"two holders":                         with(valid, 1, at(1, acq("b"), true, 100, 101)),
		"a refusal long after a lost release": with(valid, 5, at(1, acq("c"), false, 1100, 1101)),
	})
}

func TestFencedModel(t *testing.T) {
	ttl := 100 * time.Millisecond
	acq := func(id string) FencedAcquire { return FencedAcquire{ID: id, TTL: ttl} }
	valid := []porcupine.Operation{
		at(0, acq("a"), FencedGrant{true, 1}, 0, 1),
		at(0, GuardedSet{1, "a1"}, SetResult{true, 1}, 2, 3),
		at(1, acq("b"), FencedGrant{false, 0}, 4, 5),
		lost(2, acq("x"), 150, 151), // may have drawn token 2
		at(1, acq("b"), FencedGrant{true, 3}, 300, 301),
		at(1, GuardedSet{3, "b3"}, SetResult{true, 3}, 302, 303),
		at(0, GuardedSet{1, "late"}, SetResult{false, 3}, 304, 305), // the paused holder is fenced off
		at(2, GuardedGet{}, GetResult{true, 3, "b3"}, 306, 307),
		at(1, acq("c"), FencedGrant{true, 4}, 500, 501),
	}
	check(t, "fenced", FencedSpec(), valid, map[string][]porcupine.Operation{
		"a token drawn twice":          with(valid, 8, at(1, acq("c"), FencedGrant{true, 3}, 500, 501)),
		"a gap without a lost call":    with(valid, 8, at(1, acq("c"), FencedGrant{true, 5}, 500, 501)),
		"a late write accepted":        with(valid, 6, at(0, GuardedSet{1, "late"}, SetResult{true, 1}, 304, 305)),
		"a stale read":                 with(valid, 7, at(2, GuardedGet{}, GetResult{true, 1, "a1"}, 306, 307)),
		"two holders":                  with(valid, 2, at(1, acq("b"), FencedGrant{true, 2}, 4, 5)),
		"a rejection with a new token": with(valid, 5, at(1, GuardedSet{3, "b3"}, SetResult{false, 1}, 302, 303)),
	})
}

func TestLatchModel(t *testing.T) {
	cd := func(h string, n int64) LatchCount { return LatchCount{Count: n} }
	valid := []porcupine.Operation{
		at(0, LatchMake{H: "a", Count: 2}, LatchMade{Generation: 1}, 0, 1),
		at(1, LatchMake{H: "x", Count: 5}, LatchMade{Exists: true}, 2, 3),
		at(1, LatchJoin{H: "b"}, LatchJoined{Generation: 1, Initial: 2}, 4, 5),
		at(1, LatchCountDown{H: "b"}, cd("b", 1), 6, 7),
		lost(0, LatchCountDown{H: "a"}, 8, 9), // counted (the next says 0)
		at(1, LatchCountDown{H: "b"}, LatchCount{Completed: true}, 70, 71),
		at(0, LatchMake{H: "c", Reset: true, Count: 1, Deadline: 50 * time.Millisecond}, LatchMade{Generation: 2}, 80, 81),
		at(1, LatchCountDown{H: "b"}, LatchCount{Stale: true}, 82, 83),
		at(0, LatchRead{H: "c"}, cd("c", 1), 84, 85),
		at(0, LatchCountDown{H: "c"}, LatchCount{Broken: true, Count: 1}, 140, 141),
	}
	check(t, "latch", LatchSpec(), valid, map[string][]porcupine.Operation{
		"two count-downs leaving one count": with(valid, 4, at(0, LatchCountDown{H: "a"}, cd("a", 1), 8, 9)),
		"an old handle counting the new":    with(valid, 7, at(1, LatchCountDown{H: "b"}, cd("b", 0), 82, 83)),
		"a create over a latch":             with(valid, 1, at(1, LatchMake{H: "x", Count: 5}, LatchMade{Generation: 1}, 2, 3)),
		"a count-down past the deadline":    with(valid, 9, at(0, LatchCountDown{H: "c"}, cd("c", 0), 140, 141)),
		"broken before the deadline":        with(valid, 8, at(0, LatchRead{H: "c"}, LatchCount{Broken: true, Count: 1}, 84, 85)),
		"a wrong generation number":         with(valid, 6, at(0, LatchMake{H: "c", Reset: true, Count: 1, Deadline: 50 * time.Millisecond}, LatchMade{Generation: 1}, 80, 81)),
	})
}

func TestIdempotencyModel(t *testing.T) {
	ttl := 100 * time.Millisecond
	b := Begin{FP: "f", TTL: ttl}
	valid := []porcupine.Operation{
		at(0, b, Begun{State: "started", Owner: "o1"}, 0, 1),
		at(1, b, Begun{State: "in_progress", Remaining: 95 * time.Millisecond}, 5, 6),
		at(2, Begin{FP: "g", TTL: ttl}, Begun{State: "mismatch"}, 7, 8),
		at(0, Complete{Owner: "o1", Result: "r1", TTL: ttl}, true, 10, 11),
		at(1, b, Begun{State: "completed", Result: "r1"}, 12, 13),
		at(0, Complete{Owner: "o1", Result: "r2", TTL: ttl}, false, 14, 15),
		at(1, b, Begun{State: "started", Owner: "o2"}, 200, 201), // the result expired
		lost(0, Abandon{Owner: "o2"}, 202, 203),
		at(2, b, Begun{State: "started", Owner: "o3"}, 300, 301), // abandoned, or expired
		lost(1, b, 420, 421),
		at(2, b, Begun{State: "in_progress", Remaining: 80 * time.Millisecond}, 430, 431), // the lost Begin's claim
		at(2, b, Begun{State: "started", Owner: "o4"}, 440, 441),                          // abandoned in the background
	}
	check(t, "idempotency", IdempotencySpec(), valid, map[string][]porcupine.Operation{
		"two Started in one lifetime": with(valid, 1, at(1, b, Begun{State: "started", Owner: "x"}, 5, 6)),
		"a replay of another result":  with(valid, 4, at(1, b, Begun{State: "completed", Result: "r2"}, 12, 13)),
		"a second completion":         with(valid, 5, at(0, Complete{Owner: "o1", Result: "r2", TTL: ttl}, true, 14, 15)),
		"a completion by a stranger":  with(valid, 3, at(0, Complete{Owner: "zz", Result: "r1", TTL: ttl}, true, 10, 11)),
		"a wrong remaining TTL":       with(valid, 1, at(1, b, Begun{State: "in_progress", Remaining: 30 * time.Millisecond}, 5, 6)),
		"a lost result":               with(valid, 4, at(1, b, Begun{State: "in_progress", Remaining: 80 * time.Millisecond}, 12, 13)),
	})
}

// Fail keeps the claim until its expiry and answers Begin "failed".
func TestIdempotencyFailModel(t *testing.T) {
	ttl := 100 * time.Millisecond
	b := Begin{FP: "f", TTL: ttl}
	valid := []porcupine.Operation{
		at(0, b, Begun{State: "started", Owner: "o1"}, 0, 1),
		at(0, Fail{Owner: "o1"}, true, 10, 11),
		at(1, b, Begun{State: "failed", Remaining: 85 * time.Millisecond}, 15, 16),
		at(0, Complete{Owner: "o1", Result: "r", TTL: ttl}, false, 17, 18),
		at(0, Abandon{Owner: "o1"}, false, 19, 20),
		at(2, Begin{FP: "g", TTL: ttl}, Begun{State: "mismatch"}, 21, 22),
		at(1, b, Begun{State: "started", Owner: "o2"}, 200, 201), // expired
	}
	check(t, "idempotency fail", IdempotencySpec(), valid, map[string][]porcupine.Operation{
		"in progress after Fail":     with(valid, 2, at(1, b, Begun{State: "in_progress", Remaining: 85 * time.Millisecond}, 15, 16)),
		"a completion after Fail":    with(valid, 3, at(0, Complete{Owner: "o1", Result: "r", TTL: ttl}, true, 17, 18)),
		"a Fail by a stranger":       with(valid, 1, at(0, Fail{Owner: "zz"}, true, 10, 11)),
		"started while still failed": with(valid, 6, at(1, b, Begun{State: "started", Owner: "o2"}, 30, 31)),
	})
}

func TestRateModels(t *testing.T) {
	g := func(c int, ms int64) porcupine.Operation { return at(c, Allow{N: 1}, true, ms, ms+1) }
	r := func(c int, ms int64) porcupine.Operation { return at(c, Allow{N: 1}, false, ms, ms+1) }
	for _, tc := range []struct {
		name  string
		alg   any
		valid []porcupine.Operation
		bad   map[string][]porcupine.Operation
	}{
		{"fixed", Fixed{Limit: 2, Window: 100 * time.Millisecond},
			[]porcupine.Operation{g(0, 0), g(1, 10), r(2, 20), lost(0, Allow{N: 1}, 90, 91), g(1, 110), g(2, 120), r(0, 130)},
			map[string][]porcupine.Operation{
				"3 in a window":           {g(0, 0), g(1, 10), g(2, 20)},
				"a refusal with room":     {g(0, 0), r(1, 10)},
				"a refusal after the end": {g(0, 0), g(1, 10), r(2, 120)},
			}},
		{"sliding", Sliding{Limit: 2, Window: 100 * time.Millisecond, Segments: 4},
			[]porcupine.Operation{g(0, 0), g(1, 30), r(2, 60), r(2, 110), g(2, 130), g(0, 160), r(1, 170)},
			map[string][]porcupine.Operation{
				"3 in a window":           {g(0, 0), g(1, 30), g(2, 90)},
				"a refusal with room":     {g(0, 0), g(1, 30), r(2, 160)},
				"a grant before a return": {g(0, 10), g(1, 30), g(2, 110)},
			}},
		{"bucket", Bucket{Limit: 2, PerPeriod: 1, Period: 50 * time.Millisecond},
			[]porcupine.Operation{g(0, 0), g(1, 10), r(2, 20), g(2, 55), r(0, 60), g(0, 110), g(1, 300), g(2, 301), r(0, 302)},
			map[string][]porcupine.Operation{
				"3 at once":                {g(0, 0), g(1, 10), g(2, 20)},
				"a refill too early":       {g(0, 0), g(1, 10), g(2, 40)},
				"a refusal after a refill": {g(0, 0), g(1, 10), r(2, 60)},
			}},
		{"gcra", GCRA{Burst: 2, Interval: 50 * time.Millisecond},
			[]porcupine.Operation{g(0, 0), g(1, 10), r(2, 20), g(2, 55), r(0, 60), g(0, 120), g(1, 300), g(2, 301), r(0, 302)},
			map[string][]porcupine.Operation{
				"3 at once":           {g(0, 0), g(1, 10), g(2, 20)},
				"one back too early":  {g(0, 0), g(1, 10), g(2, 40)},
				"a refusal once back": {g(0, 0), g(1, 10), r(2, 60)},
			}},
	} {
		check(t, tc.name, RateSpec(tc.alg), tc.valid, tc.bad)
		// The model-free bound check: the valid history within the
		// algorithm's bound, 3 grants within 100 ms above 2.
		if most, ok := CheckBound(tc.valid, 100*time.Millisecond, Bound(tc.alg, 100*time.Millisecond)); !ok {
			t.Errorf("%s: CheckBound rejected the valid history (%d)", tc.name, most)
		}
		for what, h := range tc.bad {
			if what == "3 in a window" || what == "3 at once" {
				if most, ok := CheckBound(h, 100*time.Millisecond, 2); ok || most != 3 {
					t.Errorf("%s: CheckBound of 3 grants in 100ms under 2: %d, %v", tc.name, most, ok)
				}
			}
		}
	}
	// A composite: both must admit; a refusal by one consumes nothing in
	// the other.
	comp := RateSpec(Fixed{Limit: 3, Window: 100 * time.Millisecond}, GCRA{Burst: 2, Interval: 20 * time.Millisecond})
	check(t, "composite", comp,
		[]porcupine.Operation{g(0, 0), g(1, 1), r(2, 2), g(2, 60), r(0, 70), g(0, 120)},
		map[string][]porcupine.Operation{
			"a grant the GCRA refuses":    {g(0, 0), g(1, 1), g(2, 2)},
			"a grant the window refuses":  {g(0, 0), g(1, 1), g(2, 60), g(0, 70)},
			"a refusal with room in both": {g(0, 0), r(1, 10)},
		})
}

func TestDenyModel(t *testing.T) {
	ms := time.Millisecond
	valid := []porcupine.Operation{
		at(0, DenyRead{}, false, 0, 1),
		at(0, DenyWrite{For: 100 * ms}, true, 2, 3),
		at(1, DenyRead{}, true, 10, 11),
		at(1, DenyWrite{For: 20 * ms}, true, 12, 13), // never shortens the denial
		at(0, DenyRead{}, true, 50, 51),
		at(0, DenyRead{}, false, 120, 121), // ended by itself
		at(1, DenyWrite{}, true, 130, 131), // without end
		at(0, DenyRead{}, true, 400, 401),
		lost(1, DenyWrite{Remove: true}, 402, 403), // took effect or not
		at(0, DenyRead{}, false, 450, 451),
		at(0, DenyWrite{For: 10 * ms}, true, 452, 453),
		at(1, DenyWrite{Remove: true}, true, 454, 455),
		at(0, DenyRead{}, false, 456, 457),
	}
	check(t, "deny", DenySpec(), valid, map[string][]porcupine.Operation{
		"a denial seen before any":        with(valid, 0, at(0, DenyRead{}, true, 0, 1)),
		"a denial shortened by DenyFor":   with(valid, 4, at(0, DenyRead{}, false, 50, 51)),
		"a timed denial that never ended": with(valid, 5, at(0, DenyRead{}, true, 120, 121)),
		"a denial without end that ended": with(valid, 7, at(0, DenyRead{}, false, 400, 401)),
		"a denial seen after Remove":      with(valid, 12, at(0, DenyRead{}, true, 456, 457)),
	})
}
