package semaphore

// What the external tests (package semaphore_test) reach of the package's
// room: its scripts (to load them, or to fault them by SHA) and its
// instruments.
var (
	AcquireScript = acquireScript
	RefreshScript = refreshScript
	VerifyScript  = verifyScript
	ReleaseScript = releaseScript
	ReadScript    = readScript

	LeaseMetrics = leaseMetrics
)
