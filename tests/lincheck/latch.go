package lincheck

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// LatchMake creates (Create) or replaces (Reset) a latch and names the
// handle it returns H (input); the output is a [LatchMade].
type LatchMake struct {
	H        string
	Reset    bool
	Count    int64
	Deadline time.Duration // 0: none
	KeyTTL   time.Duration // 0: none
}

// LatchMade is the output of [LatchMake]: Exists when Create found a
// latch; else the new generation's number.
type LatchMade struct {
	Exists     bool
	Generation int64
}

// LatchJoin joins the current generation as handle H (input); the output
// is a [LatchJoined].
type LatchJoin struct{ H string }

// LatchJoined is the output of [LatchJoin].
type LatchJoined struct {
	NotFound            bool
	Generation, Initial int64
}

// LatchCountDown counts handle H's generation down (input); LatchRead
// reads it (latch.Generation.Count). The output of both is a [LatchCount].
type LatchCountDown struct{ H string }

// LatchRead: see [LatchCountDown].
type LatchRead struct{ H string }

// LatchCount is the output of [LatchCountDown] and [LatchRead]: the count
// left (or, Broken, the count at which the generation broke), or the
// answer that refused it.
type LatchCount struct {
	Count                              int64
	Stale, NotFound, Completed, Broken bool
}

type latchGen struct {
	Gen, Number, Initial, Count int64
	Deadline                    Interval // Never: none
}

// LatchState is the state of the latch model.
type LatchState struct {
	Present bool
	Exp     Interval // the key's expiry (Never: none)
	Cur     latchGen
	Gens    int64    // generations made so far
	Handles []string // "handle=gen", sorted
}

func (s LatchState) key() string {
	return fmt.Sprintf("%v|%v|%+v|%d|%s", s.Present, s.Exp, s.Cur, s.Gens, strings.Join(s.Handles, ","))
}

func (s LatchState) handle(h string) int64 {
	for _, x := range s.Handles {
		if name, gen, ok := strings.Cut(x, "="); ok && name == h {
			var g int64
			fmt.Sscan(gen, &g)
			return g
		}
	}
	return -1
}

func (s LatchState) withHandle(h string, gen int64) LatchState {
	hs := slices.DeleteFunc(slices.Clone(s.Handles), func(x string) bool { return strings.HasPrefix(x, h+"=") })
	hs = append(hs, fmt.Sprintf("%s=%d", h, gen))
	slices.Sort(hs)
	s.Handles = hs
	return s
}

// split returns the parts of at before t and from t on, with whether each
// is before; empty parts are left out.
func split(at, t Interval) []struct {
	At     Interval
	Before bool
} {
	var out []struct {
		At     Interval
		Before bool
	}
	if b := Before(at, t); !b.Empty() {
		out = append(out, struct {
			At     Interval
			Before bool
		}{b, true})
	}
	if a := After(at, t); !a.Empty() {
		out = append(out, struct {
			At     Interval
			Before bool
		}{a, false})
	}
	return out
}

// LatchSpec returns the model of a countdown latch with generations: a
// Create finds the latch (Exists) or makes generation 1; a Reset makes
// the next generation (1 on an empty key); a Join joins the current one;
// a count-down from a handle of the current generation counts it down by
// exactly one unless it is complete (Completed) or past its deadline with
// a count left (Broken), and a handle of an older generation is Stale;
// the key ends at its TTL (NotFound). Operations whose outcome is unknown
// took effect or not. A Create answered Exists on an empty key, and a
// count-down answered Stale that could have counted, are re-sends whose
// first send made the latch or counted (a Reset replaced the generation
// before the re-send).
func LatchSpec() Spec[LatchState] {
	return Spec[LatchState]{
		Init:     func() LatchState { return LatchState{} },
		Key:      LatchState.key,
		Step:     latchStep,
		Describe: describe,
	}
}

func latchStep(s LatchState, at Interval, c Call, r Result) []Next[LatchState] {
	var out []Next[LatchState]
	// The key's presence at the instant.
	for _, k := range split(at, s.Exp) {
		cur := s
		if !k.Before {
			cur = LatchState{Gens: s.Gens, Handles: s.Handles, Exp: Interval{Never, Never}} // expired
		}
		present := cur.Present
		switch in := c.In.(type) {
		case LatchMake:
			made := cur
			made.Gens++
			made.Present = true
			made.Cur = latchGen{Gen: made.Gens, Number: 1, Initial: in.Count, Count: in.Count, Deadline: Interval{Never, Never}}
			if in.Reset && present {
				made.Cur.Number = cur.Cur.Number + 1
			}
			if in.Deadline > 0 {
				made.Cur.Deadline = expiry(c.At.Lo, c.At.Hi, in.Deadline)
			}
			made.Exp = Interval{Never, Never}
			if in.KeyTTL > 0 {
				made.Exp = expiry(c.At.Lo, c.At.Hi, in.KeyTTL)
			}
			made = made.withHandle(in.H, made.Gens)
			canMake := in.Reset || !present
			switch {
			case r.Unknown:
				out = append(out, Next[LatchState]{S: cur, At: k.At})
				if canMake {
					out = append(out, Next[LatchState]{S: made, At: k.At})
				}
			case r.Out.(LatchMade).Exists && !in.Reset:
				if present {
					out = append(out, Next[LatchState]{S: cur, At: k.At})
				} else {
					// A re-sent Create: its first send made a generation,
					// which a Reset replaced before the re-send found it.
					out = append(out, Next[LatchState]{S: made, At: k.At})
				}
			case canMake && r.Out.(LatchMade).Generation == made.Cur.Number:
				out = append(out, Next[LatchState]{S: made, At: k.At})
			}
		case LatchJoin:
			j, _ := r.Out.(LatchJoined)
			switch {
			case r.Unknown:
				out = append(out, Next[LatchState]{S: cur, At: k.At})
			case !present:
				if j.NotFound {
					out = append(out, Next[LatchState]{S: cur, At: k.At})
				}
			case !j.NotFound && j.Generation == cur.Cur.Number && j.Initial == cur.Cur.Initial:
				out = append(out, Next[LatchState]{S: cur.withHandle(in.H, cur.Cur.Gen), At: k.At})
			}
		case LatchCountDown, LatchRead:
			h, down := "", false
			switch in := in.(type) {
			case LatchCountDown:
				h, down = in.H, true
			case LatchRead:
				h = in.H
			}
			for _, n := range latchCount(cur, k.At, cur.handle(h), down) {
				switch {
				case r.Unknown:
					out = append(out, Next[LatchState]{S: cur, At: n.At}, n.Next)
				case r.Out.(LatchCount) == n.out:
					out = append(out, n.Next)
				case down && r.Out.(LatchCount).Stale && n.out == (LatchCount{Count: n.S.Cur.Count}):
					// A re-sent count-down: its first send counted, and a
					// Reset replaced the generation before the re-send.
					out = append(out, n.Next)
				}
			}
		default:
			panic(fmt.Sprintf("lincheck: latch model: unknown input %T", c.In))
		}
	}
	return out
}

type latchNext struct {
	Next[LatchState]
	out LatchCount
}

// latchCount returns what a count-down (down) or a read from a handle of
// generation gen answers at an instant of at, with the state after it.
func latchCount(s LatchState, at Interval, gen int64, down bool) []latchNext {
	switch {
	case !s.Present:
		return []latchNext{{Next[LatchState]{S: s, At: at}, LatchCount{NotFound: true}}}
	case gen != s.Cur.Gen:
		return []latchNext{{Next[LatchState]{S: s, At: at}, LatchCount{Stale: true}}}
	case s.Cur.Count == 0:
		if down {
			return []latchNext{{Next[LatchState]{S: s, At: at}, LatchCount{Completed: true}}}
		}
		return []latchNext{{Next[LatchState]{S: s, At: at}, LatchCount{}}}
	}
	var out []latchNext
	for _, k := range split(at, s.Cur.Deadline) {
		switch {
		case !k.Before:
			out = append(out, latchNext{Next[LatchState]{S: s, At: k.At}, LatchCount{Broken: true, Count: s.Cur.Count}})
		case down:
			n := s
			n.Cur.Count--
			out = append(out, latchNext{Next[LatchState]{S: n, At: k.At}, LatchCount{Count: n.Cur.Count}})
		default:
			out = append(out, latchNext{Next[LatchState]{S: s, At: k.At}, LatchCount{Count: s.Cur.Count}})
		}
	}
	return out
}
