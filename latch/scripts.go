package latch

import (
	"time"

	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/instrument"
)

// The latch's scripts, each next to its decoder, and its instruments. The
// layout is documented in latch_create.lua.
var (
	createScript    = engine.NewScript("latch_create", decodeCreate)
	joinScript      = engine.NewScript("latch_join", decodeJoin)
	countDownScript = engine.NewScript("latch_count_down", decodeCountDown)
	readScript      = engine.NewScript("latch_read", decodeRead)

	countDowns = instrument.New(instrument.Counter, "coordination.latch.count_downs", "{count_down}", "result",
		"Latch count-downs, by result (counted, completed, stale, not_found, broken).")
	waits = instrument.New(instrument.Histogram, "coordination.latch.wait", "s", "result",
		"Time spent in latch Wait, by result (completed, replaced, broken, gave_up, failed).")
)

// status is what a latch script found for the caller's generation.
type status int64

// The statuses, as the scripts send them.
const (
	statusCurrent  status = 1 // the caller's generation is current
	statusStale    status = 2 // the key holds another generation
	statusNotFound status = 3 // no latch at the key
	statusComplete status = 4 // count-down only: the generation is complete already
	statusBroken   status = 5 // the deadline passed with a count above 0
)

// createReply is the decoded reply of latch_create.
type createReply struct {
	Created  bool  // false: "create" found an existing latch, described by the rest
	Gen      int64 // generation number (>= 1)
	Count    int64
	Deadline int64 // server-time ms; 0 for none
}

// decodeCreate reads {ok, gen, count, deadline_ms, now}.
func decodeCreate(v any) (createReply, bool) {
	a, ok := decode.Ints(v, 5)
	if !ok || a[1] < 1 || a[2] < 0 || a[3] < 0 || a[4] <= 0 {
		return createReply{}, false
	}
	created, ok := decode.Bool01(a[0])
	return createReply{Created: created, Gen: a[1], Count: a[2], Deadline: a[3]}, ok
}

// joinReply is the decoded reply of latch_join: the current
// generation of a latch.
type joinReply struct {
	Found    bool
	ID       string
	Gen      int64
	Count    int64
	Initial  int64
	Deadline int64 // server-time ms; 0 for none
}

// decodeJoin reads false (no latch) or {id, gen, count, initial,
// deadline_ms, now}.
func decodeJoin(v any) (joinReply, bool) {
	if v == nil {
		return joinReply{}, true
	}
	a, ok := decode.Array(v, 6)
	if !ok {
		return joinReply{}, false
	}
	id, ok := decode.Str(a[0])
	if !ok || id == "" {
		return joinReply{}, false
	}
	n, ok := decode.Ints(a[1:], 5)
	if !ok || n[0] < 1 || n[1] < 0 || n[2] < 0 || n[1] > n[2] || n[3] < 0 || n[4] <= 0 {
		return joinReply{}, false
	}
	return joinReply{Found: true, ID: id, Gen: n[0], Count: n[1], Initial: n[2], Deadline: n[3]}, true
}

// countDownReply is the decoded reply of latch_count_down.
type countDownReply struct {
	Status    status
	Remaining int64 // statusCurrent: the count left; statusBroken: the count at which it broke
}

// decodeCountDown reads {status, remaining, now}.
func decodeCountDown(v any) (countDownReply, bool) {
	a, ok := decode.Ints(v, 3)
	if !ok || a[2] <= 0 {
		return countDownReply{}, false
	}
	r := countDownReply{Status: status(a[0]), Remaining: a[1]}
	switch r.Status {
	case statusCurrent:
		return r, r.Remaining >= 0
	case statusStale, statusNotFound, statusComplete:
		return r, r.Remaining == 0
	case statusBroken:
		return r, r.Remaining > 0
	}
	return countDownReply{}, false
}

// readReply is the decoded reply of latch_read.
type readReply struct {
	Status status // statusCurrent, statusStale, statusNotFound or statusBroken
	Count  int64
	// DeadlineIn is the time left before a current, incomplete generation
	// breaks; 0 when it has no deadline (or is complete).
	DeadlineIn time.Duration
}

// decodeRead reads {status, count, deadline_in_ms, now}.
func decodeRead(v any) (readReply, bool) {
	a, ok := decode.Ints(v, 4)
	if !ok || a[3] <= 0 {
		return readReply{}, false
	}
	r := readReply{Status: status(a[0]), Count: a[1]}
	switch r.Status {
	case statusCurrent:
		switch {
		case r.Count < 0 || a[2] < -1 || a[2] == 0:
			return readReply{}, false
		case a[2] > 0:
			r.DeadlineIn = decode.Scaled(a[2], time.Millisecond)
		}
		return r, true
	case statusStale, statusNotFound:
		return r, r.Count == 0 && a[2] == -1
	case statusBroken:
		return r, r.Count > 0 && a[2] == -1
	}
	return readReply{}, false
}
