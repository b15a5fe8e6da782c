// The stored layout of package idempotency, for coordctl inspect and
// repair (package layout): a claim is one string with a TTL,
//
//	pending    "P" <result ttl> ":" <fence> ":" <owner> ":" <fp>
//	completed  "C" <completion id> ":" <fp> <result>
//	abandoned  "A" <fence> ":" <abandon id>   (kept 5 s: a free key)
//	failed     "F" <fence> ":" <fail id> ":" <fp>  (the work failed, outcome unknown)
//
// fp is "-:" or <len> ":" <bytes>. Claims of earlier releases are hashes
// {state, owner, ttl, fp, result, done}: the library no longer reads them.

package idempotencycore

import (
	"encoding/binary"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/coordkit/coordination/internal/layout"
)

var (
	// reAbandoned is the start of an abandoned claim: "A" <fence> ":".
	reAbandoned = regexp.MustCompile(`^A[0-9]+:`)
	// reFailed is the start of a failed claim: "F" <fence> ":" <fail id> ":".
	reFailed = regexp.MustCompile(`^F[1-9][0-9]{0,15}:[^:]+:`)
	// reFence is a claim's fence as the scripts accept it.
	reFence = regexp.MustCompile(`^[1-9][0-9]{0,15}$`)
)

// ClaimLayout is a claim: its state (pending, completed, abandoned or failed),
// fencing token, owner, fingerprint and, once completed, the result's
// size and HTTP status (a middleware's result).
var ClaimLayout = layout.Layout{
	Kind: "idempotency claim",
	Type: "string",
	Match: func(s *layout.Snapshot) bool {
		v := s.Str
		switch {
		case strings.HasPrefix(v, "P") && strings.Count(v, ":") >= 2:
			return layout.IsInt(v[1:strings.IndexByte(v, ':')])
		case strings.HasPrefix(v, "C"):
			_, _, ok := completion(v)
			return ok
		}
		return reAbandoned.MatchString(v) || reFailed.MatchString(v)
	},
	Decode: decodeClaim,
}

func decodeClaim(s *layout.Snapshot, r *layout.Report) {
	v := s.Str
	switch v[0] {
	case 'P':
		parts := strings.SplitN(v[1:], ":", 4)
		ttl, _ := strconv.ParseInt(parts[0], 10, 64)
		r.Add("state", "pending")
		if len(parts) < 4 || !reFence.MatchString(parts[1]) {
			r.Bad("a pending claim without a valid fence (P<result ttl>:<fence>:<owner>:<fp>): the library fails on it with ErrBadState (a claim of the layout before fences is one); delete it with coordctl repair claim, or let it expire")
			return
		}
		r.Add("fencing token", parts[1])
		if parts[2] == "" {
			r.Bad("a pending claim without an owner")
			return
		}
		r.Add("owner", layout.Tok(parts[2]))
		r.Add("result ttl", time.Duration(ttl)*time.Millisecond)
		fp, _, ok := fingerprint(parts[3])
		if !ok {
			r.Bad("a bad fingerprint")
			return
		}
		r.Add("fingerprint", fp)
	case 'F':
		parts := strings.SplitN(v[1:], ":", 3) // Match took "F<fence>:<id>:"
		r.Add("state", "failed")
		r.Add("fencing token", parts[0])
		r.Add("fail id", layout.Tok(parts[1]))
		r.Add("next claim", "none until it expires or is forgotten (the work's outcome is unknown)")
		fp, _, ok := fingerprint(parts[2])
		if !ok {
			r.Bad("a bad fingerprint")
			return
		}
		r.Add("fingerprint", fp)
	case 'A':
		fence, id, _ := strings.Cut(v[1:], ":")
		r.Add("state", "abandoned")
		if !reFence.MatchString(fence) {
			r.Bad("an abandoned claim without a valid fence: the library fails on it with ErrBadState")
			return
		}
		r.Add("fencing token", fence)
		r.Add("abandon id", layout.Tok(id))
		r.Add("next claim", "free: the next Begin takes it, with a larger fencing token")
		if s.PTTL == -1 {
			r.Bad("an abandoned claim lasts 5 s; this one has no TTL")
		}
		return
	default:
		r.Add("state", "completed")
		id, rest, _ := completion(v) // Match took it
		r.Add("completion", layout.Tok(id))
		fp, res, ok := fingerprint(rest)
		if !ok {
			r.Bad("a bad fingerprint")
			return
		}
		r.Add("fingerprint", fp)
		size := int64(len(res)) + s.StrLen - int64(len(v))
		r.Add("result bytes", size)
		if st, ok := httpStatus(res); ok {
			r.Add("status", st)
		}
	}
	claimTTL(s, r)
}

// claimTTL flags a claim without a TTL.
func claimTTL(s *layout.Snapshot, r *layout.Report) {
	if s.PTTL == -1 {
		r.Bad("a claim always has a TTL; this one has none")
	}
}

// fingerprint splits "-:" or "<len>:<bytes>" off s: what a report shows
// of it, and the rest of s.
func fingerprint(s string) (shown string, rest string, ok bool) {
	if strings.HasPrefix(s, "-:") {
		return "none", s[2:], true
	}
	i := strings.IndexByte(s, ':')
	if i <= 0 {
		return "", "", false
	}
	n, err := strconv.Atoi(s[:i])
	if err != nil || n < 0 || n > len(s)-i-1 { // (i+1+n overflows for n near 2^63)
		return "", "", false
	}
	return fmt.Sprintf("present (%d bytes)", n), s[i+1+n:], true
}

// ClaimResult returns the result stored in the claim value v. When v is
// not a completed claim, or its fingerprint is malformed, result is "" and
// instead says what v is: "abandoned", "failed", "pending" (anything
// else that is not completed) or "bad fingerprint".
func ClaimResult(v string) (result, instead string) {
	switch {
	case strings.HasPrefix(v, "A"):
		return "", "abandoned"
	case strings.HasPrefix(v, "F"):
		return "", "failed"
	}
	_, rest, ok := completion(v)
	if !ok {
		return "", "pending"
	}
	_, res, ok := fingerprint(rest)
	if !ok {
		return "", "bad fingerprint"
	}
	return res, ""
}

// completion splits a completed claim "C" <completion id> ":" ... into
// the completion id (an owner token: 22 bytes, or the 36 of earlier
// versions) and what follows the ':'.
func completion(v string) (id, rest string, ok bool) {
	if !strings.HasPrefix(v, "C") {
		return "", "", false
	}
	id, rest, ok = strings.Cut(v[1:], ":")
	if !ok || (len(id) != 22 && len(id) != 36) {
		return "", "", false
	}
	return id, rest, true
}

// httpStatus reads the status of a response stored by the idempotency
// middleware (version byte 1, then the status as a uvarint), if the
// result is one.
func httpStatus(res string) (int, bool) {
	if len(res) < 2 || res[0] != 1 {
		return 0, false
	}
	v, n := binary.Uvarint([]byte(res[1:min(len(res), 12)]))
	if n <= 0 || v < 100 || v > 999 {
		return 0, false
	}
	return int(v), true
}

// LegacyClaimForm is the "layout" field of a report of a claim in the
// hash layout of earlier releases (LegacyClaimLayout).
const LegacyClaimForm = "hash (earlier releases; no longer read)"

// LegacyClaimLayout is a claim of the hash layout {state, owner, ttl, fp,
// result, done} of releases before the string layout: always corrupt
// (every operation of the library on it fails with ErrBadState (wrong Redis type) and
// changes nothing), with the repair command that deletes it. It goes
// before the other hash layouts of a table.
var LegacyClaimLayout = layout.Layout{
	Kind:  ClaimLayout.Kind,
	Type:  "hash",
	Match: func(s *layout.Snapshot) bool { return s.Has("state") },
	Decode: func(s *layout.Snapshot, r *layout.Report) {
		h := s.Hash
		r.Add("layout", LegacyClaimForm)
		r.Add("state", h["state"])
		if h["state"] == "pending" {
			r.Add("owner", layout.Tok(h["owner"]))
		}
		if fp, ok := h["fp"]; ok {
			r.Add("fingerprint", fmt.Sprintf("present (%d bytes)", len(fp)))
		} else {
			r.Add("fingerprint", "none")
		}
		if h["state"] == "completed" {
			r.Add("result bytes", len(h["result"]))
			if st, ok := httpStatus(h["result"]); ok {
				r.Add("status", st)
			}
		}
		// First: it says what to do with the key.
		r.Add("repair", "coordctl repair claim --key KEY")
		r.Bad("a claim of the hash layout of earlier releases: the library no longer reads it (ErrBadState, wrong Redis type); delete it with coordctl repair claim, or let it expire")
		if h["state"] != "pending" && h["state"] != "completed" {
			r.Bad("state %q is neither pending nor completed", h["state"])
		}
		claimTTL(s, r)
	},
}
