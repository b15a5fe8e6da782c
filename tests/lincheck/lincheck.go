// Package lincheck records histories of operations made by several clients
// at once and checks them with porcupine against sequential models.
//
// Two kinds of history. [Record] records script calls whose outputs carry
// the server time the script ran at, which must fall within the call's
// wall-clock window (the test servers run on this host), so that a model
// can decide expiries from the recorded times: the linearizability checks
// of the semaphore's and the read-write lease's scripts. [Do] records calls
// of the primitives' public APIs, whose outputs carry no time, including
// calls whose outcome is unknown (an ambiguous error); models built with
// [Spec] place each operation at an instant known within an interval and
// consider every case the uncertainty allows. The models of every primitive
// (lease.go, fenced.go, latch.go, idempotency.go, rate.go) are of that kind;
// tests/history runs them on real servers under faults.
package lincheck

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// History is a porcupine history recorded from several clients at once.
// Its functions are safe for concurrent use. Create it with [New].
type History struct {
	base time.Time
	mu   sync.Mutex
	ops  []porcupine.Operation

	// Of Do's records (timed.go).
	failures []error
	unknown  int
	longest  time.Duration
}

// New returns an empty history whose times count from now.
func New() *History { return &History{base: time.Now()} }

// Record runs call as client with input in and records it with its call
// and return times, when it succeeds. now returns the server time (ms) an
// output reports; Record fails t (without stopping it) when that time is
// outside the call's wall-clock window, give or take 5 ms, or when call
// returns an error (then nothing is recorded and ok is false).
func Record[I, O any](t testing.TB, h *History, client int, in I, now func(O) int64, call func() (O, error)) (out O, ok bool) {
	start := time.Since(h.base).Nanoseconds()
	wallCall := time.Now().UnixMilli()
	out, err := call()
	ret := time.Since(h.base).Nanoseconds()
	wallRet := time.Now().UnixMilli()
	if err != nil {
		t.Errorf("%v: %v", in, err)
		return out, false
	}
	if n := now(out); n < wallCall-5 || n > wallRet+5 {
		t.Errorf("server time %d outside the call's wall-clock window [%d, %d]", n, wallCall, wallRet)
	}
	h.mu.Lock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: start, Output: out, Return: ret})
	h.mu.Unlock()
	return out, true
}

// Operations returns the recorded operations, in the order recorded.
func (h *History) Operations() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.ops)
}

// Check checks the history against model (for a minute at most) and
// returns porcupine's verdict and how long it took. When the history is
// not linearizable it logs the last steps of the longest partial
// linearization, where the check got stuck, and fails t.
func (h *History) Check(t testing.TB, model porcupine.Model) (porcupine.CheckResult, time.Duration) {
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(model, h.Operations(), time.Minute)
	took := time.Since(start)
	if res != porcupine.Ok {
		for _, part := range info.PartialLinearizationsOperations() {
			longest := slices.MaxFunc(part, func(a, b []porcupine.Operation) int { return len(a) - len(b) })
			for _, o := range longest[max(0, len(longest)-8):] {
				t.Logf("  linearized: %s", model.DescribeOperation(o.Input, o.Output))
			}
		}
		t.Errorf("history is not linearizable against the model: %v", res)
	}
	return res, took
}
