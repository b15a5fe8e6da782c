// The stored layout of package fencing, for coordctl inspect and repair
// (package layout): a fencing lease is a hash {owner, fence} (and holder,
// for a leader) with the lease's TTL, its owner token followed by "+" once
// a contended attempt found it held (its release then notifies waiters).
// Its fence counter (since issue 24) is a field of the shared counter hash
// of its Cluster slot (SharedKeyOf; fields: the full counter key names,
// values: the last fencing tokens, canonical integers; the hash never
// expires); before, a string at the counter key, which the first
// acquisition folds in and replaces by the tombstone "moved" for 7 days.
// The cleanup of an ambiguous acquisition leaves a tombstone: the hash
// {owner: a tombstone list} alone, with a TTL (fencing_abandon.lua); the
// list is one to 8 abandoned owner tokens, oldest first, each followed by
// "!" ("tokA!", or "tokA!tokB!" when two acquisitions were abandoned close
// together).
// A fenced value (fencing.Guarded) is a hash {fence, value}.

package fencingcore

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

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
		if toks := tombstone(s.Hash); toks != nil {
			// Prose in the text; in JSON (machine values) an empty owner,
			// state "tombstone" and the tokens as a list.
			for i, t := range toks {
				toks[i] = layout.Tok(t)
			}
			r.Add("owner", layout.Split{Text: "none (free): the tombstone of an abandoned acquisition", JSON: ""})
			r.Add("state", layout.Split{Text: layout.Omitted, JSON: "tombstone"})
			if len(toks) == 1 {
				r.Add("abandoned token", layout.Split{Text: toks[0], JSON: layout.Omitted})
			} else {
				r.Add("abandoned tokens", layout.Split{Text: strings.Join(toks, " "), JSON: layout.Omitted})
			}
			r.Add("abandoned tokens", layout.Split{Text: layout.Omitted, JSON: toks})
			if s.PTTL == -1 {
				r.Bad("the tombstone has no TTL: DEL it")
			}
			addSibling(s, r)
			return
		}
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

// tombstone returns the abandoned owner tokens, oldest first, when the
// lease hash h is the tombstone of abandoned acquisitions
// (fencing_abandon.lua): an owner field alone, holding a tombstone list
// (layout.Tombstones). It returns nil for anything else.
func tombstone(h map[string]string) []string {
	if len(h) != 1 {
		return nil
	}
	return layout.Tombstones(h["owner"])
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
	if since, ok := h["since"]; ok {
		if ms, err := strconv.ParseInt(since, 10, 64); err == nil && ms > 0 {
			r.Add("term start", time.UnixMilli(ms).UTC().Format(time.RFC3339Nano))
		} else {
			r.Add("term start", since)
			r.Bad("the since field is not a time in milliseconds")
		}
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

// SharedLayout is a shared counter hash: one field per fenced name of a
// Cluster slot (the full counter key), holding its last fencing token; it
// never expires. It goes before the other hash layouts in a table.
var SharedLayout = layout.Layout{
	Kind:  "fence counters",
	Type:  "hash",
	Match: func(s *layout.Snapshot) bool { return strings.Contains(s.Key, SharedBase) && !s.Has("owner") },
	Decode: func(s *layout.Snapshot, r *layout.Report) {
		r.Add("fenced names", s.HashLen)
		names := make([]string, 0, len(s.Hash))
		for f := range s.Hash {
			names = append(names, f)
		}
		slices.Sort(names)
		for _, f := range names {
			v := s.Hash[f]
			if !validCounter(v) {
				r.Bad("the counter of %q is not a canonical integer in the int64 range", f)
			}
			r.Entries = append(r.Entries, layout.Entry{{K: "counter key", V: f}, {K: "last fencing token", V: v}})
		}
		if s.PTTL != -1 {
			r.Bad("the shared counter hash has a TTL: it must never expire (PERSIST it)")
		}
	},
}

// validCounter reports whether v is a canonical integer in 0..MaxInt64.
func validCounter(v string) bool {
	return reSignInt.MatchString(v) && !strings.HasPrefix(v, "-") &&
		(len(v) < 19 || (len(v) == 19 && v <= "9223372036854775807"))
}

// MovedLayout is an earlier layout's counter key after the first
// acquisition of this layout folded it into the shared counter hash: the
// string "moved" with a TTL (7 days), which earlier versions refuse.
var MovedLayout = layout.Layout{
	Kind:  "moved fence counter",
	Type:  "string",
	Match: func(s *layout.Snapshot) bool { return s.Str == "moved" },
	Decode: func(s *layout.Snapshot, r *layout.Report) {
		shared := SharedKeyOf(s.Prefix, s.Key)
		r.Add("moved to", "field "+s.Key+" of "+shared)
		if s.Shared != "" {
			r.Add("last fencing token", s.SharedValue)
		} else {
			r.Add("last fencing token", "none (retired, or the hash is missing): the next acquisition draws 1")
		}
		if s.PTTL == -1 {
			r.Bad("the tombstone has no TTL: it would stay forever (earlier versions are refused while it stays)")
		}
	},
}

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
		if s.Shared != "" {
			r.Add("stored in", "field of "+s.Shared)
		} else {
			r.Add("stored in", "a key of its own (the earlier layout): the next acquisition folds it into "+SharedKeyOf(s.Prefix, s.Key))
		}
		switch {
		case strings.HasPrefix(v, "-"):
			r.Bad("the counter is negative")
		case len(v) > 19 || (len(v) == 19 && v > "9223372036854775807"):
			r.Bad("the counter is beyond the int64 range")
		case s.PTTL != -1 && s.Shared != "":
			r.Bad("the shared counter hash %s has a TTL: it must never expire (PERSIST it)", s.Shared)
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
		if tombstone(sib.Hash) != nil {
			r.Add(s.SiblingRole, sib.Key+" (free: the tombstone of an abandoned acquisition)")
			break
		}
		r.Add(s.SiblingRole, sib.Key+" (held, token "+sib.Hash["fence"]+")")
	default:
		if len(s.SiblingTried) > 0 {
			r.Add(s.SiblingRole, "not found among "+strings.Join(s.SiblingTried, ", "))
		} else {
			r.Add(s.SiblingRole, sib.Key+" (none)")
		}
	}
}
