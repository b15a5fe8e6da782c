// Package leadercore holds what package leader declares for the engine
// and for coordctl: here, the stored layout of an election (package
// layout). A leader's lease is a fencing lease (fencingcore) whose key
// ends in "}:leader" and whose holder field is the leader's identity; its
// release mark is that lease's.
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

// LeaseMarkLayout is the release mark of a leader's lease. It goes before
// fencingcore.LeaseMarkLayout in a table.
var LeaseMarkLayout = layout.Layout{
	Kind: "leader (fencing lease)",
	Type: "hash",
	Mark: true,
	Match: func(s *layout.Snapshot) bool {
		lease, _ := layout.MarkedKey(s.Key)
		return strings.HasSuffix(lease, "}:leader") && fencingcore.LeaseMarkLayout.Match(s)
	},
	Decode: fencingcore.LeaseMarkLayout.Decode,
}
