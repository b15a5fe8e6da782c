package lincheck

import (
	"fmt"
	"time"
)

// Begin claims an idempotency key (input); the output is a [Begun].
type Begin struct {
	FP  string
	TTL time.Duration // the pending claim's TTL, and the result's
}

// Begun is the output of [Begin]: which state Begin answered, with the
// owner token of a Started claim, the result of a Completed one, and the
// remaining TTL of an InProgress one.
type Begun struct {
	State     string // "started", "completed", "in_progress", "mismatch", "failed"
	Owner     string
	Result    string
	Remaining time.Duration
}

// Complete stores Result for the claim of Owner (input); the output is a
// bool, stored.
type Complete struct {
	Owner, Result string
	TTL           time.Duration // the result's TTL (the claim's ttl)
}

// Abandon deletes the pending claim of Owner (input); the output is a
// bool, deleted.
type Abandon struct{ Owner string }

// Fail marks the pending claim of Owner failed (input); the output is a
// bool, marked.
type Fail struct{ Owner string }

// ClaimState is the state of the idempotency model for one key.
type ClaimState struct {
	Present   bool
	Completed bool
	Failed    bool   // marked by Fail: kept until its expiry, never claimable
	Owner     string // "" for a claim whose owner nobody learnt (an unknown Begin)
	FP        string
	Result    string
	Exp       Interval
}

func (s ClaimState) key() string { return fmt.Sprintf("%+v", s) }

// IdempotencySpec returns the model of one idempotency key: a Begin that
// finds no live claim starts one (Started, with a new owner), so exactly
// one Begin is Started per claim lifetime; one that finds a claim with
// another fingerprint answers mismatch, a completed claim its stored
// result (replays equal the stored result), a pending one InProgress with
// its remaining TTL, a failed one "failed" with its remaining TTL.
// Complete stores the result only for the live pending
// claim's owner (a re-send answers true again); Abandon deletes only that
// claim (a re-send answers false with the claim deleted); Fail marks only
// that claim failed, keeping its expiry (a re-send answers true again).
// A Begin with an
// unknown outcome may have left a claim nobody owns, until its TTL or the
// background abandon; a Complete or Abandon with an unknown outcome took
// effect or not.
func IdempotencySpec() Spec[ClaimState] {
	return Spec[ClaimState]{
		Init:     func() ClaimState { return ClaimState{Exp: Interval{Never, Never}} },
		Key:      ClaimState.key,
		Step:     claimStep,
		Describe: describe,
	}
}

func claimStep(s ClaimState, at Interval, c Call, r Result) []Next[ClaimState] {
	var out []Next[ClaimState]
	for _, k := range split(at, s.Exp) {
		cur := s
		if !k.Before {
			cur = ClaimState{Exp: Interval{Never, Never}} // expired
		}
		live := cur.Present
		switch in := c.In.(type) {
		case Begin:
			b, _ := r.Out.(Begun)
			switch {
			case !live:
				started := ClaimState{Present: true, Owner: b.Owner, FP: in.FP, Exp: expiry(c.At.Lo, c.At.Hi, in.TTL)}
				switch {
				case r.Unknown:
					started.Owner = ""
					started.Exp.Lo = c.At.Lo // the background abandon may end it at once
					out = append(out, Next[ClaimState]{S: cur, At: k.At}, Next[ClaimState]{S: started, At: k.At})
				case b.State == "started" && b.Owner != "":
					out = append(out, Next[ClaimState]{S: started, At: k.At})
				}
			case r.Unknown:
				out = append(out, Next[ClaimState]{S: cur, At: k.At})
			case cur.FP != in.FP:
				if b.State == "mismatch" {
					out = append(out, Next[ClaimState]{S: cur, At: k.At})
				}
			case cur.Completed:
				if b.State == "completed" && b.Result == cur.Result {
					out = append(out, Next[ClaimState]{S: cur, At: k.At})
				}
			default:
				// In progress (or failed): the remaining TTL is the claim's
				// expiry seen from the instant, in whole milliseconds.
				want := "in_progress"
				if cur.Failed {
					want = "failed"
				}
				rem := Micros(b.Remaining)
				n := Interval{max(k.At.Lo, cur.Exp.Lo-rem-1000), min(k.At.Hi, cur.Exp.Hi-rem+1000)}
				if b.State == want && !n.Empty() {
					out = append(out, Next[ClaimState]{S: cur, At: n})
				}
			}
		case Complete:
			mine := live && !cur.Completed && !cur.Failed && cur.Owner == in.Owner
			done := ClaimState{Present: true, Completed: true, Owner: cur.Owner, FP: cur.FP, Result: in.Result,
				Exp: expiry(c.At.Lo, c.At.Hi, in.TTL)}
			switch {
			case r.Unknown:
				out = append(out, Next[ClaimState]{S: cur, At: k.At})
				if mine {
					out = append(out, Next[ClaimState]{S: done, At: k.At})
				}
			case r.Out.(bool):
				if mine {
					out = append(out, Next[ClaimState]{S: done, At: k.At})
				}
			case !mine:
				out = append(out, Next[ClaimState]{S: cur, At: k.At})
			}
		case Fail:
			mine := live && !cur.Completed && !cur.Failed && cur.Owner == in.Owner
			failed := cur
			failed.Failed = true
			switch {
			case r.Unknown:
				out = append(out, Next[ClaimState]{S: cur, At: k.At})
				if mine {
					out = append(out, Next[ClaimState]{S: failed, At: k.At})
				}
			case r.Out.(bool):
				if mine || (live && cur.Failed && cur.Owner == in.Owner) { // or a re-send
					out = append(out, Next[ClaimState]{S: failed, At: k.At})
				}
			case !mine:
				out = append(out, Next[ClaimState]{S: cur, At: k.At})
			}
		case Abandon:
			mine := live && !cur.Completed && !cur.Failed && cur.Owner == in.Owner
			switch {
			case !r.Unknown && r.Out.(bool):
				if mine {
					out = append(out, Next[ClaimState]{S: ClaimState{Exp: Interval{Never, Never}}, At: k.At})
				}
			default:
				// Unknown, or false: nothing was deleted, or a re-send found
				// the claim its first send deleted.
				out = append(out, Next[ClaimState]{S: cur, At: k.At})
				if mine {
					out = append(out, Next[ClaimState]{S: ClaimState{Exp: Interval{Never, Never}}, At: k.At})
				}
			}
		default:
			panic(fmt.Sprintf("lincheck: idempotency model: unknown input %T", c.In))
		}
	}
	return out
}
