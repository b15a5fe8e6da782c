// Package leadercore holds what package leader declares for the engine
// and for coordctl: here, the stored layout of an election (package
// layout). A leader's lease is a fencing lease (fencingcore) whose key
// ends in "}:leader" and whose holder field is the leader's identity.
package leadercore

import (
	"strings"

	"github.com/coordkit/coordination/internal/fencingcore"
	"github.com/coordkit/coordination/internal/layout"
)

// LeaseLayout is a leader's lease: a fencing lease at a key ending in
// "}:leader". It goes before fencingcore.LeaseLayout in a table.
var LeaseLayout = layout.Layout{
	Kind: "leader",
	Type: "hash",
	Match: func(s *layout.Snapshot) bool {
		return strings.HasSuffix(s.Key, "}:leader") && fencingcore.LeaseLayout.Match(s)
	},
	Decode: fencingcore.LeaseLayout.Decode,
}
