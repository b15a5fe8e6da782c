package layout

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// A table of made-up layouts: Decode's rules, apart from any primitive's.
var table = []Layout{
	{Kind: "first", Type: "hash", Match: func(s *Snapshot) bool { return s.Has("a") },
		Decode: func(s *Snapshot, r *Report) { r.Add("a", s.Hash["a"]) }},
	{Kind: "second", Type: "hash", Match: func(s *Snapshot) bool { return s.Has("a", "b") },
		Decode: func(s *Snapshot, r *Report) { r.Add("b", s.Hash["b"]) }},
	{Kind: "rest", Type: "hash", Decode: func(s *Snapshot, r *Report) { r.Bad("rest %d", s.HashLen) }},
	{Kind: "x-set", Type: "zset", Mixes: "x", Match: func(s *Snapshot) bool { return s.AnyMember(func(m string) bool { return m == "x" }) },
		Decode: func(s *Snapshot, r *Report) {
			r.Entries = append(r.Entries, Entry{{K: "left", V: ExpiresIn(s, s.ZSet[0].Score)}, {K: "owner", V: Tok("0123456789")}})
		}},
	{Kind: "y-set", Type: "zset", Mixes: "y", Match: func(s *Snapshot) bool { return s.AnyMember(func(m string) bool { return m == "y" }) },
		Decode: func(*Snapshot, *Report) {}},
	{Kind: "z-set", Type: "zset", Mixes: "z", Match: func(s *Snapshot) bool { return s.AnyMember(func(m string) bool { return m == "z" }) },
		Decode: func(*Snapshot, *Report) {}},
}

func TestDecodeRules(t *testing.T) {
	const now = 1_700_000_000_000
	for _, c := range []struct {
		name    string
		s       Snapshot
		kind    string
		fields  string // the fields, "k=v" joined by ","
		problem string
	}{
		{"missing", Snapshot{Key: "k", Type: "none", PTTL: -2}, KindMissing, "", ""},
		{"first match wins", Snapshot{Key: "k", Type: "hash", PTTL: -1, Hash: map[string]string{"a": "1", "b": "2"}}, "first", "a=1", ""},
		{"nil Match fits every key of its type", Snapshot{Key: "k", Type: "hash", PTTL: -1, Hash: map[string]string{"b": "2"}, HashLen: 1}, "rest", "", "rest 1"},
		{"one Mixes layout", Snapshot{Key: "k", Type: "zset", PTTL: 5, NowMs: now, ZSet: []Member{{"x", now + 1500}}}, "x-set", "", ""},
		{"two Mixes layouts", Snapshot{Key: "k", Type: "zset", PTTL: 5, ZSet: []Member{{"z", 1}, {"y", 1}}}, KindUnknown, "", "a sorted set mixing x, y and z members"},
		{"no zset layout", Snapshot{Key: "k", Type: "zset", PTTL: 5, ZSet: []Member{{"w", 1}}, ZCard: 3}, KindUnknown, "", "a sorted set of no library layout (3 members)"},
		{"no string layout", Snapshot{Key: "k", Type: "string", PTTL: 5, Str: "m", StrLen: 9}, KindUnknown, "", "a string of no library layout (9 bytes)"},
		{"no layout of the type", Snapshot{Key: "k", Type: "list", PTTL: 5}, KindUnknown, "", "a list: no library layout is a list"},
	} {
		r := Decode(&c.s, table)
		var fields []string
		for _, f := range r.Fields {
			fields = append(fields, f.K+"="+ValueText(f.V))
		}
		if r.Kind != c.kind || strings.Join(fields, ",") != c.fields || r.Problem != c.problem {
			t.Errorf("%s: kind %q, fields %q, problem %q; want %q, %q, %q", c.name, r.Kind, fields, r.Problem, c.kind, c.fields, c.problem)
		}
	}
}

// Text and JSON: aligned fields, entries, durations (None as none/null)
// and the problem.
func TestReportForms(t *testing.T) {
	r := &Report{Key: "a\x00b", Kind: "thing", TTL: 1500}
	r.Add("left", 2500*time.Microsecond)
	r.Add("long name", None)
	r.Entries = []Entry{{{K: "owner", V: "x y"}, {K: "ttl", V: time.Second}}}
	r.Bad("bad %d", 1)
	r.Bad("not said")
	want := "key:   \"a\\x00b\"\nkind:  thing\nttl:   1.5s\nleft:       3ms\nlong name:  none\n  - owner=x y  ttl=1s\nCORRUPT: bad 1\n"
	if got := r.Text(); got != want {
		t.Errorf("Text:\n%q\nwant\n%q", got, want)
	}
	b, err := json.Marshal(r)
	// Durations are named with their unit (issue 22: "left" and "ttl"
	// were milliseconds next to ttl_ms).
	wantJSON := `{"key":"a\u0000b","kind":"thing","ttl_ms":1500,"left_ms":2,"long_name_ms":null,"entries":[{"owner":"x y","ttl_ms":1000}],"problem":"bad 1"}`
	if err != nil || string(b) != wantJSON {
		t.Errorf("JSON %s (%v)\nwant %s", b, err, wantJSON)
	}
	for ms, want := range map[int64]string{-1: "none (never expires)", -2: "-", 0: "0s", 61000: "1m1s"} {
		if got := TTLText(ms); got != want {
			t.Errorf("TTLText(%d) = %q, want %q", ms, got, want)
		}
	}
}

// The problem is said on one line, and a key of no layout is not called
// corrupt.
func TestProblemOneLine(t *testing.T) {
	r := &Report{Key: "k", Kind: KindUnknown}
	r.Bad("a string of no library layout: %s", "line one\nline two\tx")
	if got, want := r.Text(), "key:   k\nkind:  unknown\nttl:   0s\nnot a library key: a string of no library layout: line one\\nline two\\tx\n"; got != want {
		t.Errorf("Text:\n%q\nwant\n%q", got, want)
	}
	r.Kind = "lock"
	if !strings.Contains(r.Text(), "\nCORRUPT: a string") {
		t.Errorf("a corrupt lock is not said CORRUPT:\n%s", r.Text())
	}
}
