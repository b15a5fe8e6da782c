package latch

// What the external tests (package latch_test) reach of the package's
// room: its scripts (to load them, or to fault them by SHA) and its
// instruments.
var (
	CreateScript    = createScript
	JoinScript      = joinScript
	CountDownScript = countDownScript
	ReadScript      = readScript

	CountDowns = countDowns
	Waits      = waits
)
