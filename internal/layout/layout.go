// Package layout describes what a key of the library holds, for coordctl
// inspect and repair: a Snapshot of the key (read at one server instant),
// the Layouts the primitives declare (each in its internal/<primitive>core
// package), and Decode, which finds the key's layout in a table of them and
// decodes it into a Report (kind, fields, entries, problem).
//
// Decode is pure: no server, no I/O, and no panic on any snapshot, however
// corrupt or hostile the values (coordctl's FuzzDecode runs it over the
// whole table).
package layout

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Kinds that belong to no primitive.
const (
	// KindMissing is a key that does not exist (TYPE none): not corrupt.
	KindMissing = "missing"
	// KindUnknown is a key of no layout of the table.
	KindUnknown = "unknown"
)

// Snapshot is what was read of one key at one server instant (NowMs):
// its type, TTL and contents, bounded by the reader (Str and Hash or ZSet
// may hold only part of the value; StrLen, HashLen and ZCard are the full
// sizes). Only the fields of Type are set.
type Snapshot struct {
	Key     string // the full key, prefix included
	Prefix  string // the key prefix Key was read under (for the commands a report suggests)
	Type    string // TYPE: string, hash, zset, set, list, stream, none
	PTTL    int64  // ms; -1 no expiry, -2 missing
	NowMs   int64  // server time, ms
	NowUs   int64  // server time, µs
	Str     string // a string's value, possibly truncated
	StrLen  int64  // the string's full length in bytes
	Hash    map[string]string
	HashTTL map[string]int64 // per field (HPTTL) in ms, -1 none; nil when not read or the server has no HPTTL
	HashLen int64
	ZSet    []Member // members in score order, possibly the first ones only
	ZCard   int64
	SCard   int64
	// Sibling is the key read next to this one (a fencing lease's fence
	// counter, or a counter's lease) when the key has a {hash tag}, and
	// SiblingRole what it is to this key ("fence counter", "lease").
	Sibling     *Snapshot
	SiblingRole string
	// SiblingTried are the keys the lease was looked for at, next to a
	// fence counter (said when none holds one).
	SiblingTried []string
	// Shared is the shared counter hash (the fencing layout of issue 24)
	// whose field named Key holds a fence counter, when the reader found
	// one there: then a Key that does not exist reads as that counter (a
	// string: Str its value, PTTL the hash's), and a Key holding the
	// earlier layout's tombstone keeps its own type and sets SharedValue.
	Shared      string
	SharedValue string
}

// Member is one sorted-set member and its score.
type Member struct {
	Member string
	Score  float64
}

// Report is a decoded key: what kind it is and what it says. Its text
// (Text) and JSON (MarshalJSON) forms are what coordctl prints.
type Report struct {
	Key     string
	Kind    string  // a Layout's Kind, or KindMissing, KindUnknown
	TTL     int64   // ms; -1 no expiry, -2 missing
	Fields  []Field // in the order they are printed
	Entries []Entry // holders, leases, readers ...
	Problem string  // why the layout is corrupt (Kind says what it looked like); "" when it is not
	// FieldTTLs is what the ttl line says instead of TTL for a hash whose
	// fields expire (HPTTL) and the key not: "per field: ...".
	FieldTTLs string
}

// Field is one named value of a report. V is printed as text: a string
// through Shown, a time.Duration rounded to the millisecond (None as
// "none"; in JSON as milliseconds or null), anything else with fmt.
type Field struct {
	K string
	V any
}

// Entry is one item of a report's list: a holder, a lease, a reader.
type Entry []Field

// Split is a field value said one way in a report's text and another in
// its JSON: prose for a reader (Text), a machine value for a program
// (JSON). A side that is [Omitted] leaves the field out of that form.
type Split struct{ Text, JSON any }

// String returns the text side, as Report.Text prints it ("" when
// Omitted).
func (s Split) String() string {
	if s.Text == Omitted {
		return ""
	}
	return ValueText(s.Text)
}

// Omitted, as a side of a [Split], leaves the field out of that form.
var Omitted any = omitted{}

type omitted struct{}

// textSide returns the value Report.Text prints for v, false when the
// field is left out of the text.
func textSide(v any) (any, bool) {
	if s, ok := v.(Split); ok {
		return s.Text, s.Text != Omitted
	}
	return v, true
}

// jsonSide returns the value the JSON holds for v, false when the field
// is left out of the JSON.
func jsonSide(v any) (any, bool) {
	if s, ok := v.(Split); ok {
		return s.JSON, s.JSON != Omitted
	}
	return v, true
}

// Add appends the field k = v.
func (r *Report) Add(k string, v any) { r.Fields = append(r.Fields, Field{k, v}) }

// Bad records why the key is corrupt, unless a reason was recorded
// already (the first one found is the one said).
func (r *Report) Bad(format string, a ...any) {
	if r.Problem == "" {
		r.Problem = fmt.Sprintf(format, a...)
	}
}

// MarshalJSON writes the report as one object, fields in order: key,
// kind, ttl_ms, the fields (see jsonName: names with '_' for ' ' and '-',
// durations in milliseconds named with "_ms"), entries and problem.
func (r *Report) MarshalJSON() ([]byte, error) {
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
		if v, ok := jsonSide(f.V); ok {
			write(jsonName(f.K, v), jsonValue(v))
		}
	}
	if r.Entries != nil {
		var es []json.RawMessage
		for _, e := range r.Entries {
			var eb strings.Builder
			eb.WriteString("{")
			for _, f := range e {
				v, ok := jsonSide(f.V)
				if !ok {
					continue
				}
				if eb.Len() > 1 {
					eb.WriteString(",")
				}
				kb, _ := json.Marshal(jsonName(f.K, v))
				vb, _ := json.Marshal(jsonValue(v))
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

// jsonName is a field's JSON name: its name with '_' for ' ' and '-', and
// "_ms" after the name of a duration (written in milliseconds), so that
// every field has one unit and names it (ttl_ms, deadline_in_ms).
func jsonName(k string, v any) string {
	n := strings.NewReplacer(" ", "_", "-", "_").Replace(k)
	if _, ok := v.(time.Duration); ok && !strings.HasSuffix(n, "_ms") {
		n += "_ms"
	}
	return n
}

// jsonValue turns durations into milliseconds.
func jsonValue(v any) any {
	if d, ok := v.(time.Duration); ok {
		if d == None {
			return nil
		}
		return d.Milliseconds()
	}
	return v
}

// Text writes the report for a terminal: key, kind and ttl lines, a line
// per field (aligned), a line per entry, and the problem on one line
// after ProblemLabel.
func (r *Report) Text() string {
	var b strings.Builder
	ttl := TTLText(r.TTL)
	if r.FieldTTLs != "" {
		ttl = r.FieldTTLs
	}
	fmt.Fprintf(&b, "key:   %s\nkind:  %s\nttl:   %s\n", Shown(r.Key), r.Kind, ttl)
	w := 0
	for _, f := range r.Fields {
		if _, ok := textSide(f.V); ok {
			w = max(w, len(f.K))
		}
	}
	for _, f := range r.Fields {
		if v, ok := textSide(f.V); ok {
			fmt.Fprintf(&b, "%-*s  %s\n", w+1, f.K+":", ValueText(v))
		}
	}
	for _, e := range r.Entries {
		var parts []string
		for _, f := range e {
			if v, ok := textSide(f.V); ok {
				parts = append(parts, f.K+"="+ValueText(v))
			}
		}
		fmt.Fprintf(&b, "  - %s\n", strings.Join(parts, "  "))
	}
	if r.Problem != "" {
		fmt.Fprintf(&b, "%s%s\n", r.ProblemLabel(), OneLine(r.Problem))
	}
	return b.String()
}

// ProblemLabel is what precedes the problem in a report's text: "CORRUPT: "
// for a key of a library layout that does not hold what the layout says,
// "not a library key: " for a key of no layout (KindUnknown), which is
// nothing wrong.
func (r *Report) ProblemLabel() string {
	if r.Kind == KindUnknown {
		return "not a library key: "
	}
	return "CORRUPT: "
}

// OneLine is s with every control character (a newline, a tab, ...)
// written as its Go escape (\n, \t, \x00), so that it prints on one line.
func OneLine(s string) string {
	var b strings.Builder
	for _, c := range s {
		if unicode.IsControl(c) {
			q := strconv.QuoteRune(c)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// TTLText says a TTL in ms (-1 none, below that missing) for the ttl line.
func TTLText(ms int64) string {
	switch {
	case ms == -1:
		return "none (never expires)"
	case ms < -1:
		return "-"
	}
	return (time.Duration(ms) * time.Millisecond).String()
}

// ValueText says a field's value as Report.Text prints it.
func ValueText(v any) string {
	switch x := v.(type) {
	case time.Duration:
		if x == None {
			return "none"
		}
		return x.Round(time.Millisecond).String()
	case string:
		return Shown(x)
	}
	return fmt.Sprint(v)
}

// Shown is a key, identity or value as printed: quoted (Go syntax) when
// it has bytes a terminal would not show as they are, "(unnamed)" when
// empty.
func Shown(id string) string {
	if id == "" {
		return "(unnamed)"
	}
	if q := strconv.Quote(id); q[1:len(q)-1] != id {
		return q
	}
	return id
}

// ShellQuote quotes s for a POSIX shell when it needs it (for the
// commands a report suggests).
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:._/-@%+=,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// None is a duration field that does not apply: printed "none", null in
// JSON.
const None = time.Duration(math.MinInt64)

// Tombstones returns the owner tokens of a tombstone list v, oldest
// first: one to eight tokens, each followed by '!', the value the cleanup
// of an abandoned acquisition leaves in a single-holder lease (a lock
// key, a field lease's field, a fencing lease's owner; fragment
// lua/fragments/stone_list.lua); nil when v is not one.
func Tombstones(v string) []string {
	body, ok := strings.CutSuffix(v, "!")
	if !ok {
		return nil
	}
	ts := strings.Split(body, "!")
	if len(ts) > 8 {
		return nil
	}
	for _, t := range ts {
		if !IsToken(t) {
			return nil
		}
	}
	return ts
}

// Tok shows an owner token truncated to 8 characters: enough to tell
// holders apart, not enough to act as one.
func Tok(t string) string {
	if len(t) <= 8 {
		return t
	}
	return t[:8] + "…"
}

var (
	reToken = regexp.MustCompile(`^([A-Za-z0-9_-]{22}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$`)
	reInt   = regexp.MustCompile(`^(0|[1-9][0-9]*)$`)
)

// IsToken reports whether t is an owner token as the library writes it: a
// version 4 UUID in 22 bytes of base64url (engine.NewToken), or in the 36
// bytes of lower-case hex and '-' that earlier versions wrote.
func IsToken(t string) bool { return reToken.MatchString(t) }

// IsInt reports whether n is a canonical non-negative decimal integer
// (no sign, no leading zero), of any length.
func IsInt(n string) bool { return reInt.MatchString(n) }

// ExpiresIn is the time left until a sorted-set score that is an expiry
// in server ms: None for +inf (no expiry), 0 for NaN and -inf.
func ExpiresIn(s *Snapshot, score float64) time.Duration {
	if math.IsInf(score, 1) {
		return None
	}
	if math.IsNaN(score) || math.IsInf(score, -1) {
		return 0
	}
	return time.Duration(score-float64(s.NowMs)) * time.Millisecond
}

// Has reports whether the hash s holds every one of fields.
func (s *Snapshot) Has(fields ...string) bool {
	for _, f := range fields {
		if _, ok := s.Hash[f]; !ok {
			return false
		}
	}
	return true
}

// AnyMember reports whether a member of the sorted set s satisfies is.
func (s *Snapshot) AnyMember(is func(member string) bool) bool {
	for _, m := range s.ZSet {
		if is(m.Member) {
			return true
		}
	}
	return false
}
