package engine

import "time"

// Scripts of the countdown latch (package latch), each next to its
// decoder. The layout is documented in latch_create.lua.
var (
	LatchCreate    = NewScript("latch_create", decodeLatchCreate)
	LatchJoin      = NewScript("latch_join", decodeLatchJoin)
	LatchCountDown = NewScript("latch_count_down", decodeLatchCountDown)
	LatchRead      = NewScript("latch_read", decodeLatchRead)
)

// LatchStatus is what a latch script found for the caller's generation.
type LatchStatus int64

// The statuses, as the scripts send them.
const (
	LatchCurrent  LatchStatus = 1 // the caller's generation is current
	LatchStale    LatchStatus = 2 // the key holds another generation
	LatchNotFound LatchStatus = 3 // no latch at the key
	LatchComplete LatchStatus = 4 // count-down only: the generation is complete already
	LatchBroken   LatchStatus = 5 // the deadline passed with a count above 0
)

// LatchCreated is the decoded reply of latch_create.
type LatchCreated struct {
	Created  bool  // false: "create" found an existing latch, described by the rest
	Gen      int64 // generation number (>= 1)
	Count    int64
	Deadline int64 // server-time ms; 0 for none
}

// decodeLatchCreate reads {ok, gen, count, deadline_ms, now}.
func decodeLatchCreate(v any) (LatchCreated, bool) {
	a, ok := Ints(v, 5)
	if !ok || a[1] < 1 || a[2] < 0 || a[3] < 0 || a[4] <= 0 {
		return LatchCreated{}, false
	}
	created, ok := Bool01(a[0])
	return LatchCreated{Created: created, Gen: a[1], Count: a[2], Deadline: a[3]}, ok
}

// LatchGeneration is the decoded reply of latch_join: the current
// generation of a latch.
type LatchGeneration struct {
	Found    bool
	ID       string
	Gen      int64
	Count    int64
	Initial  int64
	Deadline int64 // server-time ms; 0 for none
}

// decodeLatchJoin reads false (no latch) or {id, gen, count, initial,
// deadline_ms, now}.
func decodeLatchJoin(v any) (LatchGeneration, bool) {
	if v == nil {
		return LatchGeneration{}, true
	}
	a, ok := Array(v, 6)
	if !ok {
		return LatchGeneration{}, false
	}
	id, ok := Str(a[0])
	if !ok || id == "" {
		return LatchGeneration{}, false
	}
	n, ok := Ints(a[1:], 5)
	if !ok || n[0] < 1 || n[1] < 0 || n[2] < 0 || n[1] > n[2] || n[3] < 0 || n[4] <= 0 {
		return LatchGeneration{}, false
	}
	return LatchGeneration{Found: true, ID: id, Gen: n[0], Count: n[1], Initial: n[2], Deadline: n[3]}, true
}

// LatchCount is the decoded reply of latch_count_down.
type LatchCount struct {
	Status    LatchStatus
	Remaining int64 // LatchCurrent: the count left; LatchBroken: the count at which it broke
}

// decodeLatchCountDown reads {status, remaining, now}.
func decodeLatchCountDown(v any) (LatchCount, bool) {
	a, ok := Ints(v, 3)
	if !ok || a[2] <= 0 {
		return LatchCount{}, false
	}
	r := LatchCount{Status: LatchStatus(a[0]), Remaining: a[1]}
	switch r.Status {
	case LatchCurrent:
		return r, r.Remaining >= 0
	case LatchStale, LatchNotFound, LatchComplete:
		return r, r.Remaining == 0
	case LatchBroken:
		return r, r.Remaining > 0
	}
	return LatchCount{}, false
}

// LatchState is the decoded reply of latch_read.
type LatchState struct {
	Status LatchStatus // LatchCurrent, LatchStale, LatchNotFound or LatchBroken
	Count  int64
	// DeadlineIn is the time left before a current, incomplete generation
	// breaks; 0 when it has no deadline (or is complete).
	DeadlineIn time.Duration
}

// decodeLatchRead reads {status, count, deadline_in_ms, now}.
func decodeLatchRead(v any) (LatchState, bool) {
	a, ok := Ints(v, 4)
	if !ok || a[3] <= 0 {
		return LatchState{}, false
	}
	r := LatchState{Status: LatchStatus(a[0]), Count: a[1]}
	switch r.Status {
	case LatchCurrent:
		switch {
		case r.Count < 0 || a[2] < -1 || a[2] == 0:
			return LatchState{}, false
		case a[2] > 0:
			r.DeadlineIn = Scaled(a[2], time.Millisecond)
		}
		return r, true
	case LatchStale, LatchNotFound:
		return r, r.Count == 0 && a[2] == -1
	case LatchBroken:
		return r, r.Count > 0 && a[2] == -1
	}
	return LatchState{}, false
}
