// The stored layout of package rwlease, for coordctl inspect and repair
// (package layout): a read-write lease is one sorted set of "R:<token>"
// readers and "W:<token>" writers scored by their expiry in ms, and
// "Q:<token>" waiting writers and "R:<token>" waiting readers (phase-fair)
// scored by minus their expiry; an abandoned acquisition's tombstone is its
// member "R:<token>" or "W:<token>" scored -(expiry) - 0.5.

package rwleasecore

import (
	"math"
	"strings"

	"github.com/coordkit/coordination/internal/layout"
)

// LeaseLayout is a read-write lease's sorted set: the live readers,
// writer and waiting writers with their time left.
var LeaseLayout = layout.Layout{
	Kind: "rwlease",
	Type: "zset",
	Match: func(s *layout.Snapshot) bool {
		return s.AnyMember(func(m string) bool {
			return strings.HasPrefix(m, "R:") || strings.HasPrefix(m, "W:") || strings.HasPrefix(m, "Q:")
		})
	},
	Mixes:  "rwlease",
	Decode: decode,
}

func decode(s *layout.Snapshot, r *layout.Report) {
	now := float64(s.NowMs)
	readers, writer, waiting, waitingReaders, abandoned := 0, 0, 0, 0, 0
	for _, m := range s.ZSet {
		if len(m.Member) < 2 || m.Member[1] != ':' {
			r.Bad("member %q is not an rwlease member (R:, W: or Q: and a token)", m.Member)
			continue
		}
		kind, token := m.Member[:1], m.Member[2:]
		switch kind {
		case "R", "W":
			if m.Score < 0 && m.Score != math.Floor(m.Score) {
				// An abandoned acquisition's tombstone (rwlease_abandon):
				// scored -(expiry) - 0.5.
				if -m.Score <= now {
					continue
				}
				abandoned++
				r.Entries = append(r.Entries, layout.Entry{{K: "role", V: "tombstone of an abandoned acquisition"}, {K: "owner", V: layout.Tok(token)}, {K: "expires in", V: layout.ExpiresIn(s, math.Floor(-m.Score))}})
				continue
			}
			if kind == "R" && m.Score < 0 {
				if -m.Score <= now {
					continue
				}
				waitingReaders++
				r.Entries = append(r.Entries, layout.Entry{{K: "role", V: "waiting reader"}, {K: "owner", V: layout.Tok(token)}, {K: "expires in", V: layout.ExpiresIn(s, -m.Score)}})
				continue
			}
			if m.Score <= now {
				continue
			}
			role := "writer"
			if kind == "R" {
				role = "reader"
				readers++
			} else {
				writer++
			}
			r.Entries = append(r.Entries, layout.Entry{{K: "role", V: role}, {K: "owner", V: layout.Tok(token)}, {K: "expires in", V: layout.ExpiresIn(s, m.Score)}})
		case "Q":
			if -m.Score <= now {
				continue
			}
			waiting++
			r.Entries = append(r.Entries, layout.Entry{{K: "role", V: "waiting writer"}, {K: "owner", V: layout.Tok(token)}, {K: "expires in", V: layout.ExpiresIn(s, -m.Score)}})
		default:
			r.Bad("member %q is not an rwlease member (R:, W: or Q: and a token)", m.Member)
		}
	}
	r.Add("readers", readers)
	r.Add("writer", writer)
	r.Add("waiting writers", waiting)
	if waitingReaders > 0 {
		r.Add("waiting readers", waitingReaders)
	}
	if abandoned > 0 {
		r.Add("abandoned acquisitions", abandoned)
	}
	if writer > 1 || (writer == 1 && readers > 0) {
		r.Bad("a live writer with other live holders")
	}
}
