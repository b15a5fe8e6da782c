package main

import (
	"github.com/coordkit/coordination/internal/fencingcore"
	"github.com/coordkit/coordination/internal/idempotencycore"
	"github.com/coordkit/coordination/internal/latchcore"
	"github.com/coordkit/coordination/internal/layout"
	"github.com/coordkit/coordination/internal/leadercore"
	"github.com/coordkit/coordination/internal/lockcore"
	"github.com/coordkit/coordination/internal/ratelimitcore"
	"github.com/coordkit/coordination/internal/rwleasecore"
	"github.com/coordkit/coordination/internal/semaphorecore"
)

// primitiveLayouts are the stored layouts of the library's primitives, as each
// declares it (internal/<primitive>core): decode reads a key with the
// first one that fits (package layout). The order matters where layouts
// of one Redis type overlap: of the hashes, a legacy claim (a state
// field) before a leader's lease before any fencing lease, and field
// leases, which fit every hash, last.
var primitiveLayouts = []layout.Layout{
	// strings
	ratelimitcore.LimiterLayout,
	idempotencycore.ClaimLayout,
	lockcore.LockLayout,
	fencingcore.MovedLayout,
	fencingcore.CounterLayout,
	// hashes
	lockcore.FIFOAliveLayout,
	fencingcore.SharedLayout,
	idempotencycore.LegacyClaimLayout,
	leadercore.LeaseLayout,
	fencingcore.LeaseLayout,
	fencingcore.ValueLayout,
	latchcore.LatchLayout,
	ratelimitcore.CompositeLayout,
	lockcore.FieldLeasesLayout,
	// sorted sets
	lockcore.FIFOQueueLayout,
	semaphorecore.SemaphoreLayout,
	rwleasecore.LeaseLayout,
	ratelimitcore.ConcurrencyLayout,
	ratelimitcore.DenyListLayout,
	// sets
	ratelimitcore.DenyListSetLayout,
}

// decode says what s holds. It never panics (FuzzDecode).
func decode(s *layout.Snapshot) *layout.Report { return layout.Decode(s, primitiveLayouts) }
