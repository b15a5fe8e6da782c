// The stored layout of package fencing, for coordctl inspect and repair
// (package layout): a fencing lease is a hash {owner, fence} (and holder,
// for a leader) with the lease's TTL, its owner token followed by "+" once
// a contended attempt found it held (its release then notifies waiters); its fence counter a string holding
// the last fencing token (a canonical integer, never expiring) in the same
// hash tag; a fenced value (fencing.Guarded) a hash {fence, value}.

package fencingcore

import (
	"regexp"
	"strings"

	"github.com/coordkit/coordination/internal/layout"
)

// LeaseLayout is a fencing lease: a hash {owner, fence[, holder]} with
// the lease's TTL ("+" after the owner token once a waiter found it held),
// reported with the fence counter next to it.
var LeaseLayout = layout.Layout{
	Kind: "fencing lease",
	Type: "hash",
	Match: func(s *layout.Snapshot) bool {
		return s.Has("owner") || (s.Has("fence") && !s.Has("value"))
	},
	Decode: func(s *layout.Snapshot, r *layout.Report) {
		if !s.Has("owner", "fence") {
			r.Bad("a fencing lease hash lacks its owner or fence field")
			return
		}
		leaseFields(s, r)
		if s.PTTL == -1 {
			r.Bad("the lease has no TTL: it is held until deleted")
		}
		addSibling(s, r)
	},
}

// leaseFields adds a lease hash's owner (truncated, without the waiter
// mark), whether a waiter marked it, holder and fencing token, flagging a
// fence that is not a canonical integer.
func leaseFields(s *layout.Snapshot, r *layout.Report) {
	h := s.Hash
	r.Add("owner", layout.Tok(strings.TrimSuffix(h["owner"], "+")))
	r.Add("notifies on release", strings.HasSuffix(h["owner"], "+")) // a contended attempt marked it
	if holder, ok := h["holder"]; ok {
		r.Add("holder", holder)
	}
	r.Add("fencing token", h["fence"])
	if !layout.IsInt(h["fence"]) {
		r.Bad("the fence field is not a canonical integer")
	}
}

// ValueLayout is a fenced value (fencing.Guarded): a hash {fence,
// value}.
var ValueLayout = layout.Layout{
	Kind:  "fenced value",
	Type:  "hash",
	Match: func(s *layout.Snapshot) bool { return s.Has("fence", "value") },
	Decode: func(s *layout.Snapshot, r *layout.Report) {
		r.Add("fencing token", s.Hash["fence"])
		r.Add("value bytes", len(s.Hash["value"]))
	},
}

var reSignInt = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)

// CounterLayout is a fence counter: a string holding the last fencing
// token, a non-negative int64 that never expires, reported with the lease
// next to it.
var CounterLayout = layout.Layout{
	Kind:  "fence counter",
	Type:  "string",
	Match: func(s *layout.Snapshot) bool { return reSignInt.MatchString(s.Str) },
	Decode: func(s *layout.Snapshot, r *layout.Report) {
		v := s.Str
		r.Add("last fencing token", v)
		switch {
		case strings.HasPrefix(v, "-"):
			r.Bad("the counter is negative")
		case len(v) > 19 || (len(v) == 19 && v > "9223372036854775807"):
			r.Bad("the counter is beyond the int64 range")
		case s.PTTL != -1:
			r.Bad("the counter has a TTL: it must never expire (PERSIST it)")
		}
		addSibling(s, r)
	},
}

// addSibling reports the fence counter next to a fencing lease, or the
// lease next to a counter.
func addSibling(s *layout.Snapshot, r *layout.Report) {
	sib := s.Sibling
	if sib == nil {
		return
	}
	switch sib.Type {
	case "string":
		r.Add(s.SiblingRole, sib.Key+" = "+sib.Str)
	case "hash":
		r.Add(s.SiblingRole, sib.Key+" (held, token "+sib.Hash["fence"]+")")
	default:
		if len(s.SiblingTried) > 0 {
			r.Add(s.SiblingRole, "not found among "+strings.Join(s.SiblingTried, ", "))
		} else {
			r.Add(s.SiblingRole, sib.Key+" (none)")
		}
	}
}
