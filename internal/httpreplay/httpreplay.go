// Package httpreplay encodes an HTTP response as the idempotency
// middleware stores it for replay (a completed claim's result), and decodes
// it: shared by package idempotency and coordctl's idempotency show.
package httpreplay

import (
	"encoding/binary"
	"net/http"
	"sort"
)

// Response is a response as kept for replay: status, the kept headers and
// the body.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Version is the first byte of an encoded response.
const Version = 1

// Encode serialises the response: version byte, status, header count, then
// per header its name and values (each length-prefixed, uvarints), then the
// body (the rest). Headers are written in name order so equal responses
// encode equally.
func (s Response) Encode() []byte {
	names := make([]string, 0, len(s.Header))
	for n := range s.Header {
		names = append(names, n)
	}
	sort.Strings(names)
	b := []byte{Version}
	b = binary.AppendUvarint(b, uint64(s.Status))
	b = binary.AppendUvarint(b, uint64(len(names)))
	str := func(v string) {
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
	}
	for _, n := range names {
		str(n)
		b = binary.AppendUvarint(b, uint64(len(s.Header[n])))
		for _, v := range s.Header[n] {
			str(v)
		}
	}
	return append(b, s.Body...)
}

// Decode parses bytes written by Encode; ok is false for anything else.
func Decode(b []byte) (s Response, ok bool) {
	if len(b) == 0 || b[0] != Version {
		return Response{}, false
	}
	b = b[1:]
	bad := false
	num := func(max uint64) uint64 {
		v, n := binary.Uvarint(b)
		if n <= 0 || v > max {
			bad = true
			return 0
		}
		b = b[n:]
		return v
	}
	str := func() string {
		n := num(uint64(len(b)))
		if bad || n > uint64(len(b)) {
			bad = true
			return ""
		}
		v := string(b[:n])
		b = b[n:]
		return v
	}
	s = Response{Header: http.Header{}}
	s.Status = int(num(999))
	count := num(uint64(len(b)))
	for i := uint64(0); i < count && !bad; i++ {
		name := str()
		nv := num(uint64(len(b)))
		vals := make([]string, 0, min(nv, 16))
		for j := uint64(0); j < nv && !bad; j++ {
			vals = append(vals, str())
		}
		s.Header[name] = vals
	}
	if bad || s.Status < 100 {
		return Response{}, false
	}
	s.Body = b
	return s, true
}
