package lincheck

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Allow asks a rate limiter for N permits (input); the output is a bool,
// granted.
type Allow struct{ N int64 }

// Rate-limit algorithms, as the models see them (settings as the
// limiters' of package ratelimit).
type (
	// Fixed is a fixed window: up to Limit permits from the grant that
	// opens a window until Window after it.
	Fixed struct {
		Limit  int64
		Window time.Duration // whole milliseconds
	}
	// Sliding is a segmented sliding window: segments of
	// ceil(Window/Segments) aligned to server time; permits taken in
	// segment i count until (i+1)*g + Window.
	Sliding struct {
		Limit    int64
		Window   time.Duration
		Segments int64
	}
	// Bucket is a token bucket of Limit tokens, PerPeriod more each whole
	// Period since it last dropped below full.
	Bucket struct {
		Limit, PerPeriod int64
		Period           time.Duration
	}
	// GCRA is the generic cell rate algorithm: Burst permits at once, one
	// more every Interval (whole microseconds).
	GCRA struct {
		Burst    int64
		Interval time.Duration
	}
)

// algState is one algorithm's state; times are intervals.
type algState struct {
	Live bool     // fixed: a window is open; bucket: below full; gcra: TAT set
	T    Interval // fixed: the window's end; bucket: the refill start; gcra: the TAT
	N    int64    // fixed: used; bucket: tokens
	Segs []seg    // sliding: permits per segment
}

type seg struct{ I, N int64 }

// RateState is the state of a rate-limit model: one state per component.
type RateState struct{ C []algState }

func (s RateState) key() string {
	var b strings.Builder
	for _, c := range s.C {
		fmt.Fprintf(&b, "%v:%v:%d:%v;", c.Live, c.T, c.N, c.Segs)
	}
	return b.String()
}

// decision is one way a component can decide at an instant of At: granted
// or not, and its state after consuming (when granted).
type decision struct {
	At      Interval
	Granted bool
	After   algState
}

// RateSpec returns the model of a rate limiter whose components (one, or
// the composite's) are algs, each a [Fixed], [Sliding], [Bucket] or
// [GCRA]: a request is granted exactly when every component has room for
// it at its instant, and then every component consumes it; a refusal
// consumes nothing. A request with an unknown outcome consumed or not.
// Admission above a component's bound over any window is therefore
// rejected, and so are refusals the state does not explain.
func RateSpec(algs ...any) Spec[RateState] {
	return Spec[RateState]{
		Init: func() RateState { return RateState{C: make([]algState, len(algs))} },
		Key:  RateState.key,
		Step: func(s RateState, at Interval, c Call, r Result) []Next[RateState] {
			n := c.In.(Allow).N
			type partial struct {
				at      Interval
				granted bool
				after   []algState
			}
			parts := []partial{{at: at, granted: true}}
			for i, a := range algs {
				var next []partial
				for _, p := range parts {
					for _, d := range decide(a, s.C[i], p.at, c.At, n) {
						next = append(next, partial{d.At, p.granted && d.Granted, append(slices.Clip(p.after), d.After)})
					}
				}
				parts = next
			}
			var out []Next[RateState]
			for _, p := range parts {
				granted := RateState{C: p.after}
				switch {
				case r.Unknown:
					out = append(out, Next[RateState]{S: s, At: p.at})
					if p.granted {
						out = append(out, Next[RateState]{S: granted, At: p.at})
					}
				case r.Out.(bool) && p.granted:
					out = append(out, Next[RateState]{S: granted, At: p.at})
				case !r.Out.(bool) && !p.granted:
					out = append(out, Next[RateState]{S: s, At: p.at})
				}
			}
			return out
		},
		Describe: describe,
	}
}

// decide returns the ways algorithm a in state s can decide n permits at
// an instant of at (raw: the call's own interval, from which the times a
// grant sets are derived, as in the lease model).
func decide(a any, s algState, at, raw Interval, n int64) []decision {
	switch a := a.(type) {
	case Fixed:
		return a.decide(s, at, raw, n)
	case Sliding:
		return a.decide(s, at, n)
	case Bucket:
		return a.decide(s, at, raw, n)
	case GCRA:
		return a.decide(s, at, raw, n)
	}
	panic(fmt.Sprintf("lincheck: rate model: unknown algorithm %T", a))
}

func (f Fixed) decide(s algState, at, raw Interval, n int64) []decision {
	var out []decision
	open := func(at Interval) {
		// A new window, ending Window after the grant (in whole ms).
		end := Interval{raw.Lo + Micros(f.Window) - 1000, raw.Hi + Micros(f.Window) + 1000}
		out = append(out, decision{at, n <= f.Limit, algState{Live: true, T: end, N: n}})
	}
	if !s.Live {
		open(at)
		return out
	}
	if b := Before(at, s.T); !b.Empty() {
		next := s
		next.N += n
		out = append(out, decision{b, next.N <= f.Limit, next})
	}
	if a := After(at, s.T); !a.Empty() {
		open(a)
	}
	return out
}

func (w Sliding) decide(s algState, at Interval, n int64) []decision {
	g := (Micros(w.Window) + w.Segments - 1) / w.Segments
	win := Micros(w.Window)
	// Cut at into pieces within which every segment is charged or not and
	// the grant's segment is the same.
	cuts := []int64{at.Lo}
	for k := at.Lo/g + 1; k*g <= at.Hi; k++ {
		cuts = append(cuts, k*g)
	}
	for _, sg := range s.Segs {
		if t := (sg.I+1)*g + win; t > at.Lo && t <= at.Hi {
			cuts = append(cuts, t)
		}
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	var out []decision
	for i, lo := range cuts {
		piece := Interval{lo, at.Hi}
		if i+1 < len(cuts) {
			piece.Hi = cuts[i+1] - 1
		}
		var used int64
		var next []seg
		for _, sg := range s.Segs {
			if lo < (sg.I+1)*g+win { // still charged
				used += sg.N
				next = append(next, sg)
			}
		}
		k := lo / g
		if len(next) > 0 && next[len(next)-1].I == k {
			next[len(next)-1].N += n
		} else {
			next = append(next, seg{k, n})
		}
		out = append(out, decision{piece, used+n <= w.Limit, algState{Live: true, Segs: next}})
	}
	return out
}

func (b Bucket) decide(s algState, at, raw Interval, n int64) []decision {
	p := Micros(b.Period)
	full := func(at Interval) decision {
		return decision{at, n <= b.Limit, algState{Live: n > 0, T: raw, N: b.Limit - n}}
	}
	if !s.Live {
		return []decision{full(at)}
	}
	var out []decision
	// m whole periods since the refill start.
	lo, top := max(0, floorDiv(at.Lo-s.T.Hi, p)), max(0, floorDiv(at.Hi-s.T.Lo, p))
	fill := (b.Limit - s.N + b.PerPeriod - 1) / b.PerPeriod
	for m := min(lo, fill); m <= top && m <= fill; m++ {
		piece := Interval{max(at.Lo, sat(s.T.Lo, m*p)), at.Hi}
		if m < fill {
			piece.Hi = min(at.Hi, s.T.Hi+(m+1)*p-1)
		}
		if piece.Empty() {
			continue
		}
		if m >= fill {
			out = append(out, full(piece))
			continue
		}
		tk := s.N + m*b.PerPeriod
		next := algState{Live: true, T: s.T.Add(m*p, m*p), N: tk - n}
		out = append(out, decision{piece, tk >= n, next})
	}
	return out
}

func (c GCRA) decide(s algState, at, raw Interval, n int64) []decision {
	t := Micros(c.Interval)
	room := (c.Burst - n) * t // granted iff TAT <= instant + room
	if !s.Live {
		return []decision{{at, n <= c.Burst, algState{Live: true, T: raw.Add(n*t, n*t)}}}
	}
	var out []decision
	if g := (Interval{max(at.Lo, s.T.Lo-room), at.Hi}); !g.Empty() {
		next := algState{Live: true, T: Interval{max(s.T.Lo, raw.Lo) + n*t, max(s.T.Hi, raw.Hi) + n*t}}
		out = append(out, decision{g, n <= c.Burst, next})
	}
	if r := (Interval{at.Lo, min(at.Hi, s.T.Hi-room-1)}); !r.Empty() {
		out = append(out, decision{r, false, s})
	}
	return out
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// Bound returns the most permits algorithm a (a [Fixed], [Sliding],
// [Bucket] or [GCRA]) can admit within any span of d: for a fixed window,
// two windows' worth when d spans a window's end; for a sliding window,
// Limit per Window; for a bucket, its Limit plus a refill per period; for
// GCRA, Burst plus one per Interval.
func Bound(a any, d time.Duration) int64 {
	switch a := a.(type) {
	case Fixed:
		return a.Limit * (int64(d/a.Window) + 2)
	case Sliding:
		return a.Limit * (int64(d/a.Window) + 1)
	case Bucket:
		return a.Limit + a.PerPeriod*(int64(d/a.Period)+1)
	case GCRA:
		return a.Burst + int64(d/a.Interval) + 1
	}
	panic(fmt.Sprintf("lincheck: Bound: unknown algorithm %T", a))
}

// CheckBound checks, without a model, that the permits granted by the
// operations of ops ([Allow] calls) that lie wholly within any span of d
// (their intervals of server time, slack included) never exceed bound; it
// returns the largest such sum and whether it is within the bound. Only granted calls count (an unknown outcome does not:
// its caller was not admitted).
func CheckBound(ops []porcupine.Operation, d time.Duration, bound int64) (most int64, ok bool) {
	type grant struct{ lo, hi, n int64 }
	var gs []grant
	for _, o := range ops {
		c, r := o.Input.(Call), o.Output.(Result)
		if in, isAllow := c.In.(Allow); isAllow && !r.Unknown && r.Out.(bool) {
			gs = append(gs, grant{c.At.Lo, c.At.Hi, in.N})
		}
	}
	for _, a := range gs {
		var sum int64
		for _, b := range gs {
			if b.lo >= a.lo && b.hi < a.lo+Micros(d) {
				sum += b.n
			}
		}
		most = max(most, sum)
	}
	return most, most <= bound
}
