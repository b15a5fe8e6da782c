package idempotency

// What the external tests (package idempotency_test) reach of the
// package's room: its scripts (to load them, or to fault them by SHA).
var (
	BeginScript    = beginScript
	CompleteScript = completeScript
	AbandonScript  = abandonScript
	FailScript     = failScript
)
