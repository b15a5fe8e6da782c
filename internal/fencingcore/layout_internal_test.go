package fencingcore

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/coordkit/coordination/internal/layout"
)

// tombstone reads a tombstone list of one to 8 owner tokens (22 bytes of
// base64url or a UUID), each followed by "!", in an owner field alone;
// anything else is no tombstone. The report names one abandoned token as
// before the lists, and every token of a longer list.
func TestTombstoneList(t *testing.T) {
	a, b := "AAAAAAAAAAAAAAAAAAAAAA", "0f8fad5b-d9cb-469f-a165-70867728950e"
	for _, c := range []struct {
		owner string
		extra bool
		want  []string
	}{
		{owner: a + "!", want: []string{a}},
		{owner: a + "!" + b + "!", want: []string{a, b}},
		{owner: strings.Repeat(a+"!", 8), want: slices.Repeat([]string{a}, 8)},
		{owner: strings.Repeat(a+"!", 9)},
		{owner: a + "!", extra: true},
		{owner: a},
		{owner: a + "+"},
		{owner: "!"},
		{owner: a + "!!"},
		{owner: "!" + a + "!"},
		{owner: a + "!garbage!"},
		{owner: strings.ToUpper(b) + "!"},
	} {
		h := map[string]string{"owner": c.owner}
		if c.extra {
			h["fence"] = "1"
		}
		if got := tombstone(h); !slices.Equal(got, c.want) {
			t.Errorf("tombstone(%v) = %q, want %q", h, got, c.want)
		}
	}
	for _, c := range []struct{ owner, field, want string }{
		{a + "!", "abandoned token", layout.Tok(a)},
		{a + "!" + b + "!", "abandoned tokens", layout.Tok(a) + " " + layout.Tok(b)},
	} {
		var r layout.Report
		LeaseLayout.Decode(&layout.Snapshot{Key: "k", Type: "hash", Hash: map[string]string{"owner": c.owner}, PTTL: 5000}, &r)
		// The text says them on one line; the JSON lists them.
		var got []string
		for _, l := range strings.Split(r.Text(), "\n") {
			if strings.HasPrefix(l, "abandoned") {
				got = append(got, l)
			}
		}
		if len(got) != 1 || strings.Join(strings.Fields(got[0]), " ") != c.field+": "+c.want || r.Problem != "" {
			t.Errorf("report of %q: %q, want %s: %s", c.owner, got, c.field, c.want)
		}
		js, _ := json.Marshal(&r)
		list, _ := json.Marshal(strings.Split(c.want, " "))
		if want := `"owner":"","state":"tombstone","abandoned_tokens":` + string(list); !strings.Contains(string(js), want) {
			t.Errorf("JSON of %q: %s, want it to hold %s", c.owner, js, want)
		}
	}
}
