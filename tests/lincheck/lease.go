package lincheck

import (
	"fmt"
	"slices"
	"strings"
	"time"

	coordination "github.com/coordkit/coordination"
)

// ExpirySlack widens every expiry a model derives: Redis keeps TTLs in
// whole milliseconds and expires a key when its time has passed by a
// millisecond.
const ExpirySlack = time.Millisecond

// LeaseRules say which leases a lease model allows at once: a lock
// (Capacity 1), a semaphore (Capacity permits), a read-write lease (RW),
// a concurrency limiter (Capacity permits, Renewed).
type LeaseRules struct {
	// Capacity bounds the permits of the live leases together (each lease
	// holds Acquire.N, at least 1). Ignored when RW.
	Capacity int64
	// RW makes it a read-write lease: a write lease excludes every other
	// lease, read leases share.
	RW bool
	// Renewed is the lease duration of leases that renew themselves in the
	// background while held (a concurrency limiter's): such a lease lives
	// at least Renewed past its grant and until Renewed after its release
	// at the latest; when exactly is unknown. 0 for leases with a TTL.
	Renewed time.Duration
}

// Acquire takes a lease (input); the output is a bool, granted.
type Acquire struct {
	ID    string // the handle, unique in the history
	N     int64  // permits (0 means 1)
	Write bool   // RW: a write lease
	TTL   time.Duration
}

// Refresh renews a lease (input); the output is a bool, renewed.
// MaybeLocal says the handle's local deadline may have passed during the
// call, so that a false answer may be the handle's own, without asking
// the server.
type Refresh struct {
	ID         string
	TTL        time.Duration
	MaybeLocal bool
}

// Verify asks whether a lease is held (input); the output is a bool.
// MaybeLocal as for [Refresh].
type Verify struct {
	ID         string
	MaybeLocal bool
}

// Release gives a lease back (input); the output is a
// coordination.ReleaseOutcome (Released for a concurrency lease's nil).
type Release struct{ ID string }

type lease struct {
	ID    string
	N     int64
	Write bool
	Exp   Interval
}

// LeaseState is the state of a lease model: the leases that may be live.
type LeaseState struct{ l []lease }

func (s LeaseState) key() string {
	var b strings.Builder
	for _, l := range s.l {
		fmt.Fprintf(&b, "%s:%d:%v:%d:%d;", l.ID, l.N, l.Write, l.Exp.Lo, l.Exp.Hi)
	}
	return b.String()
}

func (s LeaseState) find(id string) int {
	return slices.IndexFunc(s.l, func(l lease) bool { return l.ID == id })
}

func (s LeaseState) with(l lease) LeaseState {
	out := slices.DeleteFunc(slices.Clone(s.l), func(x lease) bool { return x.ID == l.ID })
	out = append(out, l)
	slices.SortFunc(out, func(a, b lease) int { return strings.Compare(a.ID, b.ID) })
	return LeaseState{out}
}

func (s LeaseState) without(id string) LeaseState {
	return LeaseState{slices.DeleteFunc(slices.Clone(s.l), func(x lease) bool { return x.ID == id })}
}

// prune drops the leases certainly expired at every instant of at.
func (s LeaseState) prune(at Interval) LeaseState {
	if !slices.ContainsFunc(s.l, func(l lease) bool { return l.Exp.Hi <= at.Lo }) {
		return s
	}
	return LeaseState{slices.DeleteFunc(slices.Clone(s.l), func(l lease) bool { return l.Exp.Hi <= at.Lo })}
}

// liveCase is one way the leases of a state can be live or expired at an
// instant of At.
type liveCase struct {
	At   Interval
	Live []lease
}

// cases returns every way the leases can be live or expired at an instant
// of at, each with the part of at that allows it.
func (s LeaseState) cases(at Interval) []liveCase {
	out := []liveCase{{At: at}}
	for _, l := range s.l {
		var next []liveCase
		for _, c := range out {
			if b := Before(c.At, l.Exp); !b.Empty() {
				next = append(next, liveCase{At: b, Live: append(slices.Clip(c.Live), l)})
			}
			if a := After(c.At, l.Exp); !a.Empty() {
				next = append(next, liveCase{At: a, Live: c.Live})
			}
		}
		out = next
	}
	return out
}

func (r LeaseRules) fits(live []lease, a Acquire) bool {
	if r.RW {
		if a.Write {
			return len(live) == 0
		}
		return !slices.ContainsFunc(live, func(l lease) bool { return l.Write })
	}
	used := permits(a.N)
	for _, l := range live {
		used += permits(l.N)
	}
	return used <= r.Capacity
}

func permits(n int64) int64 { return max(n, 1) }

// expiry is the expiry of a lease set at an instant within [lo, hi] with
// ttl (Never for a TTL of 0).
func expiry(lo, hi int64, ttl time.Duration) Interval {
	if ttl == 0 {
		return Interval{Never, Never}
	}
	return Interval{lo + Micros(ttl-ExpirySlack), sat(hi, Micros(ttl+ExpirySlack))}
}

// LeaseSpec returns the model of leases held under r: acquisitions are
// granted exactly when the leases live at their instant leave room (r),
// a lease lives until its TTL from the instant of its last acquire or
// refresh, and refresh, verify and release are owner-checked. An
// acquisition whose outcome is unknown may have left a lease nobody holds
// (until its TTL or the background release); a release whose outcome is
// unknown may have ended the lease at any instant from its call on.
// A re-sent release finds its lease gone (AlreadyReleased, or NotOwned
// when another holder took it meanwhile): those answers are accepted
// with the lease ended.
func LeaseSpec(r LeaseRules) Spec[LeaseState] {
	return Spec[LeaseState]{
		Init:     func() LeaseState { return LeaseState{} },
		Key:      LeaseState.key,
		Step:     func(s LeaseState, at Interval, c Call, res Result) []Next[LeaseState] { return r.step(s, at, c, res) },
		Describe: describe,
	}
}

func (r LeaseRules) exp(lo, hi int64, ttl time.Duration) Interval {
	if r.Renewed > 0 {
		return Interval{lo + Micros(r.Renewed-ExpirySlack), Never}
	}
	return expiry(lo, hi, ttl)
}

func (r LeaseRules) step(s LeaseState, at Interval, c Call, res Result) []Next[LeaseState] {
	s = s.prune(at)
	switch in := c.In.(type) {
	case Acquire:
		return r.acquire(s, at, c.At, in, res)
	case Refresh:
		return refresh(s, at, c.At, in, res)
	case Verify:
		return verify(s, at, in, res)
	case Release:
		return r.release(s, at, c.At, in, res)
	}
	panic(fmt.Sprintf("lincheck: lease model: unknown input %T", c.In))
}

// The times a step sets (an expiry) are derived from the call's own
// interval (raw), not from the part of it a case narrowed: wider, so
// sound, and the same in every case, so that cases that end in the same
// state merge.

func (r LeaseRules) acquire(s LeaseState, at, raw Interval, in Acquire, res Result) []Next[LeaseState] {
	var out []Next[LeaseState]
	if res.Unknown {
		out = append(out, Next[LeaseState]{S: s, At: at}) // no effect
	}
	refused := Interval{Never, 0} // the instants at which it can be refused
	for _, k := range s.cases(at) {
		fits := r.fits(k.Live, in)
		switch {
		case res.Unknown && fits:
			// A lease nobody holds: it ends at its TTL, or earlier when the
			// background release removes it.
			e := r.exp(raw.Lo, raw.Hi, in.TTL)
			if r.Renewed > 0 {
				e.Hi = sat(raw.Hi, Micros(r.Renewed+ExpirySlack))
			}
			e.Lo = raw.Lo
			out = append(out, Next[LeaseState]{S: LeaseState{k.Live}.with(lease{in.ID, in.N, in.Write, e}), At: k.At})
		case res.Unknown:
		case res.Out.(bool) && fits:
			out = append(out, Next[LeaseState]{S: LeaseState{k.Live}.with(lease{in.ID, in.N, in.Write, r.exp(raw.Lo, raw.Hi, in.TTL)}), At: k.At})
		case !res.Out.(bool) && !fits:
			refused = Interval{min(refused.Lo, k.At.Lo), max(refused.Hi, k.At.Hi)}
		}
	}
	if !refused.Empty() {
		// Nothing changes: one state, from the earliest instant possible.
		out = append(out, Next[LeaseState]{S: s, At: refused})
	}
	return out
}

func refresh(s LeaseState, at, raw Interval, in Refresh, res Result) []Next[LeaseState] {
	i := s.find(in.ID)
	switch {
	case res.Unknown:
		if i < 0 {
			return []Next[LeaseState]{{S: s, At: at}}
		}
		// Renewed or not: the expiry is the old one or the refresh's,
		// which may be earlier (a shorter TTL than the rest of the lease).
		l := s.l[i]
		e := expiry(raw.Lo, raw.Hi, in.TTL)
		l.Exp = Interval{min(l.Exp.Lo, e.Lo), max(l.Exp.Hi, e.Hi)}
		return []Next[LeaseState]{{S: s.with(l), At: at}}
	case res.Out.(bool):
		if i < 0 {
			return nil
		}
		l := s.l[i]
		b := Before(at, l.Exp)
		if b.Empty() {
			return nil
		}
		l.Exp = expiry(raw.Lo, raw.Hi, in.TTL)
		return []Next[LeaseState]{{S: s.with(l), At: b}}
	}
	return gone(s, at, in.ID, in.MaybeLocal)
}

// gone: a refresh or verify answered false: the lease had expired (or
// was never taken), unless the handle answered on its own.
func gone(s LeaseState, at Interval, id string, local bool) []Next[LeaseState] {
	i := s.find(id)
	if local || i < 0 {
		return []Next[LeaseState]{{S: s, At: at}}
	}
	a := After(at, s.l[i].Exp)
	if a.Empty() {
		return nil
	}
	return []Next[LeaseState]{{S: s.without(id), At: a}}
}

func verify(s LeaseState, at Interval, in Verify, res Result) []Next[LeaseState] {
	switch {
	case res.Unknown:
		return []Next[LeaseState]{{S: s, At: at}}
	case res.Out.(bool):
		i := s.find(in.ID)
		if i < 0 {
			return nil
		}
		b := Before(at, s.l[i].Exp)
		if b.Empty() {
			return nil
		}
		return []Next[LeaseState]{{S: s, At: b}}
	}
	return gone(s, at, in.ID, in.MaybeLocal)
}

func (r LeaseRules) release(s LeaseState, at, raw Interval, in Release, res Result) []Next[LeaseState] {
	i := s.find(in.ID)
	if res.Unknown {
		if i < 0 {
			return []Next[LeaseState]{{S: s, At: at}}
		}
		// The release may run at any instant from now on (the background
		// retry) until the lease's end.
		l := s.l[i]
		l.Exp.Lo = min(l.Exp.Lo, raw.Lo)
		if r.Renewed > 0 {
			l.Exp.Hi = min(l.Exp.Hi, sat(raw.Hi, Micros(r.Renewed+ExpirySlack)))
		}
		return []Next[LeaseState]{{S: s.with(l), At: at}}
	}
	if res.Out.(coordination.ReleaseOutcome) == coordination.Released && r.Renewed == 0 {
		if i < 0 {
			return nil
		}
		b := Before(at, s.l[i].Exp)
		if b.Empty() {
			return nil
		}
		return []Next[LeaseState]{{S: s.without(in.ID), At: b}}
	}
	// AlreadyReleased, NotOwned, or a concurrency lease's release (which
	// answers nil also when the entry had expired): the lease is over.
	return []Next[LeaseState]{{S: s.without(in.ID), At: at}}
}

// describe describes an operation for failure reports, with times in
// milliseconds within the minute.
func describe(c Call, r Result) string {
	return fmt.Sprintf("%T%+v -> %v @[%s, %s]", c.In, c.In, r, ms(c.At.Lo), ms(c.At.Hi))
}

func ms(t int64) string {
	if t == Never {
		return "never"
	}
	return fmt.Sprintf("%.3f", float64(t%60_000_000)/1000)
}
