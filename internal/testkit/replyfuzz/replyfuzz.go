// Package replyfuzz fuzzes the strict decoders of scripts and commands
// (engine.Script, engine.Command) with arbitrary replies. A reply is built
// from bytes: a tag byte chooses the RESP value a go-redis reply can hold
// (nil, an integer, a bulk string, an array of replies, a double, a
// boolean, an error reply), followed by its payload; the encoding is the
// one of the committed corpora (testdata/fuzz/FuzzDecoders), so keep it.
//
// A primitive's package (or its internal/<primitive>core) declares
//
//	func FuzzDecoders(f *testing.F) { replyfuzz.Fuzz(f, decoders(), check) }
//	func TestDecoderSeedsAccepted(t *testing.T) { replyfuzz.SeedsAccepted(t, decoders()) }
//
// over its own scripts.
package replyfuzz

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/fuzzseed"
)

// The tags of a reply's encoding.
const (
	tagNil = iota
	tagInt
	tagSmallInt // one signed byte: the small codes decoders switch on
	tagString
	tagDecimal // a decimal string of a varint (fencing tokens)
	tagArray
	tagFloat
	tagBool
	tagError
	tagCount
)

// replyError is an error reply of the server, as go-redis returns it.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

// Reply reads one reply from b (the whole of a fuzz input).
func Reply(b []byte) any {
	v, _ := replyFrom(b, 0)
	return v
}

func replyFrom(b []byte, depth int) (any, []byte) {
	if len(b) == 0 {
		return nil, nil
	}
	tag, b := b[0]%tagCount, b[1:]
	switch tag {
	case tagInt:
		var x [8]byte
		n := copy(x[:], b)
		return int64(binary.LittleEndian.Uint64(x[:])), b[n:]
	case tagSmallInt:
		if len(b) == 0 {
			return int64(0), nil
		}
		return int64(int8(b[0])), b[1:]
	case tagString, tagError:
		n := 0
		if len(b) > 0 {
			n, b = int(b[0]), b[1:]
		}
		n = min(n, len(b))
		s := string(b[:n])
		if tag == tagError {
			return replyError(s), b[n:]
		}
		return s, b[n:]
	case tagDecimal:
		v, n := binary.Varint(b)
		if n <= 0 {
			return "", nil
		}
		return strconv.FormatInt(v, 10), b[n:]
	case tagArray:
		if len(b) == 0 || depth > 4 {
			return []any{}, b
		}
		n := int(b[0] % 12)
		b = b[1:]
		a := make([]any, 0, n)
		for range n {
			var v any
			v, b = replyFrom(b, depth+1)
			a = append(a, v)
		}
		return a, b
	case tagFloat:
		var x [8]byte
		n := copy(x[:], b)
		return math.Float64frombits(binary.LittleEndian.Uint64(x[:])), b[n:]
	case tagBool:
		return len(b) > 0 && b[0]&1 == 1, b[min(1, len(b)):]
	}
	return nil, b
}

// Bytes encodes a reply (nil, int, int64, string or []any of these) for
// [Reply]: the seeds.
func Bytes(v any) []byte {
	switch x := v.(type) {
	case nil:
		return []byte{tagNil}
	case int:
		return Bytes(int64(x))
	case int64:
		if x >= math.MinInt8 && x <= math.MaxInt8 {
			return []byte{tagSmallInt, byte(int8(x))}
		}
		return binary.LittleEndian.AppendUint64([]byte{tagInt}, uint64(x))
	case string:
		return append([]byte{tagString, byte(len(x))}, x...)
	case []any:
		b := []byte{tagArray, byte(len(x))}
		for _, e := range x {
			b = append(b, Bytes(e)...)
		}
		return b
	}
	panic(fmt.Sprintf("replyfuzz.Bytes: %T", v))
}

// Decoder is one script's or command's decoder with valid replies.
type Decoder struct {
	Name  string
	Run   func(reply any) (any, bool)
	Seeds [][]any // valid replies: one element is a scalar reply, more an array
}

// Script is the decoder of s, with valid replies as seeds.
func Script[R any](s *engine.Script[R], seeds ...[]any) Decoder {
	return Decoder{Name: s.Name(), Run: func(v any) (any, bool) { return s.Decode(v) }, Seeds: seeds}
}

// Command is the decoder of c for a request whose first argument is id.
func Command[R any](c *engine.Command[R], id any, seeds ...[]any) Decoder {
	return Decoder{Name: c.Name(), Run: func(v any) (any, bool) { return c.Decode(v, id) }, Seeds: seeds}
}

func seedReply(s []any) any {
	if len(s) == 1 {
		return s[0] // a scalar reply
	}
	return s
}

// Fuzz gives every decoder arbitrary replies: each either accepts the
// reply, with a result for which check returns nil (the invariants of what
// it accepts; an error for a type check does not know), or refuses it, and
// the refusal becomes a terminal error wrapping ErrBadState that names the
// script ([engine.UnexpectedReply]). No reply panics. The seeds are every
// decoder's, written to the committed corpus with COORD_WRITE_CORPUS=1.
func Fuzz(f *testing.F, decoders []Decoder, check func(result any) error) {
	f.Helper()
	var seeds [][]any
	for _, d := range decoders {
		for _, s := range d.Seeds {
			seeds = append(seeds, []any{Bytes(seedReply(s))})
		}
	}
	seeds = append(seeds, []any{[]byte{tagArray, 3, tagFloat, 1, 2, tagBool, 1, tagError, 3, 'E', 'R', 'R'}},
		[]any{[]byte{tagDecimal, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02}})
	fuzzseed.Seeds(f, seeds...)
	f.Fuzz(func(t *testing.T, data []byte) {
		v := Reply(data)
		for _, d := range decoders {
			r, ok := d.Run(v)
			if ok {
				if err := check(r); err != nil {
					t.Fatalf("%s accepted %#v as an invalid result: %v", d.Name, v, err)
				}
				continue
			}
			err := engine.UnexpectedReply(d.Name, v)
			if !errors.Is(err, engine.ErrBadState) || engine.Classify(err) != engine.Terminal || !strings.Contains(err.Error(), d.Name) {
				t.Fatalf("%s: refusal %v is not a terminal ErrBadState", d.Name, err)
			}
		}
	})
}

// SeedsAccepted proves the seeds are valid replies, so that the fuzzer
// starts from both sides of every decoder.
func SeedsAccepted(t *testing.T, decoders []Decoder) {
	t.Helper()
	for _, d := range decoders {
		for _, s := range d.Seeds {
			v := Reply(Bytes(seedReply(s)))
			if _, ok := d.Run(v); !ok {
				t.Errorf("%s refuses its seed %#v", d.Name, v)
			}
		}
	}
}

// CheckCommon checks the invariants of the engine's reply types: a
// [engine.Grant] (a non-negative retry time, none once acquired), an
// [engine.Outcome] (a named release outcome) and a bool; any other type is
// an error (a primitive's check handles its own types first).
func CheckCommon(r any) error {
	switch x := r.(type) {
	case engine.Grant:
		if x.RetryIn < 0 || (x.Acquired && x.RetryIn != 0) {
			return fmt.Errorf("grant %+v", x)
		}
	case engine.Outcome:
		if x < engine.Released || x > engine.NotOwned {
			return fmt.Errorf("outcome %d", x)
		}
	case bool:
	default:
		return fmt.Errorf("unchecked result type %T", r)
	}
	return nil
}
