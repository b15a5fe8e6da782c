package idempotencycore

import (
	"strings"
	"testing"

	"github.com/coordkit/coordination/internal/layout"
)

const tok = "0b9e3c1e-52f1-4a3c-9d6e-2b1f5c7e8a90"

func decode(v string, pttl int64) *layout.Report {
	s := &layout.Snapshot{Key: "k", Type: "string", PTTL: pttl, Str: v, StrLen: int64(len(v))}
	return layout.Decode(s, []layout.Layout{ClaimLayout})
}

// A fingerprint length near 2^63 is a bad fingerprint: its end
// overflowed, and slicing there panicked (found by generated snapshots).
func TestClaimFingerprintOverflow(t *testing.T) {
	for _, n := range []string{"9223372036854775807", "9223372036854775790"} {
		r := decode("P60000:2:"+tok+":"+n+":x", 5000)
		if r.Kind != "idempotency claim" || r.Problem != "a bad fingerprint" {
			t.Errorf("pending, fp length %s: %q %q", n, r.Kind, r.Problem)
		}
		if res, instead := ClaimResult("C" + tok + ":" + n + ":x"); res != "" || instead != "bad fingerprint" {
			t.Errorf("completed, fp length %s: ClaimResult = %q, %q", n, res, instead)
		}
	}
}

// Each state of a claim decodes to its fields, and ClaimResult returns a
// completed claim's result.
func TestClaimStates(t *testing.T) {
	for _, c := range []struct {
		v     string
		pttl  int64
		text  string // lines the report has
		probl string
	}{
		{"P60000:17:" + tok + ":3:abc", 5000, "state:          pending\nfencing token:  17\nowner:          0b9e3c1e…\nresult ttl:     1m0s\nfingerprint:    present (3 bytes)\n", ""},
		{"C" + tok + ":-:\x01\xc8\x01body", 5000, "state:         completed\ncompletion:    0b9e3c1e…\nfingerprint:   none\nresult bytes:  7\nstatus:        200\n", ""},
		{"A17:" + tok, 5000, "state:          abandoned\nfencing token:  17\nabandon id:     0b9e3c1e…\n", ""},
		{"A17:" + tok, -1, "", "an abandoned claim lasts 5 s; this one has no TTL"},
		{"F17:" + tok + ":3:abc", 5000, "state:          failed\nfencing token:  17\nfail id:        0b9e3c1e…\nnext claim:     none until it expires or is forgotten (the work's outcome is unknown)\nfingerprint:    present (3 bytes)\n", ""},
		{"F17:" + tok + ":9:abc", 5000, "", "a bad fingerprint"},
		{"F17:" + tok + ":-:", -1, "", "a claim always has a TTL; this one has none"},
		{"P60000:0:" + tok + ":-:", 5000, "state:  pending\n", "a pending claim without a valid fence"},
		{"C" + tok + ":-:r", -1, "", "a claim always has a TTL; this one has none"},
	} {
		r := decode(c.v, c.pttl)
		if !strings.Contains(r.Text(), c.text) || !strings.HasPrefix(r.Problem, c.probl) || (c.probl == "") != (r.Problem == "") {
			t.Errorf("%q:\n%s\nwant lines %q and problem %q", c.v, r.Text(), c.text, c.probl)
		}
	}
	if res, instead := ClaimResult("C" + tok + ":2:fpresult"); res != "result" || instead != "" {
		t.Errorf("ClaimResult = %q, %q; want the result", res, instead)
	}
	if _, instead := ClaimResult("P60000:17:" + tok + ":-:"); instead != "pending" {
		t.Errorf("ClaimResult of a pending claim: %q", instead)
	}
	if _, instead := ClaimResult("F17:" + tok + ":-:"); instead != "failed" {
		t.Errorf("ClaimResult of a failed claim: %q", instead)
	}
	if _, instead := ClaimResult("A17:" + tok); instead != "abandoned" {
		t.Errorf("ClaimResult of an abandoned claim: %q", instead)
	}
}
