package idempotency

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"

	"github.com/coordkit/coordination/internal/httpreplay"
	"github.com/coordkit/coordination/internal/sentinel"
)

// recorder passes a handler's response through to the client while keeping
// a copy of its status, the chosen headers (as they were when the status
// was written) and its body, up to a size bound.
type recorder struct {
	w       http.ResponseWriter
	names   []string // canonical header names to keep
	limit   int
	status  int
	header  http.Header
	body    bytes.Buffer
	over    bool // the body went past limit; body is dropped
	written bool // the final status was written
}

func newRecorder(w http.ResponseWriter, names []string, limit int) *recorder {
	return &recorder{w: w, names: names, limit: limit}
}

// Header returns the underlying writer's header map.
func (r *recorder) Header() http.Header { return r.w.Header() }

// WriteHeader records the final status and a snapshot of the chosen
// headers. Informational statuses (1xx other than 101) pass through
// unrecorded.
func (r *recorder) WriteHeader(code int) {
	if !r.written && code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		r.w.WriteHeader(code)
		return
	}
	if !r.written {
		r.written = true
		r.status = code
		r.header = pickHeaders(r.w.Header(), r.names)
	}
	r.w.WriteHeader(code)
}

// Write records p (while under the bound) and passes it through.
func (r *recorder) Write(p []byte) (int, error) {
	if !r.written {
		r.WriteHeader(http.StatusOK)
	}
	if !r.over {
		if r.body.Len()+len(p) > r.limit {
			r.over = true
			r.body = bytes.Buffer{}
		} else {
			r.body.Write(p)
		}
	}
	return r.w.Write(p)
}

// Flush sends buffered data to the client when the underlying writer can.
func (r *recorder) Flush() {
	if !r.written {
		r.WriteHeader(http.StatusOK)
	}
	if f, ok := r.w.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap returns the underlying writer, for http.ResponseController.
func (r *recorder) Unwrap() http.ResponseWriter { return r.w }

// response returns what the handler sent: net/http sends 200 with the
// headers as they are when a handler writes nothing.
func (r *recorder) response() storedResponse {
	if !r.written {
		return storedResponse{Status: http.StatusOK, Header: pickHeaders(r.w.Header(), r.names)}
	}
	return storedResponse{Status: r.status, Header: r.header, Body: r.body.Bytes()}
}

func pickHeaders(h http.Header, names []string) http.Header {
	out := http.Header{}
	for _, n := range names {
		if v, ok := h[n]; ok {
			out[n] = slices.Clone(v)
		}
	}
	return out
}

// storedResponse is a response as kept for replay (its encoding is
// package httpreplay's).
type storedResponse = httpreplay.Response

// errBadRecord is returned when stored bytes are not a response this
// package encoded. It matches coordination.ErrBadState.
var errBadRecord = fmt.Errorf("%w: the stored response is unreadable", sentinel.ErrBadState)

// decodeResponse parses bytes written by Encode; it returns errBadRecord
// for anything else.
func decodeResponse(b []byte) (storedResponse, error) {
	s, ok := httpreplay.Decode(b)
	if !ok {
		return storedResponse{}, errBadRecord
	}
	return s, nil
}
