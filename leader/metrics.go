package leader

import (
	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/instrument"
)

// The elector's instruments, recorded by this package.
var (
	// proclaimScript sets the advertised identity of a term's lease and
	// wakes its observers (Term.Proclaim, and the announcement of a term).
	proclaimScript = engine.NewScript("leader_proclaim", decode.Bool01)
	leaderChanges  = instrument.New(instrument.Counter, "coordination.leader.changes", "{change}", "state",
		"Leadership changes seen by local electors: terms won (state=elected) and ended (state=revoked).")
	leaderAcquireFailures = instrument.New(instrument.Counter, "coordination.leader.acquire_failures", "{attempt}", "",
		"Campaign attempts that failed with an error (transient ones are retried).")
)
