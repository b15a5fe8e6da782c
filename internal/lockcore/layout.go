// The stored layout of package lock, for coordctl inspect and repair
// (package layout): a lock is a string holding its owner token ("+" after
// it while a waiter is blocked), with the lock's TTL; hash-field leases are
// one hash, each field a lease holding its owner token with its own expiry
// (HPEXPIRE) and the key none.

package lockcore

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/coordkit/coordination/internal/layout"
)

// LockLayout is a lock: a string holding the owner token, "+" after it
// while a waiter is blocked, or the tombstones of abandoned acquisitions
// (each token, then "!": free to take). A lock without a TTL is corrupt.
var LockLayout = layout.Layout{
	Kind:  "lock",
	Type:  "string",
	Match: isLock,
	Decode: func(s *layout.Snapshot, r *layout.Report) {
		if ts := Abandoned(s.Str); ts != nil {
			for _, f := range tombstoneFields(ts) {
				r.Add(f.K, f.V)
			}
			if s.PTTL == -1 {
				r.Bad("the tombstone has no TTL: DEL it")
			}
			return
		}
		r.Add("owner", layout.Tok(strings.TrimSuffix(s.Str, "+")))
		r.Add("notifies on release", strings.HasSuffix(s.Str, "+")) // a contended attempt marked it
		if s.PTTL == -1 {
			r.Bad("the lock has no TTL: it is held until deleted (DEL it if its holder is gone)")
		}
	},
}

// tombstoneFields are the fields of a free lock (or lease field) holding
// the tombstones of abandoned acquisitions ts: in text, the owner line
// says so in prose and a line per token follows; in JSON (machine
// values), owner is empty, state is "tombstone" and abandoned_tokens
// lists the tokens.
func tombstoneFields(ts []string) []layout.Field {
	toks := make([]string, len(ts))
	for i, t := range ts {
		toks[i] = layout.Tok(t)
	}
	fs := []layout.Field{
		{K: "owner", V: layout.Split{Text: "none (free): " + stones(ts), JSON: ""}},
		{K: "state", V: layout.Split{Text: layout.Omitted, JSON: "tombstone"}},
		{K: "abandoned tokens", V: layout.Split{Text: layout.Omitted, JSON: toks}},
	}
	for _, t := range toks {
		fs = append(fs, layout.Field{K: "abandoned token", V: layout.Split{Text: t, JSON: layout.Omitted}})
	}
	return fs
}

// stones says what the tombstones of ts are.
func stones(ts []string) string {
	if len(ts) == 1 {
		return "the tombstone of an abandoned acquisition"
	}
	return fmt.Sprintf("the tombstones of %d abandoned acquisitions", len(ts))
}

func isLock(s *layout.Snapshot) bool {
	return layout.IsToken(strings.TrimSuffix(s.Str, "+")) || IsTombstone(s.Str)
}

// FieldLeasesLayout is a hash of field leases: each field a lease, its
// value an owner token, its own expiry (HPTTL). It matches every hash:
// it goes after the other hash layouts of a table.
var FieldLeasesLayout = layout.Layout{
	Kind: "field leases",
	Type: "hash",
	Decode: func(s *layout.Snapshot, r *layout.Report) {
		fieldLeases(s, r, "leases", "a lease the library did not write (HDEL it if its holder is gone)")
		if s.HashTTL == nil {
			r.Bad("the server has no hash-field expiration: not a field-lease hash")
		}
		if s.PTTL != -1 {
			r.Bad("a field-lease hash has no key-level TTL; this one has one")
		}
	},
}

// fieldLeases adds the field count (named count), the ttl line and an
// entry per field of a field-lease hash: the field, its owner token
// (truncated) and its TTL, flagging a field without expiry (why names what
// the library does instead) or without an owner token.
func fieldLeases(s *layout.Snapshot, r *layout.Report, count, why string) {
	h := s.Hash
	r.Add(count, s.HashLen)
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	sort.Strings(names)
	r.FieldTTLs = fieldTTLs(s, names)
	for _, f := range names {
		ts := Abandoned(h[f])
		stone := ts != nil
		e := layout.Entry{{K: "field", V: f}, {K: "owner", V: layout.Tok(h[f])}}
		if stone {
			e = append(layout.Entry{{K: "field", V: f}}, tombstoneFields(ts)...)
		}
		if ttl, ok := s.HashTTL[f]; ok {
			if ttl >= 0 {
				e = append(e, layout.Field{K: "ttl", V: time.Duration(ttl) * time.Millisecond})
			} else {
				e = append(e, layout.Field{K: "ttl", V: layout.None})
				r.Bad("field %q has no expiry: "+why, f)
			}
		}
		if !stone && !layout.IsToken(h[f]) {
			r.Bad("field %q does not hold an owner token", f)
		}
		r.Entries = append(r.Entries, e)
	}
}

// maxFieldTTLs bounds the fields the ttl line of a field-lease hash
// names (each entry has its own).
const maxFieldTTLs = 4

// fieldTTLs is the ttl line of a hash whose fields expire, the key not:
// each field's TTL (HPTTL), names in order, at most maxFieldTTLs. "" when
// the key itself expires or the server has no HPTTL.
func fieldTTLs(s *layout.Snapshot, names []string) string {
	if s.PTTL != -1 || s.HashTTL == nil {
		return ""
	}
	var parts []string
	for i, f := range names {
		if i == maxFieldTTLs {
			parts = append(parts, fmt.Sprintf("… %d more below", len(names)-i))
			break
		}
		t := "none"
		if ms, ok := s.HashTTL[f]; ok && ms >= 0 {
			t = layout.ValueText(time.Duration(ms) * time.Millisecond)
		}
		parts = append(parts, layout.Shown(f)+" "+t)
	}
	if n := s.HashLen - int64(len(names)); n > 0 {
		parts = append(parts, fmt.Sprintf("%d fields not read", n))
	}
	return "per field (HPTTL): " + strings.Join(parts, ", ")
}

// FIFOQueueLayout is the queue of a first-in first-out lock's blocked
// waiters (lock.WithFIFO): a sorted set next to the lock key, named the
// lock key followed by "\x00fifo" and a slot suffix, of owner tokens
// scored by their arrival number. A first-in first-out semaphore's queue
// (semaphore.WithFIFO) has the same shape, its members the waiters'
// permit ids "P:<n>:<token>"; it is decoded by this layout too.
var FIFOQueueLayout = layout.Layout{
	Kind: "FIFO waiter queue",
	Type: "zset",
	Match: func(s *layout.Snapshot) bool {
		return strings.Contains(s.Key, "\x00fifo") && !strings.Contains(s.Key, "\x00fifo-alive")
	},
	Decode: func(s *layout.Snapshot, r *layout.Report) {
		r.Add("waiters", s.ZCard)
		for i, m := range s.ZSet {
			r.Entries = append(r.Entries, layout.Entry{{K: "position", V: i + 1}, {K: "owner", V: layout.Tok(m.Member)}, {K: "arrival", V: int64(m.Score)}})
			if !layout.IsToken(m.Member) && !isPermitID(m.Member) {
				r.Bad("member %q is not an owner token", m.Member)
			}
		}
		if s.PTTL == -1 {
			r.Bad("a waiter queue expires with its longest-lived waiter; this one has no TTL")
		}
	},
}

// isPermitID reports whether m is a semaphore waiter's permit id
// "P:<n>:<token>" (n >= 1).
func isPermitID(m string) bool {
	rest, ok := strings.CutPrefix(m, "P:")
	if !ok {
		return false
	}
	n, token, ok := strings.Cut(rest, ":")
	v, err := strconv.ParseInt(n, 10, 64)
	return ok && err == nil && v >= 1 && layout.IsToken(token)
}

// FIFOAliveLayout is the hash of a first-in first-out lock's waiters'
// alive-until times (lock.WithFIFO): named the lock key followed by
// "\x00fifo-alive" and a slot suffix; field an owner token, value the
// server time in ms until which that waiter counts as alive, or '!' and
// the time until which an abandoned acquisition's token is not queued
// (lock_fifo_abandon's record).
var FIFOAliveLayout = layout.Layout{
	Kind:  "FIFO waiter times",
	Type:  "hash",
	Match: func(s *layout.Snapshot) bool { return strings.Contains(s.Key, "\x00fifo-alive") },
	Decode: func(s *layout.Snapshot, r *layout.Report) {
		names := make([]string, 0, len(s.Hash))
		abandoned := 0
		for k, v := range s.Hash {
			names = append(names, k)
			if strings.HasPrefix(v, "!") {
				abandoned++
			}
		}
		r.Add("waiters", s.HashLen-int64(abandoned))
		if abandoned > 0 {
			r.Add("abandoned acquisitions (not queued)", abandoned)
		}
		sort.Strings(names)
		for _, f := range names {
			v, gone := strings.CutPrefix(s.Hash[f], "!")
			until, err := strconv.ParseInt(v, 10, 64)
			e := layout.Entry{{K: "owner", V: layout.Tok(f)}}
			switch {
			case gone && err == nil:
				left := any("expired")
				if until > s.NowMs {
					left = time.Duration(until-s.NowMs) * time.Millisecond
				}
				e = append(e, layout.Field{K: "abandoned, not queued for", V: left})
			case err != nil:
				r.Bad("waiter %q has no alive-until time (%q)", layout.Tok(f), s.Hash[f])
			case until > s.NowMs:
				e = append(e, layout.Field{K: "alive for", V: time.Duration(until-s.NowMs) * time.Millisecond})
			default:
				e = append(e, layout.Field{K: "alive for", V: "gone (removed when it reaches the head)"})
			}
			r.Entries = append(r.Entries, e)
		}
		if s.PTTL == -1 {
			r.Bad("a waiter-times hash expires with its longest-lived waiter; this one has no TTL")
		}
	},
}
