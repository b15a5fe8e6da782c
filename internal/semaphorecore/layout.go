// The stored layout of package semaphore, for coordctl inspect and repair
// (package layout): a semaphore is one sorted set of "P:<n>:<token>"
// permits scored by their expiry in ms (+inf: no expiry), its capacity
// record "capacity" (scored -capacity), or "capacity-set" in its place
// when the capacity was set in the key (which then has no TTL), the
// "multi", "waiting" and "draining" records, and the tombstones of
// abandoned acquisitions (a permit's member scored in (-1, 0)).

package semaphorecore

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/coordkit/coordination/internal/layout"
)

// TombstoneScale is 2^43: the tombstone semaphore_abandon leaves of an
// abandoned acquisition's member is scored -(its expiry in ms) /
// TombstoneScale, in (-1, 0) (lua/semaphore_acquire.lua).
const TombstoneScale = 1 << 43

// TombstoneMaxMs bounds a tombstone's expiry: one expiring more than
// TombstoneMaxMs ms after the server's time is outside the layout (the
// scripts' fragment semaphore_state). semaphore_abandon writes one at most
// a minute (engine.CleanupLimit) ahead; the second minute is a margin for
// a server clock set back, or a replica's after a failover.
const TombstoneMaxMs = 120_000

// maxCapacity is semaphore.MaxCapacity, and latestMs the longest TTL a
// permit takes, in ms, rounded up (the scripts' bound on a permit's
// expiry: lua/fragments/semaphore_state.lua).
const (
	maxCapacity = 1<<53 - 1
	latestMs    = 9223372036855
)

// SemaphoreLayout is a semaphore's sorted set: its capacity, the live
// permits with their holders and time left, and whether a waiter is
// recorded. Permits without expiry get the repair command that lists
// them.
var SemaphoreLayout = layout.Layout{
	Kind: "semaphore",
	Type: "zset",
	Match: func(s *layout.Snapshot) bool {
		return s.AnyMember(func(m string) bool {
			return m == "capacity" || m == "capacity-set" || m == "multi" || m == "waiting" || strings.HasPrefix(m, "P:")
		})
	},
	Mixes:  "semaphore",
	Decode: decode,
}

func decode(s *layout.Snapshot, r *layout.Report) {
	now := float64(s.NowMs)
	var capacity, used int64
	holders, noExpiry, tombstones, waiters := 0, 0, 0, false
	var set, plain, draining bool // "capacity-set", "capacity" and "draining" are there
	// Every problem is reported, in one line: a verb checks only the
	// scores it reads, so a key may hold several that none has refused.
	var problems []string
	bad := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	for _, m := range s.ZSet {
		switch {
		case m.Member == "capacity" || m.Member == "capacity-set":
			if m.Score >= 0 || m.Score < -maxCapacity || m.Score != math.Trunc(m.Score) {
				bad("%s record scored %s: not minus a capacity in 1..2^53-1", m.Member, score(m.Score))
				continue
			}
			capacity = int64(-m.Score)
			set, plain = set || m.Member == "capacity-set", plain || m.Member == "capacity"
		case m.Member == "waiting" || m.Member == "multi" || m.Member == "draining":
			if m.Score >= 0 || math.IsInf(m.Score, -1) {
				bad("%s record scored %s: records score below 0 (and above -inf)", m.Member, score(m.Score))
			}
			waiters = waiters || m.Member == "waiting"
			draining = draining || m.Member == "draining"
		case strings.HasPrefix(m.Member, "P:"):
			n, token, ok := permit(m.Member)
			if !ok {
				bad("member %q is not P:<n>:<token>", m.Member)
				continue
			}
			if m.Score > -1 && m.Score < 0 {
				// The tombstone of an abandoned acquisition (semaphore_abandon):
				// no permit, in force until its expiry.
				until := math.Round(-m.Score * TombstoneScale)
				if until > now+TombstoneMaxMs {
					bad("tombstone %q scored %s: its expiry is over two minutes from now", m.Member, score(m.Score))
					continue
				}
				if until <= now {
					continue // expired, pruned by the next acquisition
				}
				tombstones++
				r.Entries = append(r.Entries, layout.Entry{{K: "permits", V: 0}, {K: "abandoned", V: layout.Tok(token)}, {K: "expires in", V: layout.ExpiresIn(s, until)}})
				continue
			}
			if !math.IsInf(m.Score, 1) && (m.Score < 0 || m.Score != math.Trunc(m.Score) || m.Score > now+latestMs) {
				bad("permit %q scored %s: not an expiry in whole ms within the longest TTL from now, nor +inf", m.Member, score(m.Score))
				continue
			}
			if m.Score <= now {
				continue // expired, pruned by the next acquisition
			}
			holders++
			used += n
			if math.IsInf(m.Score, 1) {
				noExpiry++
			}
			r.Entries = append(r.Entries, layout.Entry{{K: "permits", V: n}, {K: "owner", V: layout.Tok(token)}, {K: "expires in", V: layout.ExpiresIn(s, m.Score)}})
		default:
			bad("member %q is not a semaphore member", m.Member)
		}
	}
	r.Add("capacity", capacity)
	r.Add("used", used)
	free := max(capacity-used, 0)
	if draining {
		free = 0 // draining: nothing is granted
	}
	r.Add("free", free)
	r.Add("holders", holders)
	r.Add("without expiry", noExpiry)
	r.Add("notifies on release", waiters) // a contended attempt marked it
	if tombstones > 0 {
		// Only then: the report of a key without one reads as before.
		r.Add("tombstones", tombstones)
	}
	if set || draining {
		// Only when set (SetCapacity, Drain): the report of a semaphore
		// that never had one reads as before.
		r.Add("capacity set", set)
		r.Add("draining", draining)
	}
	switch {
	case set && plain:
		bad("both a capacity and a capacity-set record")
	case draining && !set:
		bad("a draining record without a capacity-set record")
	case capacity < 1:
		bad("no capacity record")
	}
	// The key's TTL follows its latest permit: none while a permit without
	// expiry is held; none at all while a capacity is set in the key.
	switch {
	case set && s.PTTL >= 0:
		bad("a capacity set in the key on a key with a TTL: the key's expiry will delete the setting")
	case set:
	case noExpiry > 0 && s.PTTL >= 0:
		bad("a permit without expiry on a key with a TTL: the key's expiry will delete it")
	case noExpiry == 0 && s.PTTL == -1:
		bad("no TTL and no permit without expiry: nothing will delete this key")
	}
	if noExpiry > 0 {
		r.Add("repair", repairHint(s))
	}
	if len(problems) > 0 {
		r.Bad("%s", strings.Join(problems, "; "))
	}
}

// score formats a score as a reply shows it, without an exponent for
// the whole numbers and fractions of ms a key may hold.
func score(v float64) string {
	if math.Abs(v) < 1e21 {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// permit splits a permit member "P:<n>:<token>" (n >= 1).
func permit(m string) (n int64, token string, ok bool) {
	parts := strings.SplitN(m, ":", 3)
	if len(parts) != 3 {
		return 0, "", false
	}
	n, err := strconv.ParseInt(parts[1], 10, 64)
	return n, parts[2], err == nil && n >= 1
}

// repairHint is the command that lists a semaphore's permits without
// expiry: its --key is the key without the --prefix it was read with.
func repairHint(s *layout.Snapshot) string {
	cmd := "coordctl repair semaphore"
	key := s.Key
	if s.Prefix != "" && strings.HasPrefix(key, s.Prefix) && len(key) > len(s.Prefix) {
		cmd += " --prefix " + layout.ShellQuote(s.Prefix)
		key = key[len(s.Prefix):]
	}
	return cmd + " --key " + layout.ShellQuote(key) + " --list"
}
