package faultproxy

import (
	"fmt"
)

// Limits of the splitter. They only guard the proxy against nonsense
// (a fuzzer's input, a corrupted stream); real servers stay far below them.
const (
	maxDepth = 1024    // nesting of aggregates
	maxLen   = 1 << 32 // bytes in one bulk string, elements in one aggregate
)

// level is one open aggregate while a frame is being split.
type level struct {
	left int64 // elements still expected; -1 for a streamed aggregate (ended by '.')
	attr bool  // an attribute: it precedes a value and is not an element itself
}

// splitter finds the boundaries of RESP2/RESP3 frames in a byte stream,
// incrementally: bytes may arrive split anywhere, and each call resumes where
// the last one stopped, so a frame is scanned once however it is cut.
//
// Replies (commands == false) are any RESP3 value: simple strings (+),
// errors (-), integers (:), bulk strings ($, with $-1 as RESP2's null),
// arrays (*, with *-1), maps (%), sets (~), pushes (>), null (_), doubles
// (,), booleans (#), bulk errors (!), verbatim strings (=), big numbers
// ((), attributes (|, kept in one frame with the value they precede), and
// streamed strings ($? with ;-chunks) and aggregates (*? %? ~? ended by .).
//
// Commands (commands == true) follow the server's rule: a frame whose first
// byte is '*' is a multibulk request (any RESP value is accepted inside it;
// the top-level bulk and simple strings are its arguments), anything else is
// an inline command, one line split on blanks (quotes are not interpreted).
// A command with no arguments (an empty line, *0, *-1) gets no reply.
//
// The zero value is not ready: set argStart to -1 (newSplitter does). A
// splitter is used by one goroutine.
type splitter struct {
	commands bool

	pos      int   // bytes of the current frame consumed
	scan     int   // where the search for the end of the current line resumes
	bulk     int64 // payload bytes + CRLF left in the current bulk string
	chunked  bool  // inside a streamed string: expecting ";<len>" chunks
	stack    []level
	argStart int  // start of the bulk string being read as an argument, or -1
	done     bool // the last call completed a frame; clear kind and args first

	// Results of the last completed frame, valid until the next call.
	kind byte     // type of the frame's value (after any attribute); 'i' for inline
	args [][2]int // command arguments as [start, end) offsets in the frame
}

func newSplitter(commands bool) *splitter {
	return &splitter{commands: commands, argStart: -1}
}

// protoError is a violation of RESP framing.
type protoError struct {
	off int
	msg string
}

// Error describes the violation and where it is.
func (e *protoError) Error() string {
	return fmt.Sprintf("faultproxy: RESP protocol error at byte %d of a frame: %s", e.off, e.msg)
}

func (s *splitter) fail(format string, a ...any) error {
	return &protoError{off: s.pos, msg: fmt.Sprintf(format, a...)}
}

// next scans buf, which holds the current frame from its first byte (plus
// whatever follows), from where the previous call stopped. It returns the
// frame's length once the frame is complete (kind and args then describe it),
// 0 when more bytes are needed (call again with buf extended, same start), or
// a *protoError. After an error the splitter must not be used again.
func (s *splitter) next(buf []byte) (int, error) {
	if s.done {
		s.done, s.kind, s.args = false, 0, s.args[:0]
	}
	for {
		if s.bulk > 0 {
			avail := int64(len(buf) - s.pos)
			if avail < s.bulk {
				s.pos += int(avail)
				s.bulk -= avail
				return 0, nil
			}
			s.pos += int(s.bulk)
			s.bulk = 0
			if buf[s.pos-2] != '\r' || buf[s.pos-1] != '\n' {
				return 0, s.fail("bulk string not followed by CRLF")
			}
			if s.argStart >= 0 {
				s.args = append(s.args, [2]int{s.argStart, s.pos - 2})
				s.argStart = -1
			}
			if s.chunked {
				continue
			}
			if s.valueDone() {
				return s.finish(), nil
			}
			continue
		}

		start := s.pos
		if s.scan < start {
			s.scan = start
		}
		end := -1
		for i := s.scan; i < len(buf); i++ {
			if buf[i] == '\n' {
				end = i
				break
			}
		}
		if end < 0 {
			s.scan = len(buf)
			return 0, nil
		}
		s.pos = end + 1
		s.scan = s.pos

		top := len(s.stack) == 0 && !s.chunked
		if s.commands && top && start == 0 && buf[0] != '*' {
			s.inline(buf[:end])
			return s.finish(), nil
		}
		if end == start || buf[end-1] != '\r' || end-1 == start {
			return 0, s.fail("line not ended by CRLF or empty")
		}
		typ, body := buf[start], buf[start+1:end-1]

		if s.chunked {
			if typ != ';' {
				return 0, s.fail("streamed string: want ';', got %q", typ)
			}
			n, ok := parseLen(body)
			if !ok || n < 0 {
				return 0, s.fail("streamed string: bad chunk length %q", body)
			}
			if n == 0 {
				s.chunked = false
				if s.valueDone() {
					return s.finish(), nil
				}
				continue
			}
			s.bulk = n + 2
			continue
		}

		if len(s.stack) == 0 && typ != '|' {
			s.kind = typ
		}
		arg := s.commands && len(s.stack) == 1 && !s.stack[0].attr && s.kind == '*'

		switch typ {
		case '+', '-', ':', '_', ',', '#', '(':
			if arg {
				s.args = append(s.args, [2]int{start + 1, end - 1})
			}
			if s.valueDone() {
				return s.finish(), nil
			}

		case '$', '!', '=':
			if typ == '$' && string(body) == "?" {
				s.chunked = true
				continue
			}
			n, ok := parseLen(body)
			switch {
			case !ok:
				return 0, s.fail("bad length %q", body)
			case n == -1 && typ == '$':
				if s.valueDone() {
					return s.finish(), nil
				}
				continue
			case n < 0:
				return 0, s.fail("negative length %d", n)
			}
			if arg && typ == '$' {
				s.argStart = s.pos
			}
			s.bulk = n + 2

		case '*', '%', '~', '>', '|':
			if string(body) == "?" && (typ == '*' || typ == '%' || typ == '~') {
				if err := s.push(level{left: -1}); err != nil {
					return 0, err
				}
				continue
			}
			n, ok := parseLen(body)
			switch {
			case !ok:
				return 0, s.fail("bad count %q", body)
			case n == -1 && typ == '*':
				if s.valueDone() {
					return s.finish(), nil
				}
				continue
			case n < 0:
				return 0, s.fail("negative count %d", n)
			}
			if typ == '%' || typ == '|' {
				n *= 2
			}
			if n == 0 {
				if typ == '|' {
					continue // an empty attribute: the value follows
				}
				if s.valueDone() {
					return s.finish(), nil
				}
				continue
			}
			if err := s.push(level{left: n, attr: typ == '|'}); err != nil {
				return 0, err
			}

		case '.':
			if len(body) != 0 || len(s.stack) == 0 || s.stack[len(s.stack)-1].left != -1 {
				return 0, s.fail("'.' outside a streamed aggregate")
			}
			s.stack = s.stack[:len(s.stack)-1]
			if s.valueDone() {
				return s.finish(), nil
			}

		default:
			return 0, s.fail("unknown type byte %q", typ)
		}
	}
}

func (s *splitter) push(l level) error {
	if len(s.stack) >= maxDepth {
		return s.fail("aggregates nested deeper than %d", maxDepth)
	}
	s.stack = append(s.stack, l)
	return nil
}

// valueDone records that a value ended and reports whether the frame is
// complete.
func (s *splitter) valueDone() bool {
	for len(s.stack) > 0 {
		top := &s.stack[len(s.stack)-1]
		if top.left < 0 {
			return false
		}
		top.left--
		if top.left > 0 {
			return false
		}
		attr := top.attr
		s.stack = s.stack[:len(s.stack)-1]
		if attr {
			return false // the attribute is complete; the value it annotates follows
		}
	}
	return true
}

func (s *splitter) finish() int {
	n := s.pos
	s.pos, s.scan, s.bulk, s.chunked, s.argStart = 0, 0, 0, false, -1
	s.stack = s.stack[:0]
	s.done = true
	return n
}

// inline splits an inline command line (without its '\n') on blanks.
func (s *splitter) inline(line []byte) {
	s.kind = 'i'
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	i := 0
	for i < len(line) {
		for i < len(line) && isBlank(line[i]) {
			i++
		}
		j := i
		for j < len(line) && !isBlank(line[j]) {
			j++
		}
		if j > i {
			s.args = append(s.args, [2]int{i, j})
		}
		i = j
	}
}

func isBlank(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'
}

// parseLen parses a RESP length or count: an optional '-' and decimal
// digits, at most maxLen in absolute value.
func parseLen(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
		if n > maxLen {
			return 0, false
		}
	}
	if neg {
		n = -n
	}
	return n, true
}
