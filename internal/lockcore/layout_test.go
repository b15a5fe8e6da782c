package lockcore

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/coordkit/coordination/internal/layout"
)

// A waiter queue of owner tokens (a lock's) or of permit ids (a
// semaphore's) is no problem; another member is.
func TestFIFOQueueMembers(t *testing.T) {
	tok := "AAAAAAAAAAAAAAAAAAAAAA"
	for _, c := range []struct {
		member string
		bad    bool
	}{{tok, false}, {"P:2:" + tok, false}, {"P:0:" + tok, true}, {"P:x:" + tok, true}, {"garbage", true}} {
		s := &layout.Snapshot{Key: "k\x00fifo{1}", Type: "zset", PTTL: 3000, ZCard: 1, ZSet: []layout.Member{{Member: c.member, Score: 1}}}
		r := layout.Decode(s, []layout.Layout{FIFOQueueLayout})
		if (r.Problem != "") != c.bad {
			t.Errorf("%q: problem %q, want bad=%v", c.member, r.Problem, c.bad)
		}
	}
}

// The alive times hold waiters' times and lock_fifo_abandon's records of
// abandoned tokens ('!' and the record's end), told apart; a value that is
// neither is a problem.
func TestFIFOAliveRecords(t *testing.T) {
	tok, other := "AAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBB"
	for _, c := range []struct {
		value           string
		bad             bool
		waiters, record int64
	}{{"5000", false, 1, 0}, {"!5000", false, 0, 1}, {"!500", false, 0, 1}, {"!x", true, 0, 1}, {"x", true, 1, 0}} {
		s := &layout.Snapshot{Key: "k\x00fifo-alive{1}", Type: "hash", PTTL: 3000, NowMs: 1000, HashLen: 2,
			Hash: map[string]string{tok: c.value, other: "9000"}}
		r := layout.Decode(s, []layout.Layout{FIFOAliveLayout})
		if (r.Problem != "") != c.bad {
			t.Errorf("%q: problem %q, want bad=%v", c.value, r.Problem, c.bad)
		}
		if !c.bad && len(r.Entries) != 2 {
			t.Errorf("%q: %d entries, want 2", c.value, len(r.Entries))
		}
		got := map[string]any{}
		for _, f := range r.Fields {
			got[f.K] = f.V
		}
		if got["waiters"] != c.waiters+1 { // the other token waits
			t.Errorf("%q: waiters %v, want %d", c.value, got["waiters"], c.waiters+1)
		}
		if rec, ok := got["abandoned acquisitions (not queued)"]; (c.record > 0) != ok || ok && rec != int(c.record) {
			t.Errorf("%q: abandoned records %v (%v), want %d", c.value, rec, ok, c.record)
		}
	}
}

// A tombstone (a lock's, a lease field's) reads as prose in the text and
// as machine values in JSON: an empty owner, state "tombstone" and the
// tokens as a list (the JSON owner used to carry the prose, and two
// tombstones gave two "abandoned_token" keys).
func TestTombstoneJSONIsMachineValues(t *testing.T) {
	a, b := "AAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBB"
	lockSnap := &layout.Snapshot{Key: "jobs", Type: "string", PTTL: 3000, Str: a + "!" + b + "!"}
	r := layout.Decode(lockSnap, []layout.Layout{LockLayout})
	if r.Problem != "" {
		t.Fatalf("problem %q", r.Problem)
	}
	wantText := "key:   jobs\nkind:  lock\nttl:   3s\n" +
		"owner:            none (free): the tombstones of 2 abandoned acquisitions\n" +
		"abandoned token:  AAAAAAAA…\nabandoned token:  BBBBBBBB…\n"
	if got := r.Text(); got != wantText {
		t.Errorf("text:\n%s\nwant:\n%s", got, wantText)
	}
	js, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"key":"jobs","kind":"lock","ttl_ms":3000,"owner":"","state":"tombstone","abandoned_tokens":["AAAAAAAA…","BBBBBBBB…"]}`; string(js) != want {
		t.Errorf("JSON %s, want %s", js, want)
	}

	fieldSnap := &layout.Snapshot{Key: "fields", Type: "hash", PTTL: -1, HashLen: 1,
		Hash: map[string]string{"f": a + "!"}, HashTTL: map[string]int64{"f": 2000}}
	r = layout.Decode(fieldSnap, []layout.Layout{FieldLeasesLayout})
	if r.Problem != "" {
		t.Fatalf("problem %q", r.Problem)
	}
	if got, want := r.Text(), "  - field=f  owner=none (free): the tombstone of an abandoned acquisition  abandoned token=AAAAAAAA…  ttl=2s\n"; !strings.HasSuffix(got, want) {
		t.Errorf("text:\n%s\nwant it to end with:\n%s", got, want)
	}
	js, err = json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"entries":[{"field":"f","owner":"","state":"tombstone","abandoned_tokens":["AAAAAAAA…"],"ttl_ms":2000}]`; !strings.Contains(string(js), want) {
		t.Errorf("JSON %s, want it to hold %s", js, want)
	}
}
