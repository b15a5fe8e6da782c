package engine

import "github.com/coordkit/coordination/internal/slot"

// Names the external tests (package engine_test) use, for identifiers the
// package no longer exports.
var (
	CleanupAbandoned = cleanupAbandoned
	GaveUp           = gaveUp
	MapError         = mapErr
	OutcomeOf        = outcomeOf
	SameSlot         = sameSlotKeys
	ScriptCode       = scriptCode
	Slot             = slot.Of
	Unsent           = isUnsent
)

const (
	MaxCleanups = maxCleanups
	NoError     = noError
)

// OwnScript is a script of source src, not from package lua: a test's
// own.
func OwnScript[R any](name, src string, decode func(any) (R, bool)) *Script[R] {
	return newScript(name, src, decode)
}

// ReadRaw is readRaw.
var ReadRaw = readRaw

// ErrorClass is the type of Classify's answer, for tables of them.
type ErrorClass = errorClass

// Confirmed reports whether w's subscription is confirmed.
func Confirmed(w *Watch) bool { return w.confirmed() }

// OperationDuration is the engine's operation histogram.
var OperationDuration = operationDuration
