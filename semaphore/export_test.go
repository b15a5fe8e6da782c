package semaphore

import "github.com/coordkit/coordination/internal/engine"

// What the external tests (package semaphore_test) reach of the package's
// room: its scripts (to load them, or to fault them by SHA) and its
// instruments.
var (
	AcquireScript = acquireScript
	RefreshScript = refreshScript
	VerifyScript  = verifyScript
	ReleaseScript = releaseScript
	AbandonScript = abandonScript
	ReadScript    = readScript

	LeaseMetrics = leaseMetrics

	// NoExpiryKind is the permits' lease kind accepting a TTL of 0 (a
	// permit without expiry, which the Semaphore refuses): the late-request
	// tests acquire one through the engine, with the same scripts.
	NoExpiryKind = &engine.LeaseKind{
		Primitive: kind.Primitive,
		AcquireOp: kind.AcquireOp, RenewOp: kind.RenewOp, VerifyOp: kind.VerifyOp, ReleaseOp: kind.ReleaseOp,
		Acquire: kind.Acquire, Refresh: kind.Refresh, Verify: kind.Verify, Release: kind.Release,
		Abandon: kind.Abandon, WaitFlag: kind.WaitFlag, NoExpiry: true,
		Metrics: kind.Metrics,
	}
)
