// The stored layout of package ratelimit, for coordctl inspect and repair
// (package layout): the fixed-window, sliding-window, token-bucket and
// GCRA limiters, throttles and sliding logs keep one string
// "<a>:<settings>|<state>|..." with a TTL (a is f, s, b, g, t or l; a fixed window's settings may end in its
// alignment, ":e" or ":<period>:<zone>"); a composite limiter one hash, "c" naming its
// components and a field per component's state; a concurrency limiter one
// sorted set of "<permits>:<token>" leases scored by their expiry in ms
// and its limit record "#" (scored -limit); a deny list one sorted set of
// identities scored with the end of their denial (ms; +inf: without end)
// that never expires.

package ratelimitcore

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/coordkit/coordination/internal/layout"
)

// kindLimiter is the kind of every limiter's state.
const kindLimiter = "rate limiter"

// LimiterLayout is a fixed-window, sliding-window, token-bucket, GCRA,
// throttle or sliding-log limiter's string: its algorithm, settings and what is left now (for a
// token bucket and GCRA, computed at the snapshot's server time).
var LimiterLayout = layout.Layout{
	Kind: kindLimiter,
	Type: "string",
	Match: func(s *layout.Snapshot) bool {
		v := s.Str
		return len(v) > 2 && v[1] == ':' && strings.ContainsRune("fsbgtl", rune(v[0]))
	},
	Decode: decodeString,
}

func decodeString(s *layout.Snapshot, r *layout.Report) {
	parts := strings.Split(s.Str, "|")
	set := strings.Split(parts[0], ":")
	num := func(x string) (int64, bool) {
		n, err := strconv.ParseInt(x, 10, 64)
		return n, err == nil
	}
	nums := func(xs []string) ([]int64, bool) {
		out := make([]int64, len(xs))
		for i, x := range xs {
			n, ok := num(x)
			if !ok {
				return nil, false
			}
			out[i] = n
		}
		return out, true
	}
	us := func(d int64) time.Duration { return time.Duration(d) * time.Microsecond }
	// three reads token-bucket and GCRA state: three settings (the last
	// two positive) and two numbers of state.
	three := func(name, form string) (cfg, st []int64, ok bool) {
		cfg, ok = nums(set[1:])
		if !ok || len(cfg) != 3 || len(parts) != 3 {
			r.Bad("%s state is not %s", name, form)
			return nil, nil, false
		}
		st, ok = nums(parts[1:3])
		if !ok || cfg[2] <= 0 || cfg[1] <= 0 {
			r.Bad("%s state has a bad number", name)
			return nil, nil, false
		}
		return cfg, st, true
	}
	switch set[0] {
	case "f":
		// f:<limit>:<window_ms>, then :e (aligned to the epoch) or
		// :<p>:<zone> (a calendar period, window_ms 0).
		var aligned string
		switch {
		case len(set) == 4 && set[3] == "e":
			aligned, set = "epoch", set[:3]
		case len(set) == 5 && set[2] == "0" && periodNames[set[3]] != "" && set[4] != "":
			aligned, set = periodNames[set[3]]+" in "+set[4], set[:3]
		}
		cfg, ok := nums(set[1:])
		if !ok || len(cfg) != 2 || len(parts) != 3 {
			r.Bad("fixed-window state is not f:<limit>:<window_ms>[:e|:<period>:<zone>]|<end_ms>|<used>")
			return
		}
		st, ok := nums(parts[1:3])
		if !ok {
			r.Bad("fixed-window state has a non-numeric field")
			return
		}
		r.Add("algorithm", "fixed window")
		r.Add("limit", cfg[0])
		if cfg[1] > 0 {
			r.Add("window", time.Duration(cfg[1])*time.Millisecond)
		}
		if aligned != "" {
			r.Add("aligned", aligned)
		}
		r.Add("used", st[1])
		r.Add("remaining", max(cfg[0]-st[1], 0))
		r.Add("resets in", time.Duration(st[0]-s.NowMs)*time.Millisecond)
	case "t":
		// t:<limit>:<quiet_ms>|<n>|<first_us>|<latest_us>: the run ends
		// quiet_ms after its latest attempt.
		cfg, ok := nums(set[1:])
		if !ok || len(cfg) != 2 || len(parts) != 4 {
			r.Bad("throttle state is not t:<limit>:<quiet_ms>|<count>|<first_us>|<latest_us>")
			return
		}
		st, ok := nums(parts[1:4])
		if !ok || cfg[0] < 1 || cfg[1] < 1 || cfg[1] >= 1<<43 || st[0] < 0 || st[1] > st[2] || st[2] >= 1<<53 {
			r.Bad("throttle state has a bad number (as ratelimit_throttle refuses it)")
			return
		}
		n, end := st[0], st[2]+cfg[1]*1000
		if end <= s.NowUs {
			n = 0 // the run is over: the next decision starts over
		}
		r.Add("algorithm", "throttle")
		r.Add("limit", cfg[0])
		r.Add("quiet", time.Duration(cfg[1])*time.Millisecond)
		r.Add("used", n)
		r.Add("remaining", max(cfg[0]-n, 0))
		r.Add("blocked", n >= cfg[0])
		if n > 0 {
			r.Add("run ends in", us(end-s.NowUs))
		} else {
			r.Add("run ends in", layout.None)
		}
	case "l":
		// l:<limit>:<window_us>|<n>|<e>|<last>|<t>:<k>,...: entries
		// oldest first, each leaving window_us after t; n their sum, e
		// their number, last the newest t.
		cfg, ok := nums(set[1:])
		if !ok || len(cfg) != 2 || len(parts) != 5 || cfg[0] < 1 || cfg[0] > 1000 || cfg[1] < 1 {
			r.Bad("sliding-log state is not l:<limit>:<window_us>|<n>|<entries>|<newest_us>|<t_us>:<permits>,...")
			return
		}
		hdr, ok := nums(parts[1:4])
		if !ok {
			r.Bad("sliding-log state has a non-numeric header")
			return
		}
		var used, entries, prev, oldest, newest, sum int64
		for _, e := range strings.Split(parts[4], ",") {
			tk := strings.Split(e, ":")
			if len(tk) != 2 {
				r.Bad("sliding-log entry %q is not <t_us>:<permits>", e)
				return
			}
			st, ok := nums(tk)
			if !ok || st[0] < prev || st[0] >= 1<<53 || st[1] < 1 || st[1] >= 1e15 {
				r.Bad("sliding-log entry %q has a bad number or is out of order", e)
				return
			}
			entries++
			sum += st[1]
			prev = st[0]
			if st[0]+cfg[1] > s.NowUs {
				used += st[1]
				if oldest == 0 {
					oldest = st[0]
				}
				newest = st[0]
			}
		}
		if entries > cfg[0] {
			r.Bad("sliding log holds %d entries, more than its limit %d", entries, cfg[0])
			return
		}
		if hdr[0] != sum || hdr[1] != entries || hdr[2] != prev {
			r.Bad("sliding-log header %d|%d|%d does not match its entries (%d permits in %d entries, the newest at %d)", hdr[0], hdr[1], hdr[2], sum, entries, prev)
			return
		}
		r.Add("algorithm", "sliding log")
		r.Add("limit", cfg[0])
		r.Add("window", us(cfg[1]))
		r.Add("entries", entries)
		r.Add("used", used)
		r.Add("remaining", max(cfg[0]-used, 0))
		if used > 0 {
			r.Add("oldest leaves in", us(oldest+cfg[1]-s.NowUs))
			r.Add("empty in", us(newest+cfg[1]-s.NowUs))
		} else {
			r.Add("oldest leaves in", layout.None)
			r.Add("empty in", layout.None)
		}
	case "s":
		cfg, ok := nums(set[1:])
		if !ok || len(cfg) != 3 || len(parts) != 5 {
			r.Bad("sliding-window state is not s:<limit>:<window>:<segments>|<n>|<o>|<l>|<c_o>,...,<c_l>")
			return
		}
		n, ok := num(parts[1])
		if !ok {
			r.Bad("sliding-window state has a non-numeric total")
			return
		}
		r.Add("algorithm", "sliding window")
		r.Add("limit", cfg[0])
		r.Add("window", us(cfg[1]))
		r.Add("segments", cfg[2])
		r.Add("used", n)
		r.Add("remaining", max(cfg[0]-n, 0))
	case "b":
		cfg, st, ok := three("token-bucket", "b:<limit>:<tokens>:<period>|<tokens>|<refill>")
		if !ok {
			return
		}
		// Whole periods since refill add tokens (up to the limit).
		elapsed := max(s.NowUs-st[1], 0)
		periods := elapsed / cfg[2]
		tokens := st[0]
		if periods > 0 && tokens < cfg[0] {
			add := periods
			if add > (math.MaxInt64-tokens)/cfg[1] {
				tokens = cfg[0]
			} else {
				tokens = min(cfg[0], tokens+add*cfg[1])
			}
		}
		r.Add("algorithm", "token bucket")
		r.Add("limit", cfg[0])
		r.Add("refill", fmt.Sprintf("%d per %v", cfg[1], us(cfg[2])))
		r.Add("remaining", tokens)
		if tokens < cfg[0] {
			r.Add("next refill in", us(cfg[2]-elapsed%cfg[2]))
		} else {
			r.Add("next refill in", layout.None)
		}
	case "g":
		cfg, st, ok := three("GCRA", "g:<burst>:<q>:<d>|<tat>|<rem>")
		if !ok {
			return
		}
		if st[0] < 0 || st[0] >= 1<<53 || st[1] < 0 || st[1] >= cfg[2] { // as ratelimit_gcra refuses it
			r.Bad("GCRA state is out of range: tat must be below 2^53 µs and rem below d")
			return
		}
		// One permit every q/d µs; tat + rem/d is the theoretical arrival
		// time; the burst is back when tat <= now.
		interval := float64(cfg[1]) / float64(cfg[2])
		tat := float64(st[0]) + float64(st[1])/float64(cfg[2])
		ahead := tat - float64(s.NowUs)
		used := int64(0)
		if ahead > 0 {
			used = min(cfg[0], int64(math.Ceil(ahead/interval)))
		}
		r.Add("algorithm", "GCRA")
		r.Add("burst", cfg[0])
		r.Add("interval", us(int64(math.Round(interval))))
		r.Add("remaining", cfg[0]-used)
		// A permit is free once tat - now <= (burst-1) * interval.
		r.Add("next permit in", us(int64(max(0, ahead-float64(cfg[0]-1)*interval))))
		r.Add("full again in", us(int64(max(0, ahead))))
	}
	if s.PTTL == -1 {
		r.Bad("limiter state always expires; this key has no TTL (the next decision restores it)")
	}
}

// periodNames are the calendar periods of a fixed window's settings.
var periodNames = map[string]string{"m": "minute", "h": "hour", "d": "day", "M": "month"}

// DenyListSetLayout is a deny list in the layout before timed denials
// (or written by an operator with SADD): a plain set of identities, each
// denied without end, that never expires. Deny, Remove and reads work on
// it; DenyFor needs the sorted set.
var DenyListSetLayout = layout.Layout{
	Kind: "deny list",
	Type: "set",
	Decode: func(s *layout.Snapshot, r *layout.Report) {
		r.Add("identities", s.SCard)
		r.Add("without end", s.SCard)
		if s.PTTL != -1 {
			r.Bad("a deny list never expires, this set has a TTL")
		}
	},
}

// CompositeLayout is a composite limiter's hash: its components ("c")
// and how many component states it holds.
var CompositeLayout = layout.Layout{
	Kind:  kindLimiter,
	Type:  "hash",
	Match: func(s *layout.Snapshot) bool { return s.Has("c") },
	Decode: func(s *layout.Snapshot, r *layout.Report) {
		r.Add("algorithm", "composite")
		r.Add("components", s.Hash["c"])
		n := 0
		for k := range s.Hash {
			if _, err := strconv.Atoi(k); err == nil {
				n++
			}
		}
		r.Add("component states", n)
	},
}

// ConcurrencyLayout is a concurrency limiter's sorted set: its limit and
// the live leases with their permits, holders and time left.
var ConcurrencyLayout = layout.Layout{
	Kind: kindLimiter,
	Type: "zset",
	Match: func(s *layout.Snapshot) bool {
		stones := 0
		for _, m := range s.ZSet {
			if m.Member == "#" && m.Score < 0 { // the limit record (a deny list's "#" is scored > 0)
				return true
			}
			if isConcTombstone(m.Member) {
				stones++
			}
		}
		// A cleanup's tombstones alone (ratelimit_conc_abandon on a key
		// without leases).
		return stones > 0 && stones == len(s.ZSet)
	},
	Mixes:  "concurrency-limiter",
	Decode: decodeConcurrency,
}

func decodeConcurrency(s *layout.Snapshot, r *layout.Report) {
	now := float64(s.NowMs)
	var limit, used int64
	leases, stones := 0, 0
	for _, m := range s.ZSet {
		if m.Member == "#" {
			limit = int64(-m.Score)
			continue
		}
		n, token, ok := strings.Cut(m.Member, ":")
		k, err := strconv.ParseInt(n, 10, 64)
		if !ok || err != nil {
			r.Bad("member %q is not <permits>:<token>", m.Member)
			continue
		}
		if m.Score <= now {
			continue
		}
		if k == 0 && isConcTombstone(m.Member) {
			stones++
			continue
		}
		leases++
		used += k
		r.Entries = append(r.Entries, layout.Entry{{K: "permits", V: k}, {K: "owner", V: layout.Tok(token)}, {K: "expires in", V: layout.ExpiresIn(s, m.Score)}})
	}
	r.Add("algorithm", "concurrency")
	r.Add("limit", limit)
	r.Add("held", used)
	r.Add("remaining", max(limit-used, 0))
	r.Add("leases", leases)
	if stones > 0 {
		r.Add("abandoned", stones) // live tombstones: they hold nothing
	}
}

// isConcTombstone reports whether a concurrency set's member is the
// tombstone of an abandoned acquisition: "0:" <member> "!"
// (ratelimit_conc_abandon), holding no permit.
func isConcTombstone(m string) bool {
	return len(m) > 3 && strings.HasPrefix(m, "0:") && strings.HasSuffix(m, "!")
}

// DenyListLayout is a deny list: a sorted set of identities scored with
// the end of their denial in ms since the epoch (+inf: without end), that
// never expires; its size and, of the members read, how many are denied
// without end, for a time, or no longer (ended, deleted by the next timed
// denial) are reported. (The layout before timed denials was a plain set.)
var DenyListLayout = layout.Layout{
	Kind: "deny list",
	Type: "zset",
	Match: func(s *layout.Snapshot) bool {
		for _, m := range s.ZSet {
			if !(m.Score >= 1e12) { // an end in ms since the epoch, or +inf
				return false
			}
		}
		return len(s.ZSet) > 0
	},
	Decode: func(s *layout.Snapshot, r *layout.Report) {
		var endless, timed, ended int64
		for _, m := range s.ZSet {
			switch {
			case math.IsInf(m.Score, 1):
				endless++
			case m.Score > float64(s.NowMs):
				timed++
			default:
				ended++
			}
		}
		r.Add("identities", s.ZCard)
		r.Add("without end", endless)
		r.Add("timed", timed)
		r.Add("ended", ended)
		if s.PTTL != -1 {
			r.Bad("a deny list never expires, this sorted set has a TTL")
		}
	},
}
