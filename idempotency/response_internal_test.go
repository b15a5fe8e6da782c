package idempotency

import (
	"bytes"
	"net/http"
	"reflect"
	"testing"
)

func TestStoredResponseRoundTrip(t *testing.T) {
	for _, s := range []storedResponse{
		{Status: 200, Header: http.Header{}, Body: []byte{}},
		{Status: 201, Header: http.Header{"Location": {"/p/1"}, "X-Multi": {"a", "", "b"}}, Body: []byte("{}")},
		{Status: 204, Header: http.Header{"Empty": {}}, Body: []byte{}},
		{Status: 599, Header: http.Header{}, Body: bytes.Repeat([]byte{0, 0xff}, 1000)},
	} {
		got, err := decodeResponse(s.Encode())
		if err != nil {
			t.Fatalf("decode(encode(%+v)): %v", s, err)
		}
		if got.Status != s.Status || !bytes.Equal(got.Body, s.Body) || !reflect.DeepEqual(got.Header, s.Header) {
			t.Fatalf("round trip: got %+v, want %+v", got, s)
		}
	}
}

func TestDecodeResponseRejectsGarbage(t *testing.T) {
	valid := storedResponse{Status: 201, Header: http.Header{"Location": {"/p/1"}}, Body: []byte("body")}.Encode()
	for name, b := range map[string][]byte{
		"empty":          nil,
		"text":           []byte("not a response"),
		"other version":  append([]byte{2}, valid[1:]...),
		"status 0":       {1, 0, 0},
		"status 1000":    {1, 0xe8, 0x07, 0},
		"cut in headers": valid[:6],
		"huge count":     {1, 200, 1, 0xff, 0xff, 0xff, 0x0f},
		"bad varint":     {1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
	} {
		if _, err := decodeResponse(b); err != errBadRecord {
			t.Errorf("%s: err = %v, want errBadRecord", name, err)
		}
	}
}

func FuzzDecodeResponse(f *testing.F) {
	f.Add(storedResponse{Status: 201, Header: http.Header{"Location": {"/p/1"}}, Body: []byte("body")}.Encode())
	f.Add([]byte{1, 200, 1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeResponse(b)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to something that decodes equally.
		again, err := decodeResponse(s.Encode())
		if err != nil || again.Status != s.Status || !bytes.Equal(again.Body, s.Body) || len(again.Header) != len(s.Header) {
			t.Fatalf("re-decode of %+v: %+v, %v", s, again, err)
		}
	})
}

func TestParseKey(t *testing.T) {
	for _, tc := range []struct {
		in      []string
		key     string
		present bool
		bad     bool
	}{
		{nil, "", false, false},
		{[]string{"abc"}, "abc", true, false},
		{[]string{"  abc\t"}, "abc", true, false},
		{[]string{`"abc"`}, "abc", true, false},
		{[]string{`"a\"b\\c"`}, `a"b\c`, true, false},
		{[]string{`"a b"`}, "a b", true, false},
		{[]string{"a", "b"}, "", true, true},
		{[]string{""}, "", true, true},
		{[]string{`""`}, "", true, true},
		{[]string{`"abc`}, "", true, true},
		{[]string{`"abc"d`}, "", true, true},
		{[]string{`"a\x"`}, "", true, true},
		{[]string{`"a\"`}, "", true, true},
		{[]string{"\x7f"}, "", true, true},
		{[]string{"ü"}, "", true, true},
		{[]string{"123456789"}, "", true, true}, // longer than 8
		{[]string{`"12345678"`}, "12345678", true, false},
		{[]string{"a, b"}, "", true, true}, // a list: two lines folded into one
		{[]string{"a,"}, "", true, true},
		{[]string{`"a", "b"`}, "", true, true},
		{[]string{`a"b, c"`}, "", true, true}, // a quote inside a bare member quotes nothing
		{[]string{`"a, b"`}, "a, b", true, false},
		{[]string{`"a\", b"`}, `a", b`, true, false},
	} {
		key, present, bad := parseKey(tc.in, 8)
		if key != tc.key || present != tc.present || (bad != "") != tc.bad {
			t.Errorf("parseKey(%q) = %q, %v, %q; want %q, %v, bad=%v", tc.in, key, present, bad, tc.key, tc.present, tc.bad)
		}
	}
}

func TestDefaultReplayPolicy(t *testing.T) {
	for status, want := range map[int]bool{
		100: false, 101: false, 200: true, 201: true, 204: true, 303: true, 400: true, 404: true, 410: true,
		422: true, 401: false, 403: false, 407: false, 408: false, 409: false, 423: false, 424: false,
		425: false, 429: false, 500: false, 502: false, 503: false, 504: false,
	} {
		if got := DefaultReplayPolicy(status); got != want {
			t.Errorf("DefaultReplayPolicy(%d) = %v, want %v", status, got, want)
		}
	}
}

func TestDefaultFingerprint(t *testing.T) {
	req := func(method, target string) *http.Request {
		r, err := http.NewRequest(method, target, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	base := DefaultFingerprint(req("POST", "/a?b=1"), []byte("x"))
	if len(base) != 64 {
		t.Fatalf("fingerprint %q is not hex SHA-256", base)
	}
	if DefaultFingerprint(req("POST", "/a?b=1"), []byte("x")) != base {
		t.Fatal("fingerprint is not deterministic")
	}
	for name, fp := range map[string]string{
		"method": DefaultFingerprint(req("PUT", "/a?b=1"), []byte("x")),
		"path":   DefaultFingerprint(req("POST", "/b?b=1"), []byte("x")),
		"query":  DefaultFingerprint(req("POST", "/a?b=2"), []byte("x")),
		"body":   DefaultFingerprint(req("POST", "/a?b=1"), []byte("y")),
		// Length prefixes: moving bytes between fields changes the digest.
		"shift": DefaultFingerprint(req("POST", "/a?b=1x"), nil),
	} {
		if fp == base {
			t.Errorf("a different %s gives the same fingerprint", name)
		}
	}
}
