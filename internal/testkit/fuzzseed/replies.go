package fuzzseed

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"testing"
)

// A fuzzed reply is built from bytes: a tag byte chooses the RESP value a
// go-redis reply can hold (nil, an integer, a bulk string, an array of
// replies, a double, a boolean, an error reply), followed by its payload.
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

// ReplyError is an error reply of the server, as go-redis returns one: it
// satisfies go-redis' redis.Error (Error and RedisError).
type ReplyError string

// Error returns the error reply's text.
func (e ReplyError) Error() string { return string(e) }

// RedisError marks e as a server reply (go-redis' redis.Error).
func (ReplyError) RedisError() {}

// Reply reads one reply, of a type a go-redis script reply holds (nil,
// int64, string, []any, float64, bool or a [ReplyError]), from arbitrary
// bytes; any input gives a reply (an empty one: nil). Arrays nest at most
// five deep and hold at most 11 elements.
func Reply(b []byte) any {
	v, _ := replyFrom(b, 0)
	return v
}

// replyFrom reads one reply from b and returns the rest of b.
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
			return ReplyError(s), b[n:]
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

// ReplyBytes encodes v (nil, an int or int64, a string (at most 255
// bytes), or a []any of these) as bytes that [Reply] reads back as v, with
// ints as int64. Any other type panics.
func ReplyBytes(v any) []byte {
	switch x := v.(type) {
	case nil:
		return []byte{tagNil}
	case int:
		return ReplyBytes(int64(x))
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
			b = append(b, ReplyBytes(e)...)
		}
		return b
	}
	panic(fmt.Sprintf("ReplyBytes: %T", v))
}

// Decoder is one script's reply decoder under test: its name, the decoder
// (a script's decode function with its result boxed) and replies it must
// accept (each a []any: one element is a scalar reply, more an array).
type Decoder struct {
	Name   string
	Decode func(reply any) (any, bool)
	Seeds  [][]any
}

// seedReply is the reply a seed stands for.
func seedReply(s []any) any {
	if len(s) == 1 {
		return s[0] // a scalar reply
	}
	return s
}

// FuzzDecoders fuzzes every decoder of ds with arbitrary replies ([Reply]):
// each either accepts the reply with a result that check approves (nil),
// or refuses it, and then refused(name, reply) must be nil (callers check
// there that the refusal becomes the library's error). A panic fails the
// target. The corpus starts from every decoder's seeds (written with
// [Seeds]) plus a few replies of every other type.
func FuzzDecoders(f *testing.F, ds []Decoder, check func(result any) error, refused func(name string, reply any) error) {
	f.Helper()
	var seeds [][]any
	for _, d := range ds {
		for _, s := range d.Seeds {
			seeds = append(seeds, []any{ReplyBytes(seedReply(s))})
		}
	}
	seeds = append(seeds, []any{[]byte{tagArray, 3, tagFloat, 1, 2, tagBool, 1, tagError, 3, 'E', 'R', 'R'}},
		[]any{[]byte{tagDecimal, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02}})
	Seeds(f, seeds...)
	f.Fuzz(func(t *testing.T, data []byte) {
		v := Reply(data)
		for _, d := range ds {
			r, ok := d.Decode(v)
			if ok {
				if err := check(r); err != nil {
					t.Fatalf("%s accepted %#v as an invalid result: %v", d.Name, v, err)
				}
				continue
			}
			if err := refused(d.Name, v); err != nil {
				t.Fatalf("%s refused %#v: %v", d.Name, v, err)
			}
		}
	})
}

// DecoderSeedsAccepted fails t for each seed of ds that its decoder
// refuses, so that a fuzzer starts from both sides of every decoder.
func DecoderSeedsAccepted(t *testing.T, ds []Decoder) {
	t.Helper()
	for _, d := range ds {
		for _, s := range d.Seeds {
			if _, ok := d.Decode(Reply(ReplyBytes(seedReply(s)))); !ok {
				t.Errorf("%s refuses its seed %#v", d.Name, seedReply(s))
			}
		}
	}
}
