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

// ErrorClass is the type of Classify's answer, for tables of them.
type ErrorClass = errorClass
