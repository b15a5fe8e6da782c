package engine

import "github.com/coordkit/coordination/internal/slot"

// Names the external tests (package engine_test) use, for identifiers the
// package no longer exports.
var (
	CleanupAbandoned = cleanupAbandoned
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

// MarkKey is markKey, for the external tests.
func (e *Engine) MarkKey(full string) string { return e.markKey(full) }

// ErrorClass is the type of Classify's answer, for tables of them.
type ErrorClass = errorClass
