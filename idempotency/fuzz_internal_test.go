package idempotency

import (
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/testkit/decoderfuzz"
	"github.com/coordkit/coordination/internal/testkit/fuzzseed"
)

// FuzzParseKey gives the Idempotency-Key parser arbitrary field values: an
// accepted key is non-empty printable ASCII within the length bound; a
// refusal says why; a value that is a list (a comma outside a quoted
// string) is refused as two field lines are; and any printable key, sent
// bare (when it has no surrounding blanks, leading quote or comma) or as a
// Structured Field string, reads back as itself. Its seeds and
// testdata/fuzz/FuzzParseKey run as a normal test.
func FuzzParseKey(f *testing.F) {
	fuzzseed.Seeds(f,
		[]any{"8e03978e-40d5-43e8-bc93-6894a57f9324", "", 255},
		[]any{`"quoted \"key\" \\ here"`, "", 255},
		[]any{`"unterminated`, "", 255},
		[]any{`"a"b`, "", 255},
		[]any{`"\x"`, "", 255},
		[]any{" \t padded \t", "", 255},
		[]any{"two", "fields", 255},
		[]any{"caf\xc3\xa9", "", 255},
		[]any{"toolong", "", 3},
		[]any{`""`, "", 255},
		[]any{"a, b", "", 255},
		[]any{`"a, b"`, "", 255},
	)
	f.Fuzz(func(t *testing.T, v, second string, maxLen int) {
		if maxLen < 1 || maxLen > 1<<16 {
			maxLen = 255
		}
		values := []string{v}
		if second != "" {
			values = append(values, second)
		}
		key, present, bad := parseKey(values, maxLen)
		if !present {
			t.Fatalf("parseKey(%q): not present", values)
		}
		_, _, two := parseKey([]string{"a", "b"}, maxLen)
		if isList(v) && bad != two {
			t.Fatalf("parseKey(%q): list refused with %q, want %q as for two lines", values, bad, two)
		}
		if bad != "" {
			if key != "" {
				t.Fatalf("parseKey(%q): key %q with a refusal", values, key)
			}
		} else {
			if len(values) != 1 || key == "" || len(key) > maxLen || !printable(key) {
				t.Fatalf("parseKey(%q) accepted %q", values, key)
			}
		}
		if !printable(v) || v == "" || len(v) > maxLen {
			return
		}
		quoted := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"`
		if got, _, bad := parseKey([]string{quoted}, maxLen); got != v || bad != "" {
			t.Fatalf("sf-string %s reads as %q (%s), want %q", quoted, got, bad, v)
		}
		if v[0] != '"' && strings.Trim(v, " \t") == v && !strings.Contains(v, ",") {
			if got, _, bad := parseKey([]string{v}, maxLen); got != v || bad != "" {
				t.Fatalf("bare %q reads as %q (%s)", v, got, bad)
			}
		}
	})
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// FuzzDefaultFingerprint checks that the request fingerprint is 64 hex
// digits, depends on nothing but the method, the escaped path, the raw
// query and the body, and tells apart requests that differ only in where
// one part ends and the next begins (the parts are length-prefixed).
func FuzzDefaultFingerprint(f *testing.F) {
	fuzzseed.Seeds(f,
		[]any{"POST", "/orders", "a=1", []byte(`{"qty":1}`)},
		[]any{"PUT", "/p/é and space", "", []byte{}},
		[]any{"POST", "/a", "b", []byte("c")},
		[]any{"", "", "", []byte(nil)},
	)
	f.Fuzz(func(t *testing.T, method, path, query string, body []byte) {
		r := &http.Request{Method: method, URL: &url.URL{Path: path, RawQuery: query}, Header: http.Header{"X": {"ignored"}}}
		fp := DefaultFingerprint(r, body)
		if b, err := hex.DecodeString(fp); err != nil || len(b) != 32 {
			t.Fatalf("fingerprint %q is not a hex SHA-256", fp)
		}
		r2 := &http.Request{Method: method, URL: &url.URL{Path: path, RawQuery: query}}
		if DefaultFingerprint(r2, append([]byte(nil), body...)) != fp {
			t.Fatal("fingerprint depends on headers or is not deterministic")
		}
		// Move one byte from the query to the body: another request, another
		// fingerprint.
		if query != "" {
			r3 := &http.Request{Method: method, URL: &url.URL{Path: path, RawQuery: query[:len(query)-1]}}
			if DefaultFingerprint(r3, append([]byte{query[len(query)-1]}, body...)) == fp {
				t.Fatal("moving a byte between query and body keeps the fingerprint")
			}
		}
	})
}

// decoders are the store scripts' decoders, each with replies it accepts.
func decoders() []fuzzseed.Decoder {
	return []fuzzseed.Decoder{
		// The started and completed replies are the claims as stored (the
		// script's replies changed with its cost, not the decoded answers).
		decoderfuzz.Of(beginScript, decodeBegin, []any{"P60000:1700000000000000:owner:-:"}, []any{-2}, []any{1200},
			[]any{"Cid:-:result"}, []any{"Cid:3:fp:result"}, []any{"F0"}, []any{"F1500"}),
		decoderfuzz.Of(completeScript, decode.Bool01, []any{1}, []any{0}),
		decoderfuzz.Of(failScript, decode.Bool01, []any{1}, []any{0}),
		decoderfuzz.Of(forgetScript, decode.Bool01, []any{1}, []any{0}),
		decoderfuzz.Of(abandonScript, decode.Bool01, []any{1}, []any{0}),
		decoderfuzz.Of(renewScript, decode.Bool01, []any{1}, []any{0}),
	}
}

// checkDecoded holds what every accepted reply must give.
func checkDecoded(r any) error {
	switch x := r.(type) {
	case beginReply:
		// Remaining is the key's PTTL for InProgress and Failed (0 when
		// the key is about to expire), zero otherwise.
		if x.State < Started || x.State > Failed || x.Remaining < 0 ||
			(x.State != Completed && x.Result != "") || (x.State == Started) != (x.Fence >= 3) ||
			(x.State != InProgress && x.State != Failed && x.Remaining != 0) {
			return fmt.Errorf("claim %+v", x)
		}
	case bool:
	default:
		return fmt.Errorf("unchecked result type %T", r)
	}
	return nil
}

// FuzzDecoders: decoderfuzz.Fuzz over decoders(), results checked by
// checkDecoded (seeds and testdata/fuzz run as a normal test).
func FuzzDecoders(f *testing.F) {
	decoderfuzz.Fuzz(f, decoders(), checkDecoded)
}

// TestDecoderSeedsAccepted: every seed is a reply its decoder accepts.
func TestDecoderSeedsAccepted(t *testing.T) {
	fuzzseed.DecoderSeedsAccepted(t, decoders())
}
