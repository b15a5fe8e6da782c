package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordination/internal/testkit/fuzzseed"
)

// The fuzz targets of the engine. Each also runs as a normal test over its
// seeds and its committed corpus (testdata/fuzz/<target>); `make fuzz-short`
// runs each for a bounded time, `make fuzz` for longer.

// A fuzz reply is built from bytes: a tag byte chooses the RESP value a
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

// replyBytes encodes a reply for replyFrom (seeds).
func replyBytes(v any) []byte {
	switch x := v.(type) {
	case nil:
		return []byte{tagNil}
	case int:
		return replyBytes(int64(x))
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
			b = append(b, replyBytes(e)...)
		}
		return b
	}
	panic(fmt.Sprintf("replyBytes: %T", v))
}

// decoder is one script's decoder with the invariants of what it accepts.
type decoder struct {
	name  string
	run   func(any) (any, bool)
	seeds [][]any // valid replies
}

func decoderOf[R any](s *Script[R], seeds ...[]any) decoder {
	return decoder{name: s.name, run: func(v any) (any, bool) { return s.decode(v) }, seeds: seeds}
}

// commandOf is decoderOf for a plain command, whose decoder also takes the
// request's id (id).
func commandOf[R any](c *Command[R], id any, seeds ...[]any) decoder {
	return decoder{name: c.name, run: func(v any) (any, bool) { return c.decode(v, id) }, seeds: seeds}
}

// fuzzedDecoders are the decoders of every script and command: the lock,
// the fencing lock (also leader election's and redlock's), the semaphore,
// idempotency, the latch, the named field leases, the rate limiters and the
// read-write lease.
func fuzzedDecoders() []decoder {
	return []decoder{
		commandOf(LockTry, "tok", []any{nil}, []any{"tok"}, []any{"tok+"}, []any{"other"}),
		decoderOf(LockAcquire, []any{"OK"}, []any{1500}, []any{-1}),
		decoderOf(LockRefresh, []any{1}, []any{0}),
		decoderOf(LockVerify, []any{1}, []any{0}),
		decoderOf(LockRelease, []any{1}, []any{0}, []any{-1}),
		decoderOf(FencingAcquire, []any{"7"}, []any{2500}, []any{-1}),
		decoderOf(FencingRefresh, []any{1}, []any{0}),
		decoderOf(FencingVerify, []any{1}, []any{0}),
		decoderOf(FencingRelease, []any{1}, []any{0}, []any{-1}),
		decoderOf(FencingGuardedSet, []any{[]any{1, "7"}}, []any{[]any{0, "9"}}),
		decoderOf(FencingGuardedGet, []any{nil}, []any{[]any{"7", "value"}}),
		decoderOf(FencingRead, []any{nil}, []any{[]any{"7", "holder", 900}}, []any{[]any{"3", "h", -1}}),
		decoderOf(SemaphoreAcquire, []any{0}, []any{700}, []any{-1}),
		decoderOf(SemaphoreRefresh, []any{1}, []any{0}),
		decoderOf(SemaphoreVerify, []any{[]any{1, 900, 1700000000000}}, []any{[]any{0, 0, 1700000000000}}),
		decoderOf(SemaphoreRelease, []any{1}, []any{0}),
		decoderOf(SemaphoreRead, []any{[]any{3, 2, 1, 0, 1700000000000}}, []any{[]any{0, 0, 0, 0, 1700000000000}}),
		decoderOf(IdempotencyBegin, []any{-1700000000000000}, []any{-2}, []any{1200}, []any{"result"}),
		decoderOf(IdempotencyComplete, []any{1}, []any{0}),
		decoderOf(IdempotencyAbandon, []any{1}, []any{0}),
		decoderOf(IdempotencyRenew, []any{1}, []any{0}),
		decoderOf(LatchCreate, []any{1, 1, 3, 0, 1700000000000}, []any{0, 2, 1, 1700000005000, 1700000000000}),
		decoderOf(LatchJoin, []any{nil}, []any{"id-1", 1, 2, 3, 0, 1700000000000}),
		decoderOf(LatchCountDown, []any{1, 2, 1700000000000}, []any{4, 0, 1700000000000}, []any{5, 3, 1700000000000}),
		decoderOf(LatchRead, []any{1, 2, 500, 1700000000000}, []any{1, 0, -1, 1700000000000}, []any{3, 0, -1, 1700000000000}, []any{5, 1, -1, 1700000000000}),
		decoderOf(LeaseAcquire, []any{1, 10000}, []any{0, 2500}, []any{0, -1}),
		decoderOf(LeaseRefresh, []any{1}, []any{0}),
		decoderOf(LeaseVerify, []any{1}, []any{0}),
		decoderOf(LeaseRelease, []any{1}, []any{0}, []any{-1}),
		decoderOf(RateLimitDecide, []any{5}, []any{[]any{0, 250000}}, []any{[]any{0, -1}}),
		decoderOf(RateLimitAdjust, []any{[]any{1, 4}}, []any{[]any{0, 0}}),
		decoderOf(RateLimitConcAcquire, []any{[]any{1, 2, -1}}, []any{[]any{0, 0, 1500}}),
		decoderOf(RateLimitConcRenew, []any{1}, []any{0}),
		decoderOf(RateLimitConcVerify, []any{1}, []any{0}),
		decoderOf(RateLimitConcRelease, []any{1}, []any{0}),
		decoderOf(RateLimitDenyRead, []any{1}, []any{0}),
		decoderOf(RateLimitDenyWrite, []any{1}, []any{0}),
		decoderOf(RWLeaseAcquire, []any{[]any{1, 0, 1700000000000}}, []any{[]any{0, 300, 1700000000000}}),
		decoderOf(RWLeaseRefresh, []any{[]any{1, 1700000000000}}, []any{[]any{0, 1700000000000}}),
		decoderOf(RWLeaseVerify, []any{[]any{1, 900, 1700000000000}}, []any{[]any{0, 0, 1700000000000}}),
		decoderOf(RWLeaseRelease, []any{[]any{1, 1700000000000}}, []any{[]any{0, 1700000000000}}),
	}
}

// checkDecoded holds what every accepted reply must give.
func checkDecoded(r any) error {
	switch x := r.(type) {
	case Grant:
		if x.RetryIn < 0 || (x.Acquired && x.RetryIn != 0) {
			return fmt.Errorf("grant %+v", x)
		}
	case Decision:
		if x.Available < 0 || x.HasRetry != (x.RetryIn > 0) || (x.Acquired && x.HasRetry) {
			return fmt.Errorf("decision %+v", x)
		}
	case Adjustment:
		if x.Available < 0 {
			return fmt.Errorf("adjustment %+v", x)
		}
	case Outcome:
		if x < Released || x > NotOwned {
			return fmt.Errorf("outcome %d", x)
		}
	case LatchCreated:
		if x.Gen < 1 || x.Count < 0 || x.Deadline < 0 {
			return fmt.Errorf("latch created %+v", x)
		}
	case LatchGeneration:
		if x.Found && (x.ID == "" || x.Gen < 1 || x.Count < 0 || x.Count > x.Initial || x.Deadline < 0) {
			return fmt.Errorf("latch generation %+v", x)
		}
	case LatchCount:
		if x.Status < LatchCurrent || x.Status > LatchBroken || x.Remaining < 0 {
			return fmt.Errorf("latch count %+v", x)
		}
	case LatchState:
		if x.Status < LatchCurrent || x.Status > LatchBroken || x.Status == LatchComplete || x.Count < 0 || x.DeadlineIn < 0 {
			return fmt.Errorf("latch state %+v", x)
		}
	case GuardedWrite:
		if x.Current < 1 {
			return fmt.Errorf("guarded write %+v", x)
		}
	case GuardedValue:
		if x.Found != (x.Token >= 1) || (!x.Found && x.Value != "") {
			return fmt.Errorf("guarded value %+v", x)
		}
	case FencedHolder:
		if x.Held != (x.Fence >= 1) || x.TTL < 0 {
			return fmt.Errorf("fenced holder %+v", x)
		}
	case SemaphoreState:
		if x.Capacity < 0 || x.Used < x.Holders || x.Holders < x.NoExpiry || x.NoExpiry < 0 {
			return fmt.Errorf("semaphore state %+v", x)
		}
	case ClaimReply:
		if x.State < ClaimStarted || x.State > ClaimFingerprintMismatch || x.Remaining < 0 ||
			(x.State != ClaimCompleted && x.Result != "") || (x.State == ClaimStarted) != (x.Fence >= 3) || (x.State != ClaimInProgress && x.Remaining != 0) {
			return fmt.Errorf("claim %+v", x)
		}
	case bool:
	default:
		return fmt.Errorf("unchecked result type %T", r)
	}
	return nil
}

// FuzzDecoders gives every decoder of fuzzedDecoders arbitrary replies:
// each either accepts the reply, with a result that meets its invariants,
// or refuses it, and the refusal becomes an error wrapping ErrBadState
// that describes the reply's shape. No reply panics.
func FuzzDecoders(f *testing.F) {
	var seeds [][]any
	for _, d := range fuzzedDecoders() {
		for _, s := range d.seeds {
			var v any = s
			if len(s) == 1 {
				v = s[0] // a scalar reply
			}
			seeds = append(seeds, []any{replyBytes(v)})
		}
	}
	seeds = append(seeds, []any{[]byte{tagArray, 3, tagFloat, 1, 2, tagBool, 1, tagError, 3, 'E', 'R', 'R'}},
		[]any{[]byte{tagDecimal, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02}})
	fuzzseed.Seeds(f, seeds...)
	decoders := fuzzedDecoders()
	f.Fuzz(func(t *testing.T, data []byte) {
		v, _ := replyFrom(data, 0)
		for _, d := range decoders {
			r, ok := d.run(v)
			if ok {
				if err := checkDecoded(r); err != nil {
					t.Fatalf("%s accepted %#v as an invalid result: %v", d.name, v, err)
				}
				continue
			}
			err := UnexpectedReply(d.name, v)
			if !errors.Is(err, ErrBadState) || Classify(err) != Terminal || !strings.Contains(err.Error(), d.name) {
				t.Fatalf("%s: refusal %v is not a terminal ErrBadState", d.name, err)
			}
		}
	})
}

// TestDecoderSeedsAccepted proves the seeds are valid replies, so that the
// fuzzer starts from both sides of every decoder.
func TestDecoderSeedsAccepted(t *testing.T) {
	for _, d := range fuzzedDecoders() {
		for _, s := range d.seeds {
			var v any = s
			if len(s) == 1 {
				v = s[0]
			}
			v, _ = replyFrom(replyBytes(v), 0)
			if _, ok := d.run(v); !ok {
				t.Errorf("%s refuses its seed %#v", d.name, v)
			}
		}
	}
}

// FuzzMapError gives MapError, Classify, IsAmbiguous and Describe
// arbitrary error replies (and the same text as a plain error): the
// library's codes map to their sentinels and nothing else does; Describe
// is one line of at most a bounded length.
func FuzzMapError(f *testing.F) {
	fuzzseed.Seeds(f,
		[]any{"COORD_BADSTATE the key holds garbage"},
		[]any{"ERR Error running script (call to f_123): @user_script:5: COORD_OVERFLOW counter at max"},
		[]any{"WRONGTYPE Operation against a key holding the wrong kind of value"},
		[]any{"ERR Error running script: WRONGTYPE Operation against a key"},
		[]any{"ERR ACL failure in script: User alice has no permissions to run the 'get' command"},
		[]any{"ERR The user executing the script can't run this command or subcommand"},
		[]any{"NOPERM User bob has no permissions to run the 'evalsha' command"},
		[]any{"LOADING Redis is loading the dataset in memory"},
		[]any{"COORD_UNKNOWN x"},
		[]any{"COORD_"},
		[]any{"MOVED 3999 127.0.0.1:6381"},
		[]any{"ERR line one\r\nline two " + strings.Repeat("x", 300)},
	)
	f.Fuzz(func(t *testing.T, msg string) {
		re := replyError(msg)
		for _, in := range []error{re, fmt.Errorf("wrapped: %w", re), errors.New(msg)} {
			out := MapError(in)
			if out == nil {
				t.Fatalf("MapError(%q) = nil", msg)
			}
			if code, ok := ScriptCode(out); ok {
				if _, known := scriptCodes[code]; !known {
					t.Fatalf("MapError(%q): unknown code %q", msg, code)
				}
				if Classify(out) != Terminal || IsAmbiguous(out) {
					t.Fatalf("MapError(%q): script error classed %v", msg, Classify(out))
				}
				for _, s := range scriptCodes[code] {
					if !errors.Is(out, s) {
						t.Fatalf("MapError(%q) does not match %v", msg, s)
					}
				}
			} else if errors.Is(out, ErrBadState) || errors.Is(out, ErrConfigMismatch) {
				t.Fatalf("MapError(%q) = %v matches a sentinel without a code", msg, out)
			}
			if _, isRedis := in.(redis.Error); !isRedis && !errors.As(in, new(redis.Error)) && out != in {
				t.Fatalf("MapError changed a non-server error %v", in)
			}
			c := Classify(out)
			if c < NoError || c > Canceled || c == NoError {
				t.Fatalf("Classify(%v) = %v", out, c)
			}
			d := Describe(out)
			if d == "" || strings.ContainsAny(d, "\r\n") && !errors.Is(out, ErrBadState) && !errors.As(out, new(*scriptError)) && errors.As(out, new(redis.Error)) {
				t.Fatalf("Describe(%q) = %q", msg, d)
			}
			if _, ok := out.(replyError); ok && len(d) > 300 {
				t.Fatalf("Describe of a server error is %d bytes", len(d))
			}
		}
	})
}

// TestClassifyFixed pins the classes of errors a fuzzer cannot build.
func TestClassifyFixed(t *testing.T) {
	for err, want := range map[error]ErrorClass{
		nil:                          NoError,
		context.Canceled:             Canceled,
		context.DeadlineExceeded:     Canceled,
		io.EOF:                       Transient,
		redis.ErrClosed:              Terminal,
		ErrClosed:                    Terminal,
		InvalidArgument("key", "x"):  Terminal,
		GaveUp(context.Background()): Canceled,
	} {
		if got := Classify(err); got != want {
			t.Errorf("Classify(%v) = %v, want %v", err, got, want)
		}
	}
}

// refCRC16 is CRC16-XMODEM computed bit by bit, as the Redis Cluster
// specification's reference code does (no table).
func refCRC16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc ^= uint16(c) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// refSlot is the specification's HASH_SLOT, written from its text.
func refSlot(key string) int {
	s := strings.IndexByte(key, '{')
	if s >= 0 {
		e := strings.IndexByte(key[s+1:], '}')
		if e > 0 { // a non-empty tag
			return int(refCRC16([]byte(key[s+1:s+1+e])) % 16384)
		}
	}
	return int(refCRC16([]byte(key)) % 16384)
}

// FuzzSlot compares Slot with the reference over arbitrary keys, and checks
// the hash-tag rules: a key and its tag alone share a slot; SameSlot agrees
// with Slot.
func FuzzSlot(f *testing.F) {
	fuzzseed.Seeds(f,
		[]any{"123456789", ""}, // the CRC16-XMODEM check value 0x31C3
		[]any{"{user1000}.following", "{user1000}.followers"},
		[]any{"foo{}{bar}", "foo{}"},
		[]any{"foo{{bar}}zap", "{bar"},
		[]any{"foo{bar}{zap}", "bar"},
		[]any{"{}", "}{"},
		[]any{"{", "}"},
		[]any{"\x00{\xff}", "\xff"},
	)
	if refCRC16([]byte("123456789")) != 0x31c3 || crc16("123456789") != 0x31c3 {
		f.Fatal("CRC16-XMODEM check value")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		sa, sb := Slot(a), Slot(b)
		if sa != refSlot(a) || sb != refSlot(b) {
			t.Fatalf("Slot(%q) = %d, reference %d", a, sa, refSlot(a))
		}
		if sa < 0 || sa > 16383 {
			t.Fatalf("Slot(%q) = %d", a, sa)
		}
		if err := SameSlot(a, b); (err == nil) != (sa == sb) || (err != nil && !errors.Is(err, ErrInvalidArgument)) {
			t.Fatalf("SameSlot(%q, %q) = %v, slots %d %d", a, b, err, sa, sb)
		}
		if b != "" && !strings.ContainsAny(b, "{}") && Slot("pre{"+b+"}post"+a) != Slot(b) {
			t.Fatalf("tag {%q} does not decide the slot", b)
		}
	})
}
