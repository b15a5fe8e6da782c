package leader

import "github.com/coordkit/coordination/internal/instrument"

// The elector's instruments, recorded by this package.
var (
	leaderChanges = instrument.New(instrument.Counter, "coordination.leader.changes", "{change}", "state",
		"Leadership changes seen by local electors: terms won (state=elected) and ended (state=revoked).")
	leaderAcquireFailures = instrument.New(instrument.Counter, "coordination.leader.acquire_failures", "{attempt}", "",
		"Campaign attempts that failed with an error (transient ones are retried).")
)
