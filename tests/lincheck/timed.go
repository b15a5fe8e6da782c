package lincheck

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/engine"
)

// Checked histories of public operations under faults.
//
// [Do] records one call of a primitive's public API: its input, its
// wall-clock call and return times and its result, or, when it failed with
// an ambiguous error (coordination.IsAmbiguous: a lost reply, a cut
// connection, a timeout), an unknown outcome: the operation may or may not
// have taken effect, and the models consider both. A model built with
// [Spec] sees each operation as taking effect at one instant of server
// time that lies in an [Interval] (the call's wall-clock window widened by
// [Slack]; the servers run on this host, so their clock is the wall clock),
// never before the instant of the operation linearized before it; it may
// split that interval into cases (the lease had expired by then, or not)
// and return every state the system may be in after each. Times a model
// keeps (an expiry, a window's end) are intervals too, derived from the
// interval of the operation that set them, so that no history the real
// system can produce is rejected for want of exact times, while a
// violation that lasts longer than the uncertainty (a few milliseconds) is.

// Never is the end of an interval that never ends (a lease without expiry).
const Never = math.MaxInt64

// Slack widens every operation's wall-clock window on both sides: the
// server rounds its times to milliseconds and runs a script at its start
// time.
const Slack = 3 * time.Millisecond

// Ambiguity is how long after its return an operation whose outcome is
// unknown may still take effect: the faults injected never hold a command
// on its way to the server, so a command sent before the call returned ran
// then or never; this covers the scheduling of the server and the proxy.
// (Background cleanups that undo an ambiguous operation later only end
// what it may have created; models allow for them.)
const Ambiguity = 20 * time.Millisecond

// Interval is a closed interval of server time in microseconds since the
// Unix epoch: an instant known only to lie within [Lo, Hi]. Hi may be
// [Never]. It is empty when Lo > Hi.
type Interval struct{ Lo, Hi int64 }

// Empty reports whether no instant lies in i.
func (i Interval) Empty() bool { return i.Lo > i.Hi }

// Add returns i shifted by d microseconds (the expiry of something created
// within i with a TTL of d); a Never end stays Never.
func (i Interval) Add(lo, hi int64) Interval {
	return Interval{sat(i.Lo, lo), sat(i.Hi, hi)}
}

func sat(a, b int64) int64 {
	if a == Never || b == Never {
		return Never
	}
	return a + b
}

// Before returns the part of at during which an instant can precede t (p <
// t for some t in the interval), and After the part during which it can
// follow or equal it. Either may be empty.
func Before(at, t Interval) Interval { return Interval{at.Lo, min(at.Hi, t.Hi-1)} }

// After: see [Before].
func After(at, t Interval) Interval { return Interval{max(at.Lo, t.Lo), at.Hi} }

// Micros returns d in microseconds.
func Micros(d time.Duration) int64 { return d.Microseconds() }

// Call is a recorded operation's input as the models see it: the
// operation's own input and the interval its effect took place in.
type Call struct {
	In any
	// At is [call - Slack, return + Slack], the return extended by
	// Ambiguity when the outcome is unknown (µs).
	At Interval
	// Took is how long the call took (wall clock).
	Took time.Duration
}

// Result is a recorded operation's output: what the call returned, or an
// unknown outcome.
type Result struct {
	Out     any
	Unknown bool
	Err     error // the ambiguous error, when Unknown
}

// String describes the result: its value, or "unknown" with the error's class.
func (r Result) String() string {
	if r.Unknown {
		return "unknown (" + engine.Classify(r.Err).String() + ")"
	}
	return fmt.Sprint(r.Out)
}

// Do runs fn as client's operation with input in and records it in h:
// with its result when fn returns no error; with an unknown outcome when
// the error is ambiguous (coordination.IsAmbiguous). Any other error (the
// server refused: the operation had no effect) is recorded in
// [History.Failures] and not in the history. fn must turn the answers the
// model knows (refusals such as coordination.ErrNotAcquired) into outputs.
func Do[I, O any](h *History, client int, in I, fn func() (O, error)) (O, error) {
	call := time.Now()
	out, err := fn()
	ret := time.Now()
	took := ret.Sub(call)
	c := Call{In: in, At: Interval{call.UnixMicro() - Micros(Slack), ret.UnixMicro() + Micros(Slack)}, Took: took}
	r := Result{Out: out}
	retRel := ret.Sub(h.base).Microseconds()
	switch {
	case err == nil:
	case coordination.IsAmbiguous(err):
		r = Result{Unknown: true, Err: err}
		c.At.Hi += Micros(Ambiguity)
		retRel += Micros(Ambiguity)
	default:
		h.mu.Lock()
		h.failures = append(h.failures, fmt.Errorf("%v: %w", in, err))
		h.mu.Unlock()
		return out, err
	}
	h.mu.Lock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: c, Output: r,
		Call: call.Sub(h.base).Microseconds(), Return: retRel})
	if r.Unknown {
		h.unknown++
	}
	h.longest = max(h.longest, took)
	h.mu.Unlock()
	return out, err
}

// Failures returns the errors of the calls [Do] did not record: those that
// failed with a definite (not ambiguous) error.
func (h *History) Failures() []error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]error(nil), h.failures...)
}

// Unknown returns how many recorded operations have an unknown outcome.
func (h *History) Unknown() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.unknown
}

// Longest returns the longest call [Do] recorded during which one of the
// instants in around fell (any call when around is empty). A model places
// each operation at one instant; an operation that go-redis re-sent ran
// once per send, and when the sends are further apart than a TTL they may
// have had effects no single instant explains (a lease taken, expired and
// taken by another before the re-send): a history with a call longer than
// its shortest TTL during which a reply was lost (around: when) is set
// aside, not checked.
func (h *History) Longest(around ...time.Time) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(around) == 0 {
		return h.longest
	}
	var most time.Duration
	for _, o := range h.ops {
		c := o.Input.(Call)
		if c.Took <= most {
			continue
		}
		for _, t := range around {
			if us := t.UnixMicro(); us >= c.At.Lo && us <= c.At.Hi {
				most = c.Took
				break
			}
		}
	}
	return most
}

// Len returns the number of recorded operations.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}

// Next is one state a [Spec]'s step may lead to, with the part of the
// operation's interval in which it took effect for that state to follow.
type Next[S any] struct {
	S  S
	At Interval
}

// Spec is a sequential specification of a primitive with timed
// operations (see [Do]); [Spec.Model] turns it into a porcupine model.
type Spec[S any] struct {
	// Init returns the initial state.
	Init func() S
	// Step returns every state the system may be in after the operation
	// (c.In, r) took effect at an instant within at (at.Lo is never before
	// the previous operation's instant), with the part of at that leads to
	// each; none when the operation cannot have given r. r.Unknown: the
	// outcome is unknown, and the operation may have taken effect or not.
	// Step must not modify s.
	Step func(s S, at Interval, c Call, r Result) []Next[S]
	// Key returns a canonical encoding of a state: equal states, equal
	// keys.
	Key func(s S) string
	// Describe describes an operation (for failure reports).
	Describe func(c Call, r Result) string
}

// clocked is a model state with the instant of the last operation.
type clocked[S any] struct {
	now int64
	s   S
	key string
}

// Model returns the porcupine model of sp. Its state is the set of the
// states sp's system may be in, each with the instant of the last
// operation (instants never go backwards along a linearization). Of two
// cases that lead to the same state, the one with the earlier instant
// allows everything the other allows, so only it is kept: the set stays
// small however the intervals split.
func (sp Spec[S]) Model() porcupine.Model {
	return porcupine.Model{
		Init: func() any {
			s := sp.Init()
			return []clocked[S]{{now: math.MinInt64, s: s, key: sp.Key(s)}}
		},
		// The checker's context ends at its timeout (or once a partition
		// proved illegal): a step over a large set of states stops there,
		// not after the rest of the set (which once ran for tens of seconds
		// after a check had timed out, on a loaded machine).
		StepContext: func(ctx context.Context, state, input, output any) (bool, any) {
			set, c, r := state.([]clocked[S]), input.(Call), output.(Result)
			next := map[string]clocked[S]{}
			for _, st := range set {
				if ctx.Err() != nil {
					return false, nil
				}
				at := Interval{max(st.now, c.At.Lo), c.At.Hi}
				if at.Empty() {
					continue
				}
				for _, n := range sp.Step(st.s, at, c, r) {
					if n.At.Empty() || n.At.Lo < at.Lo || n.At.Hi > at.Hi {
						continue
					}
					k := sp.Key(n.S)
					if old, ok := next[k]; !ok || n.At.Lo < old.now {
						next[k] = clocked[S]{now: n.At.Lo, s: n.S, key: k}
					}
				}
			}
			if len(next) == 0 {
				return false, nil
			}
			out := make([]clocked[S], 0, len(next))
			for _, st := range next {
				out = append(out, st)
			}
			slices.SortFunc(out, func(a, b clocked[S]) int { return strings.Compare(a.key, b.key) })
			return true, out
		},
		Equal: func(a, b any) bool {
			return slices.EqualFunc(a.([]clocked[S]), b.([]clocked[S]), func(x, y clocked[S]) bool {
				return x.now == y.now && x.key == y.key
			})
		},
		Hash: func(state any) uint64 {
			h := fnv.New64a()
			for _, st := range state.([]clocked[S]) {
				_, _ = h.Write([]byte(st.key))
				_, _ = fmt.Fprint(h, st.now)
			}
			return h.Sum64()
		},
		DescribeOperation: func(in, out any) string {
			c, r := in.(Call), out.(Result)
			if sp.Describe != nil {
				return sp.Describe(c, r)
			}
			return fmt.Sprintf("%v -> %v @[%d, %d]", c.In, r, c.At.Lo, c.At.Hi)
		},
		DescribeState: func(state any) string {
			var keys []string
			for _, st := range state.([]clocked[S]) {
				keys = append(keys, st.key)
			}
			return strings.Join(keys, " | ")
		},
	}
}

// Check checks the history against a model built by [Spec.Model], for
// timeout at most, and returns the verdict. When it is not Ok it logs the
// end of the longest partial linearization (where the check got stuck)
// and the operations concurrent with it, and fails t.
func (h *History) CheckTimed(t interface {
	Logf(string, ...any)
	Errorf(string, ...any)
}, model porcupine.Model, timeout time.Duration) porcupine.CheckResult {
	ops := h.Operations()
	res := checkBounded(model, ops, timeout)
	if res == porcupine.Illegal {
		// Again, verbose (slower): where the check got stuck.
		_, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
		for _, part := range info.PartialLinearizationsOperations() {
			longest := []porcupine.Operation(nil)
			for _, p := range part {
				if len(p) > len(longest) {
					longest = p
				}
			}
			for _, o := range longest[max(0, len(longest)-10):] {
				t.Logf("  linearized: %s", model.DescribeOperation(o.Input, o.Output))
			}
		}
		for _, o := range ops {
			t.Logf("  history: client %d [%d, %d] %s", o.ClientId, o.Call, o.Return, model.DescribeOperation(o.Input, o.Output))
		}
		t.Errorf("history of %d operations is not linearizable against the model", len(ops))
	}
	return res
}

// checkBounded is porcupine.CheckOperationsTimeout, returning only once no
// checker goroutine runs the model any more. porcupine returns at the
// timeout (or at the first illegal partition) and cancels the others, which
// notice at their next step: a step of a large state can take a while on a
// loaded machine, and those goroutines then outlived the test (goleak). Here
// each step is counted; once the verdict is in, steps not yet begun return
// at once, and the call waits for the ones running.
func checkBounded(model porcupine.Model, ops []porcupine.Operation, timeout time.Duration) porcupine.CheckResult {
	var running atomic.Int64
	var over atomic.Bool
	step := model.StepContext
	if step == nil {
		plain := model.Step
		step = func(_ context.Context, state, input, output any) (bool, any) { return plain(state, input, output) }
	}
	model.StepContext = func(ctx context.Context, state, input, output any) (bool, any) {
		running.Add(1)
		defer running.Add(-1)
		if over.Load() {
			return false, state // the verdict is in: nothing reads this
		}
		return step(ctx, state, input, output)
	}
	res := porcupine.CheckOperationsTimeout(model, ops, timeout)
	over.Store(true)
	for running.Load() > 0 {
		time.Sleep(time.Millisecond)
	}
	return res
}
