package lincheck

import (
	"fmt"
	"time"
)

// DenyWrite changes one identity's entry in a deny list (input): Remove
// takes it off (DenyList.Remove), For > 0 denies it for that long
// (DenyList.DenyFor), otherwise it is denied without end (DenyList.Deny).
// The output is true (the call returned no error).
type DenyWrite struct {
	For    time.Duration
	Remove bool
}

// DenyRead asks whether the identity is denied (DenyList.Denied, with the
// cache off); the output is a bool.
type DenyRead struct{}

// DenyState is the deny-list model's state for one identity: denied until
// End (Never: without end).
type DenyState struct {
	Denied bool
	End    Interval
}

func (s DenyState) key() string { return fmt.Sprintf("%v:%d:%d", s.Denied, s.End.Lo, s.End.Hi) }

// DenySpec returns the model of one identity on a deny list: Deny denies
// it without end; DenyFor(d) denies it until the instant of the call plus
// d, keeping a denial that ends later or never (a DenyFor never shortens
// one); Remove ends any denial; a timed denial ends by itself; Denied
// answers whether a denial is live at its instant. Writes whose outcome
// is unknown took effect or not; a read whose outcome is unknown tells
// nothing.
func DenySpec() Spec[DenyState] {
	return Spec[DenyState]{
		Init:     func() DenyState { return DenyState{End: Interval{Never, Never}} },
		Key:      DenyState.key,
		Step:     denyStep,
		Describe: describe,
	}
}

func denyStep(s DenyState, at Interval, c Call, r Result) []Next[DenyState] {
	// The cases of the identity's denial at the operation's instant: live
	// (before its end) or ended.
	type denyCase struct {
		At   Interval
		Live bool
	}
	var cases []denyCase
	if !s.Denied {
		cases = []denyCase{{at, false}}
	} else {
		for _, k := range split(at, s.End) {
			cases = append(cases, denyCase{k.At, k.Before})
		}
	}
	var out []Next[DenyState]
	for _, k := range cases {
		cur := s
		if !k.Live {
			cur = DenyState{End: Interval{Never, Never}}
		}
		if r.Unknown {
			out = append(out, Next[DenyState]{S: cur, At: k.At}) // not taken effect (or a read)
		}
		switch in := c.In.(type) {
		case DenyRead:
			if r.Unknown {
				continue
			}
			if denied, _ := r.Out.(bool); denied == k.Live {
				out = append(out, Next[DenyState]{S: cur, At: k.At})
			}
		case DenyWrite:
			next := cur
			switch {
			case in.Remove:
				next = DenyState{End: Interval{Never, Never}}
			case in.For == 0:
				next = DenyState{Denied: true, End: Interval{Never, Never}}
			default:
				// The end from the call's own interval (see the lease model).
				end := expiry(c.At.Lo, c.At.Hi, in.For)
				if k.Live {
					end = Interval{max(cur.End.Lo, end.Lo), max(cur.End.Hi, end.Hi)}
				}
				next = DenyState{Denied: true, End: end}
			}
			out = append(out, Next[DenyState]{S: next, At: k.At})
		default:
			panic(fmt.Sprintf("lincheck: deny model: unknown input %T", c.In))
		}
	}
	return out
}
