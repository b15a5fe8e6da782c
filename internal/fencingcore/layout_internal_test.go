package fencingcore

import (
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
		var got []layout.Field
		for _, f := range r.Fields {
			if strings.HasPrefix(f.K, "abandoned") {
				got = append(got, f)
			}
		}
		if len(got) != 1 || got[0].K != c.field || got[0].V != c.want || r.Problem != "" {
			t.Errorf("report of %q: %+v, want %s: %s", c.owner, r, c.field, c.want)
		}
	}
}
