package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/coordkit/coordination/internal/engine"
)

// This file decodes what a key holds, from a snapshot of it (decode is
// pure: no server, no panics on any input), into a report. The layouts
// are the ones each package documents (its "Storage" or "Key layout"
// section and the headers of its scripts in package lua).

// Kinds a key can hold. kindOther is "a key of no library layout".
const (
	kindMissing     = "missing"
	kindLock        = "lock"
	kindFencing     = "fencing lease"
	kindLeader      = "leader"
	kindCounter     = "fence counter"
	kindGuarded     = "fenced value"
	kindFieldLeases = "field leases"
	kindRWLease     = "rwlease"
	kindSemaphore   = "semaphore"
	kindLatch       = "latch"
	kindClaim       = "idempotency claim"
	kindLimiter     = "rate limiter"
	kindDenyList    = "deny list"
	kindMark        = "release mark"
	kindOther       = "unknown"
)

// snapshot is what fetch read of one key, at one server instant (NowMs).
type snapshot struct {
	Key     string
	Prefix  string // the --prefix Key was read with (for the commands suggested)
	Type    string // TYPE: string, hash, zset, set, list, stream, none
	PTTL    int64  // ms; -1 no expiry, -2 missing
	NowMs   int64  // server time, ms
	NowUs   int64  // server time, µs
	Str     string
	StrLen  int64 // full length (Str may be truncated to maxValue)
	Hash    map[string]string
	HashTTL map[string]int64 // per field (HPTTL), when the server has it; -1 none
	HashLen int64
	ZSet    []zmember
	ZCard   int64
	SCard   int64
	// Counter is the fence counter next to a fencing lease (or the lease
	// next to a counter), when the key has a {hash tag}.
	Sibling     *snapshot
	SiblingRole string
	// SiblingTried are the keys fetch looked for the lease at, next to a
	// fence counter (said when none holds one).
	SiblingTried []string
}

type zmember struct {
	Member string
	Score  float64
}

// maxValue bounds what fetch reads of a value (a claim's result can be
// large).
const maxValue = 64 << 10

// maxMembers bounds what fetch reads of a hash or sorted set.
const maxMembers = 1000

// report is the decoded key: what it is and what it says.
type report struct {
	Key     string
	Kind    string
	TTL     int64 // ms; -1 no expiry, -2 missing
	Fields  []kv
	Entries []entry // holders, leases, readers ...
	Problem string  // why the layout is corrupt (Kind says what it looked like)
	// FieldTTLs is what the ttl line says instead of TTL for a hash whose
	// fields expire (HPTTL) and the key not: "per field: ...".
	FieldTTLs string
}

type kv struct {
	K string
	V any
}

type entry []kv

func (r *report) add(k string, v any) { r.Fields = append(r.Fields, kv{k, v}) }

func (r *report) bad(format string, a ...any) *report {
	if r.Problem == "" {
		r.Problem = fmt.Sprintf(format, a...)
	}
	return r
}

// MarshalJSON writes the report as one object, fields in order.
func (r *report) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteString("{")
	write := func(k string, v any) {
		if b.Len() > 1 {
			b.WriteString(",")
		}
		kb, _ := json.Marshal(k)
		vb, err := json.Marshal(v)
		if err != nil {
			vb, _ = json.Marshal(fmt.Sprint(v))
		}
		b.Write(kb)
		b.WriteString(":")
		b.Write(vb)
	}
	write("key", r.Key)
	write("kind", r.Kind)
	write("ttl_ms", r.TTL)
	for _, f := range r.Fields {
		write(jsonName(f.K), jsonValue(f.V))
	}
	if r.Entries != nil {
		var es []json.RawMessage
		for _, e := range r.Entries {
			var eb strings.Builder
			eb.WriteString("{")
			for i, f := range e {
				if i > 0 {
					eb.WriteString(",")
				}
				kb, _ := json.Marshal(jsonName(f.K))
				vb, _ := json.Marshal(jsonValue(f.V))
				eb.Write(kb)
				eb.WriteString(":")
				eb.Write(vb)
			}
			eb.WriteString("}")
			es = append(es, json.RawMessage(eb.String()))
		}
		write("entries", es)
	}
	if r.Problem != "" {
		write("problem", r.Problem)
	}
	b.WriteString("}")
	return []byte(b.String()), nil
}

func jsonName(k string) string { return strings.NewReplacer(" ", "_", "-", "_").Replace(k) }

// jsonValue turns durations into milliseconds.
func jsonValue(v any) any {
	if d, ok := v.(time.Duration); ok {
		if d == durNone {
			return nil
		}
		return d.Milliseconds()
	}
	return v
}

// text writes the report for a terminal.
func (r *report) text() string {
	var b strings.Builder
	ttl := ttlText(r.TTL)
	if r.FieldTTLs != "" {
		ttl = r.FieldTTLs
	}
	fmt.Fprintf(&b, "key:   %s\nkind:  %s\nttl:   %s\n", shown(r.Key), r.Kind, ttl)
	w := 0
	for _, f := range r.Fields {
		w = max(w, len(f.K))
	}
	for _, f := range r.Fields {
		fmt.Fprintf(&b, "%-*s  %s\n", w+1, f.K+":", valueText(f.V))
	}
	for _, e := range r.Entries {
		var parts []string
		for _, f := range e {
			parts = append(parts, f.K+"="+valueText(f.V))
		}
		fmt.Fprintf(&b, "  - %s\n", strings.Join(parts, "  "))
	}
	if r.Problem != "" {
		fmt.Fprintf(&b, "CORRUPT: %s\n", r.Problem)
	}
	return b.String()
}

func ttlText(ms int64) string {
	switch {
	case ms == -1:
		return "none (never expires)"
	case ms < -1:
		return "-"
	}
	return (time.Duration(ms) * time.Millisecond).String()
}

// maxFieldTTLs bounds the fields the ttl line of a field-lease hash
// names (each entry below has its own).
const maxFieldTTLs = 4

// fieldTTLs is the ttl line of a hash whose fields expire, the key not:
// each field's TTL (HPTTL), names in order, at most maxFieldTTLs. "" when
// the key itself expires or the server has no HPTTL.
func fieldTTLs(s *snapshot, names []string) string {
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
			t = valueText(time.Duration(ms) * time.Millisecond)
		}
		parts = append(parts, shown(f)+" "+t)
	}
	if n := s.HashLen - int64(len(names)); n > 0 {
		parts = append(parts, fmt.Sprintf("%d fields not read", n))
	}
	return "per field (HPTTL): " + strings.Join(parts, ", ")
}

func valueText(v any) string {
	switch x := v.(type) {
	case time.Duration:
		if x == durNone {
			return "none"
		}
		return x.Round(time.Millisecond).String()
	case string:
		return shown(x)
	}
	return fmt.Sprint(v)
}

// repairHint is the command that lists a semaphore's permits without
// expiry: its --key is the key without the --prefix inspect was given.
func repairHint(s *snapshot) string {
	cmd := "coordctl repair semaphore"
	key := s.Key
	if s.Prefix != "" && strings.HasPrefix(key, s.Prefix) && len(key) > len(s.Prefix) {
		cmd += " --prefix " + shellQuote(s.Prefix)
		key = key[len(s.Prefix):]
	}
	return cmd + " --key " + shellQuote(key) + " --list"
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:._/-@%+=,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// durNone is a duration field that does not apply ("none").
const durNone = time.Duration(math.MinInt64)

// tok shows an owner token truncated to 8 characters: enough to tell
// holders apart, not enough to act as one.
func tok(t string) string {
	if len(t) <= 8 {
		return t
	}
	return t[:8] + "…"
}

var (
	reToken   = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	reInt     = regexp.MustCompile(`^(0|[1-9][0-9]*)$`)
	reSignInt = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)
	// reAbandoned is the start of an abandoned claim: "A" <fence> ":".
	reAbandoned = regexp.MustCompile(`^A[0-9]+:`)
	// reFence is a claim's fence as the scripts accept it.
	reFence = regexp.MustCompile(`^[1-9][0-9]{0,15}$`)
)

// decode says what s holds. It never panics (FuzzDecode).
func decode(s *snapshot) *report {
	r := &report{Key: s.Key, TTL: s.PTTL}
	switch s.Type {
	case "none", "":
		r.Kind = kindMissing // not corrupt: said in one line by inspect
		r.TTL = -2
		return r
	}
	if strings.HasSuffix(s.Key, engine.MarkSuffix) {
		return decodeMark(s, r)
	}
	switch s.Type {
	case "string":
		return decodeString(s, r)
	case "hash":
		return decodeHash(s, r)
	case "zset":
		return decodeZSet(s, r)
	case "set":
		r.Kind = kindDenyList
		r.add("identities", s.SCard)
		if s.PTTL != -1 {
			r.bad("a deny list never expires, this set has a TTL")
		}
		return r
	}
	r.Kind = kindOther
	return r.bad("a %s: no library layout is a %s", s.Type, s.Type)
}

func decodeString(s *snapshot, r *report) *report {
	v := s.Str
	switch {
	case len(v) > 2 && v[1] == ':' && strings.ContainsRune("fsbg", rune(v[0])):
		return decodeLimiterString(s, r)
	case strings.HasPrefix(v, "P") && strings.Count(v, ":") >= 2 && reInt.MatchString(v[1:strings.IndexByte(v, ':')]):
		return decodeClaim(s, r)
	case strings.HasPrefix(v, "C") && len(v) > 37 && v[37] == ':':
		return decodeClaim(s, r)
	case reAbandoned.MatchString(v):
		return decodeClaim(s, r)
	case reToken.MatchString(strings.TrimSuffix(v, "+")):
		r.Kind = kindLock
		r.add("owner", tok(strings.TrimSuffix(v, "+")))
		r.add("waiters", strings.HasSuffix(v, "+"))
		if s.PTTL == -1 {
			r.bad("the lock has no TTL: it is held until deleted (DEL it if its holder is gone)")
		}
		return r
	case reSignInt.MatchString(v):
		r.Kind = kindCounter
		r.add("last fencing token", v)
		switch {
		case strings.HasPrefix(v, "-"):
			r.bad("the counter is negative")
		case len(v) > 19 || (len(v) == 19 && v > "9223372036854775807"):
			r.bad("the counter is beyond the int64 range")
		case s.PTTL != -1:
			r.bad("the counter has a TTL: it must never expire (PERSIST it)")
		}
		addSibling(s, r)
		return r
	}
	r.Kind = kindOther
	return r.bad("a string of no library layout (%d bytes)", s.StrLen)
}

// decodeClaim decodes an idempotency claim:
//
//	pending    "P" <result ttl> ":" <fence> ":" <owner> ":" <fp>
//	completed  "C" <completion id> ":" <fp> <result>
//	abandoned  "A" <fence> ":" <abandon id>   (kept 5 s: a free key)
//
// fp is "-:" or <len> ":" <bytes>.
func decodeClaim(s *snapshot, r *report) *report {
	r.Kind = kindClaim
	v := s.Str
	switch v[0] {
	case 'P':
		parts := strings.SplitN(v[1:], ":", 4)
		ttl, _ := strconv.ParseInt(parts[0], 10, 64)
		r.add("state", "pending")
		if len(parts) < 4 || !reFence.MatchString(parts[1]) {
			return r.bad("a pending claim without a valid fence (P<result ttl>:<fence>:<owner>:<fp>): the library fails on it with ErrBadState (a claim of the layout before fences is one); delete it with coordctl repair claim, or let it expire")
		}
		r.add("fencing token", parts[1])
		if parts[2] == "" {
			return r.bad("a pending claim without an owner")
		}
		r.add("owner", tok(parts[2]))
		r.add("result ttl", time.Duration(ttl)*time.Millisecond)
		fp, _, ok := claimFingerprint(parts[3])
		if !ok {
			return r.bad("a bad fingerprint")
		}
		r.add("fingerprint", fp)
	case 'A':
		fence, id, _ := strings.Cut(v[1:], ":")
		r.add("state", "abandoned")
		if !reFence.MatchString(fence) {
			return r.bad("an abandoned claim without a valid fence: the library fails on it with ErrBadState")
		}
		r.add("fencing token", fence)
		r.add("abandon id", tok(id))
		r.add("next claim", "free: the next Begin takes it, with a larger fencing token")
		if s.PTTL == -1 {
			return r.bad("an abandoned claim lasts 5 s; this one has no TTL")
		}
		return r
	default:
		r.add("state", "completed")
		r.add("completion", tok(v[1:37]))
		fp, res, ok := claimFingerprint(v[38:])
		if !ok {
			return r.bad("a bad fingerprint")
		}
		r.add("fingerprint", fp)
		size := int64(len(res)) + s.StrLen - int64(len(v))
		r.add("result bytes", size)
		if st, ok := httpStatus(res); ok {
			r.add("status", st)
		}
	}
	if s.PTTL == -1 {
		r.bad("a claim always has a TTL; this one has none")
	}
	return r
}

// claimFingerprint splits "-:" or "<len>:<bytes>" off s.
func claimFingerprint(s string) (shown string, rest string, ok bool) {
	if strings.HasPrefix(s, "-:") {
		return "none", s[2:], true
	}
	i := strings.IndexByte(s, ':')
	if i <= 0 {
		return "", "", false
	}
	n, err := strconv.Atoi(s[:i])
	if err != nil || n < 0 || i+1+n > len(s) {
		return "", "", false
	}
	return fmt.Sprintf("present (%d bytes)", n), s[i+1+n:], true
}

// decodeLegacyClaim decodes an idempotency claim of the hash layout
// {state, owner, ttl, fp, result, done} (releases before the string
// layout).
func decodeLegacyClaim(s *snapshot, r *report) *report {
	r.Kind = kindClaim
	h := s.Hash
	r.add("layout", legacyClaimLayout)
	r.add("state", h["state"])
	if h["state"] == "pending" {
		r.add("owner", tok(h["owner"]))
	}
	if fp, ok := h["fp"]; ok {
		r.add("fingerprint", fmt.Sprintf("present (%d bytes)", len(fp)))
	} else {
		r.add("fingerprint", "none")
	}
	if h["state"] == "completed" {
		r.add("result bytes", len(h["result"]))
		if st, ok := httpStatus(h["result"]); ok {
			r.add("status", st)
		}
	}
	r = legacyClaimProblem(r) // first: it says what to do with the key
	if h["state"] != "pending" && h["state"] != "completed" {
		r.bad("state %q is neither pending nor completed", h["state"])
	}
	if s.PTTL == -1 {
		r.bad("a claim always has a TTL; this one has none")
	}
	return r
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

// decodeLimiterString decodes fixed-window, sliding-window, token-bucket
// and GCRA state: "<a>:<settings>|<state>|...|<ring>".
func decodeLimiterString(s *snapshot, r *report) *report {
	r.Kind = kindLimiter
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
	switch set[0] {
	case "f":
		cfg, ok := nums(set[1:])
		if !ok || len(cfg) != 2 || len(parts) < 3 {
			return r.bad("fixed-window state is not f:<limit>:<window_ms>|<end_ms>|<used>|<ring>")
		}
		st, ok := nums(parts[1:3])
		if !ok {
			return r.bad("fixed-window state has a non-numeric field")
		}
		r.add("algorithm", "fixed window")
		r.add("limit", cfg[0])
		r.add("window", time.Duration(cfg[1])*time.Millisecond)
		r.add("used", st[1])
		r.add("remaining", max(cfg[0]-st[1], 0))
		r.add("resets in", time.Duration(st[0]-s.NowMs)*time.Millisecond)
	case "s":
		cfg, ok := nums(set[1:])
		if !ok || len(cfg) != 3 || len(parts) < 3 {
			return r.bad("sliding-window state is not s:<limit>:<window>:<segments>|<n>|...")
		}
		n, ok := num(parts[1])
		if !ok {
			return r.bad("sliding-window state has a non-numeric total")
		}
		r.add("algorithm", "sliding window")
		r.add("limit", cfg[0])
		r.add("window", us(cfg[1]))
		r.add("segments", cfg[2])
		r.add("used", n)
		r.add("remaining", max(cfg[0]-n, 0))
	case "b":
		cfg, ok := nums(set[1:])
		if !ok || len(cfg) != 3 || len(parts) < 4 {
			return r.bad("token-bucket state is not b:<limit>:<tokens>:<period>|<tokens>|<refill>|<ring>")
		}
		st, ok := nums(parts[1:3])
		if !ok || cfg[2] <= 0 || cfg[1] <= 0 {
			return r.bad("token-bucket state has a bad number")
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
		r.add("algorithm", "token bucket")
		r.add("limit", cfg[0])
		r.add("refill", fmt.Sprintf("%d per %v", cfg[1], us(cfg[2])))
		r.add("remaining", tokens)
		if tokens < cfg[0] {
			r.add("next refill in", us(cfg[2]-elapsed%cfg[2]))
		} else {
			r.add("next refill in", durNone)
		}
	case "g":
		cfg, ok := nums(set[1:])
		if !ok || len(cfg) != 3 || len(parts) < 4 {
			return r.bad("GCRA state is not g:<burst>:<q>:<d>|<tat>|<rem>|<ring>")
		}
		st, ok := nums(parts[1:3])
		if !ok || cfg[2] <= 0 || cfg[1] <= 0 {
			return r.bad("GCRA state has a bad number")
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
		r.add("algorithm", "GCRA")
		r.add("burst", cfg[0])
		r.add("interval", us(int64(math.Round(interval))))
		r.add("remaining", cfg[0]-used)
		// A permit is free once tat - now <= (burst-1) * interval.
		r.add("next permit in", us(int64(max(0, ahead-float64(cfg[0]-1)*interval))))
		r.add("full again in", us(int64(max(0, ahead))))
	default:
		return r.bad("unknown limiter algorithm %q", set[0])
	}
	if s.PTTL == -1 {
		r.bad("limiter state always expires; this key has no TTL (the next decision restores it)")
	}
	return r
}

func decodeHash(s *snapshot, r *report) *report {
	h := s.Hash
	_, hasOwner := h["owner"]
	_, hasFence := h["fence"]
	_, hasID := h["id"]
	_, hasGen := h["gen"]
	_, hasC := h["c"]
	_, hasValue := h["value"]
	_, hasState := h["state"]
	switch {
	case hasState:
		return decodeLegacyClaim(s, r)
	case hasOwner || (hasFence && !hasValue):
		r.Kind = kindFencing
		if strings.HasSuffix(s.Key, "}:leader") {
			r.Kind = kindLeader // a fencing lease whose holder is the leader's identity
		}
		if !hasOwner || !hasFence {
			return r.bad("a fencing lease hash lacks its owner or fence field")
		}
		r.add("owner", tok(h["owner"]))
		if holder, ok := h["holder"]; ok {
			r.add("holder", holder)
		}
		r.add("fencing token", h["fence"])
		if !reInt.MatchString(h["fence"]) {
			r.bad("the fence field is not a canonical integer")
		}
		if s.PTTL == -1 {
			r.bad("the lease has no TTL: it is held until deleted")
		}
		addSibling(s, r)
		return r
	case hasFence && hasValue:
		r.Kind = kindGuarded
		r.add("fencing token", h["fence"])
		r.add("value bytes", len(h["value"]))
		return r
	case hasID && hasGen:
		return decodeLatch(s, r)
	case hasC:
		r.Kind = kindLimiter
		r.add("algorithm", "composite")
		r.add("components", h["c"])
		n := 0
		for k := range h {
			if _, err := strconv.Atoi(k); err == nil {
				n++
			}
		}
		r.add("component states", n)
		return r
	}
	// Hash-field leases: each field a lease, its value an owner token,
	// its own expiry.
	r.Kind = kindFieldLeases
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	sort.Strings(names)
	r.FieldTTLs = fieldTTLs(s, names)
	r.add("leases", s.HashLen)
	fieldEntries(s, r, h, names, "a lease the library did not write (HDEL it if its holder is gone)")
	if s.HashTTL == nil {
		r.bad("the server has no hash-field expiration: not a field-lease hash")
	}
	if s.PTTL != -1 {
		r.bad("a field-lease hash has no key-level TTL; this one has one")
	}
	return r
}

func decodeLatch(s *snapshot, r *report) *report {
	r.Kind = kindLatch
	h := s.Hash
	geti := func(k string) (int64, bool) {
		n, err := strconv.ParseInt(h[k], 10, 64)
		return n, err == nil
	}
	gen, ok1 := geti("gen")
	count, ok2 := geti("count")
	initial, ok3 := geti("initial")
	deadline, ok4 := geti("deadline")
	if !(ok1 && ok2 && ok3 && ok4) {
		return r.bad("a latch hash with a missing or non-numeric gen, count, initial or deadline")
	}
	downs := 0
	for k := range h {
		if strings.HasPrefix(k, "s:") {
			downs++
		}
	}
	r.add("generation", gen)
	r.add("count", count)
	r.add("initial", initial)
	r.add("count-downs", downs)
	state := "open"
	switch {
	case count == 0:
		state = "complete"
	case deadline > 0 && deadline <= s.NowMs:
		state = "broken (deadline passed)"
	}
	r.add("state", state)
	if deadline > 0 {
		r.add("deadline in", time.Duration(deadline-s.NowMs)*time.Millisecond)
	} else {
		r.add("deadline in", durNone)
	}
	if strings.HasPrefix(state, "broken") {
		r.add("repair", "coordctl repair latch --key KEY --reset N | --delete")
	}
	if count < 0 || count > initial {
		r.bad("count %d is outside 0..initial (%d)", count, initial)
	}
	return r
}

func decodeZSet(s *snapshot, r *report) *report {
	now := float64(s.NowMs)
	var sem, rw, conc bool
	for _, m := range s.ZSet {
		switch {
		case m.Member == "capacity" || m.Member == "multi" || m.Member == "waiting" || strings.HasPrefix(m.Member, "P:"):
			sem = true
		case strings.HasPrefix(m.Member, "R:") || strings.HasPrefix(m.Member, "W:") || strings.HasPrefix(m.Member, "Q:"):
			rw = true
		case m.Member == "#":
			conc = true
		}
	}
	left := func(score float64) time.Duration {
		if math.IsInf(score, 1) {
			return durNone
		}
		if math.IsNaN(score) || math.IsInf(score, -1) {
			return 0
		}
		return time.Duration(score-now) * time.Millisecond
	}
	switch {
	case sem && !rw && !conc:
		r.Kind = kindSemaphore
		var capacity, used int64
		holders, noExpiry := 0, 0
		for _, m := range s.ZSet {
			switch {
			case m.Member == "capacity":
				capacity = int64(-m.Score)
			case m.Member == "multi" || m.Member == "waiting":
			case strings.HasPrefix(m.Member, "P:"):
				parts := strings.SplitN(m.Member, ":", 3)
				n, err := strconv.ParseInt(parts[1], 10, 64)
				if len(parts) != 3 || err != nil || n < 1 {
					r.bad("member %q is not P:<n>:<token>", m.Member)
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
				r.Entries = append(r.Entries, entry{{"permits", n}, {"owner", tok(parts[2])}, {"expires in", left(m.Score)}})
			default:
				r.bad("member %q is not a semaphore member", m.Member)
			}
		}
		r.add("capacity", capacity)
		r.add("used", used)
		r.add("free", max(capacity-used, 0))
		r.add("holders", holders)
		r.add("without expiry", noExpiry)
		r.add("waiters", hasMember(s, "waiting"))
		if capacity < 1 {
			r.bad("no capacity record")
		}
		if noExpiry > 0 {
			r.add("repair", repairHint(s))
		}
		return r
	case rw && !sem && !conc:
		r.Kind = kindRWLease
		readers, writer, waiting := 0, 0, 0
		for _, m := range s.ZSet {
			if len(m.Member) < 2 || m.Member[1] != ':' {
				r.bad("member %q is not an rwlease member (R:, W: or Q: and a token)", m.Member)
				continue
			}
			kind, token := m.Member[:1], m.Member[2:]
			switch kind {
			case "R", "W":
				if m.Score <= now {
					continue
				}
				role := map[string]string{"R": "reader", "W": "writer"}[kind]
				if kind == "R" {
					readers++
				} else {
					writer++
				}
				r.Entries = append(r.Entries, entry{{"role", role}, {"owner", tok(token)}, {"expires in", left(m.Score)}})
			case "Q":
				if -m.Score <= now {
					continue
				}
				waiting++
				r.Entries = append(r.Entries, entry{{"role", "waiting writer"}, {"owner", tok(token)}, {"expires in", left(-m.Score)}})
			default:
				r.bad("member %q is not an rwlease member (R:, W: or Q: and a token)", m.Member)
			}
		}
		r.add("readers", readers)
		r.add("writer", writer)
		r.add("waiting writers", waiting)
		if writer > 1 || (writer == 1 && readers > 0) {
			r.bad("a live writer with other live holders")
		}
		return r
	case conc && !sem && !rw:
		r.Kind = kindLimiter
		var limit, used int64
		leases := 0
		for _, m := range s.ZSet {
			if m.Member == "#" {
				limit = int64(-m.Score)
				continue
			}
			n, token, ok := strings.Cut(m.Member, ":")
			k, err := strconv.ParseInt(n, 10, 64)
			if !ok || err != nil {
				r.bad("member %q is not <permits>:<token>", m.Member)
				continue
			}
			if m.Score <= now {
				continue
			}
			leases++
			used += k
			r.Entries = append(r.Entries, entry{{"permits", k}, {"owner", tok(token)}, {"expires in", left(m.Score)}})
		}
		r.add("algorithm", "concurrency")
		r.add("limit", limit)
		r.add("held", used)
		r.add("remaining", max(limit-used, 0))
		r.add("leases", leases)
		return r
	}
	r.Kind = kindOther
	if sem || rw || conc {
		return r.bad("a sorted set mixing semaphore, rwlease and concurrency-limiter members")
	}
	return r.bad("a sorted set of no library layout (%d members)", s.ZCard)
}

func hasMember(s *snapshot, m string) bool {
	for _, z := range s.ZSet {
		if z.Member == m {
			return true
		}
	}
	return false
}

// addSibling reports the fence counter next to a fencing lease, or the
// lease next to a counter.
func addSibling(s *snapshot, r *report) {
	sib := s.Sibling
	if sib == nil {
		return
	}
	switch sib.Type {
	case "string":
		r.add(s.SiblingRole, sib.Key+" = "+sib.Str)
	case "hash":
		r.add(s.SiblingRole, sib.Key+" (held, token "+sib.Hash["fence"]+")")
	default:
		if len(s.SiblingTried) > 0 {
			r.add(s.SiblingRole, "not found among "+strings.Join(s.SiblingTried, ", "))
		} else {
			r.add(s.SiblingRole, sib.Key+" (none)")
		}
	}
}

// tagOf returns key up to its {hash tag} and the ':' after it
// ("p{job}:" of "p{job}:lock"), and whether it has one.
func tagOf(key string) (string, bool) {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return "", false
	}
	j := strings.IndexByte(key[i+1:], '}')
	end := i + 1 + j + 2 // through "}:"
	if j <= 0 || end > len(key) || key[end-1] != ':' {
		return "", false
	}
	return key[:end], true
}

// markedKey returns the lease key whose release mark key is (see
// engine.MarkKey): key without "\x00released" when that has a hash tag,
// else the prefix and the rest around the hash tag the mark added. ok is
// false when no key has key as its mark.
func markedKey(key string) (lease string, ok bool) {
	x, found := strings.CutSuffix(key, engine.MarkSuffix)
	if !found {
		return "", false
	}
	i := strings.IndexByte(x, '{')
	if i < 0 {
		return "", false
	}
	if j := strings.IndexByte(x[i+1:], '}'); j > 0 && reInt.MatchString(x[i+1:i+1+j]) {
		l := x[:i] + x[i+2+j:]
		if engine.MarkKeyOf(x[:i], l) == key {
			return l, true
		}
	}
	if engine.MarkKeyOf("", x) == key {
		return x, true
	}
	return "", false
}

// fieldEntries adds an entry per field of a field-lease hash (or of its
// release mark): the field, its owner token (truncated) and its TTL,
// flagging a field without expiry (why names what the library does
// instead) or without an owner token.
func fieldEntries(s *snapshot, r *report, h map[string]string, names []string, why string) {
	for _, f := range names {
		e := entry{{"field", f}, {"owner", tok(h[f])}}
		if ttl, ok := s.HashTTL[f]; ok {
			if ttl >= 0 {
				e = append(e, kv{"ttl", time.Duration(ttl) * time.Millisecond})
			} else {
				e = append(e, kv{"ttl", durNone})
				r.bad("field %q has no expiry: "+why, f)
			}
		}
		if !reToken.MatchString(h[f]) {
			r.bad("field %q does not hold an owner token", f)
		}
		r.Entries = append(r.Entries, e)
	}
}

// decodeMark decodes a release mark: what the last release of a lease key
// removed, kept so that a re-sent release reports the first send's
// outcome. A lock's or fencing lease's mark is the released key renamed
// (for the rest of its TTL, 5 s at most); a semaphore's or rwlease's a string holding
// the released id for 5 s; a field-lease hash's a hash of the released
// fields' owner tokens, each field for 5 s.
func decodeMark(s *snapshot, r *report) *report {
	r.Kind = kindMark
	lease, ok := markedKey(s.Key)
	if !ok {
		return r.bad("a key ending in \\x00released that is the release mark of no key")
	}
	r.add("marks", lease)
	switch s.Type {
	case "string":
		v := s.Str
		switch {
		case reToken.MatchString(strings.TrimSuffix(v, "+")):
			r.add("released", kindLock)
			r.add("owner", tok(strings.TrimSuffix(v, "+")))
		case strings.HasPrefix(v, "P:"):
			parts := strings.SplitN(v, ":", 3)
			n, err := strconv.ParseInt(parts[1], 10, 64)
			r.add("released", "semaphore permit")
			if len(parts) != 3 || err != nil || n < 1 {
				return r.bad("%q is not P:<n>:<token>", v)
			}
			r.add("permits", n)
			r.add("owner", tok(parts[2]))
		case len(v) > 2 && (v[:2] == "R:" || v[:2] == "W:"):
			r.add("released", map[byte]string{'R': "rwlease read lease", 'W': "rwlease write lease"}[v[0]])
			r.add("owner", tok(v[2:]))
		default:
			return r.bad("a release mark string holding no released lock, permit or lease id (%d bytes)", s.StrLen)
		}
		if s.PTTL == -1 {
			r.bad("a release mark always expires; this one has no TTL")
		}
		return r
	case "hash":
		h := s.Hash
		if _, fencing := h["owner"]; fencing {
			released := kindFencing
			if strings.HasSuffix(lease, "}:leader") {
				released = kindLeader + " (fencing lease)"
			}
			r.add("released", released)
			r.add("owner", tok(h["owner"]))
			if holder, ok := h["holder"]; ok {
				r.add("holder", holder)
			}
			r.add("fencing token", h["fence"])
			if !reInt.MatchString(h["fence"]) {
				r.bad("the fence field is not a canonical integer")
			}
			if s.PTTL == -1 {
				r.bad("a release mark always expires; this one has no TTL")
			}
			return r
		}
		r.add("released", "field leases")
		r.add("fields", s.HashLen)
		names := make([]string, 0, len(h))
		for k := range h {
			names = append(names, k)
		}
		sort.Strings(names)
		r.FieldTTLs = fieldTTLs(s, names)
		fieldEntries(s, r, h, names, "the library gives each field of a release mark 5 s")
		if s.PTTL != -1 {
			r.bad("a field-lease release mark has no key-level TTL; this one has one")
		}
		return r
	}
	return r.bad("a %s: no release mark is a %s", s.Type, s.Type)
}
