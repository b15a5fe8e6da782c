package lincheck

import (
	"fmt"
	"time"
)

// FencedAcquire takes the fencing-token lock (input); the output is a
// [FencedGrant]. Refresh, Verify and Release are the lease model's.
type FencedAcquire struct {
	ID  string
	TTL time.Duration
}

// FencedGrant is the output of [FencedAcquire]: granted, with its fencing
// token.
type FencedGrant struct {
	Granted bool
	Token   int64
}

// GuardedSet writes Value at the fenced resource with Token (input); the
// output is a [SetResult].
type GuardedSet struct {
	Token int64
	Value string
}

// SetResult is the output of [GuardedSet]: accepted, and the resource's
// token after the call.
type SetResult struct {
	Accepted bool
	Current  int64
}

// GuardedGet reads the fenced resource (input); the output is a
// [GetResult].
type GuardedGet struct{}

// GetResult is the output of [GuardedGet].
type GetResult struct {
	Found bool
	Token int64
	Value string
}

// FencedState is the state of the fenced-lock model: the lease, the
// counter's last value, and the resource's newest accepted write.
type FencedState struct {
	Lease   LeaseState
	Counter int64
	Fence   int64 // 0: never written
	Value   string
}

func (s FencedState) key() string {
	return fmt.Sprintf("%s|%d|%d|%q", s.Lease.key(), s.Counter, s.Fence, s.Value)
}

// FencedSpec returns the model of a fencing-token lock with a resource
// that checks tokens: the lease is a lock's (see [LeaseSpec]); each
// acquisition that finds the lease free draws the counter's next value,
// so granted tokens are exactly one more than the last drawn (an
// acquisition with an unknown outcome may have drawn one: a gap); the
// resource accepts a write whose token is at least the newest it
// accepted, and a read returns the newest accepted write.
func FencedSpec() Spec[FencedState] {
	lock := LeaseRules{Capacity: 1}
	return Spec[FencedState]{
		Init: func() FencedState { return FencedState{} },
		Key:  FencedState.key,
		Step: func(s FencedState, at Interval, c Call, r Result) []Next[FencedState] {
			var out []Next[FencedState]
			switch in := c.In.(type) {
			case FencedAcquire:
				a := Acquire{ID: in.ID, TTL: in.TTL}
				lr := Result{Unknown: r.Unknown}
				if !r.Unknown {
					g := r.Out.(FencedGrant)
					lr.Out = g.Granted
					if g.Granted && g.Token != s.Counter+1 {
						return nil
					}
				}
				for _, n := range lock.step(s.Lease, at, Call{In: a, At: c.At, Took: c.Took}, lr) {
					next := s
					next.Lease = n.S
					// The lease is (or may be) new: the counter was drawn.
					if n.S.find(in.ID) >= 0 {
						next.Counter++
					}
					out = append(out, Next[FencedState]{S: next, At: n.At})
				}
			case Refresh, Verify, Release:
				for _, n := range lock.step(s.Lease, at, c, r) {
					next := s
					next.Lease = n.S
					out = append(out, Next[FencedState]{S: next, At: n.At})
				}
			case GuardedSet:
				ok := in.Token >= s.Fence
				written := s
				written.Fence, written.Value = in.Token, in.Value
				switch {
				case r.Unknown:
					out = append(out, Next[FencedState]{S: s, At: at})
					if ok {
						out = append(out, Next[FencedState]{S: written, At: at})
					}
				case r.Out.(SetResult).Accepted:
					if ok && r.Out.(SetResult).Current == in.Token {
						out = append(out, Next[FencedState]{S: written, At: at})
					}
				default:
					if !ok && r.Out.(SetResult).Current == s.Fence {
						out = append(out, Next[FencedState]{S: s, At: at})
					}
				}
			case GuardedGet:
				g, _ := r.Out.(GetResult)
				if r.Unknown || g == (GetResult{Found: s.Fence > 0, Token: s.Fence, Value: s.Value}) || (s.Fence == 0 && !g.Found) {
					out = append(out, Next[FencedState]{S: s, At: at})
				}
			default:
				panic(fmt.Sprintf("lincheck: fenced model: unknown input %T", c.In))
			}
			return out
		},
		Describe: describe,
	}
}
