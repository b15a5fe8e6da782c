package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/sentinel"
	"github.com/coordkit/coordination/internal/slot"
	"github.com/coordkit/coordination/internal/testkit/fuzzseed"
)

// The fuzz targets of the engine. Each also runs as a normal test over its
// seeds and its committed corpus (testdata/fuzz/<target>); `make fuzz-short`
// runs each for a bounded time, `make fuzz` for longer. The scripts'
// decoders are fuzzed where they are declared (FuzzDecoders in each
// primitive's package or internal/<primitive>core).

// FuzzMapError gives mapErr, Classify, IsAmbiguous and Describe
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
			out := mapErr(in)
			if out == nil {
				t.Fatalf("mapErr(%q) = nil", msg)
			}
			if code, ok := scriptCode(out); ok {
				if _, known := scriptCodes[code]; !known {
					t.Fatalf("mapErr(%q): unknown code %q", msg, code)
				}
				if Classify(out) != Terminal || IsAmbiguous(out) {
					t.Fatalf("mapErr(%q): script error classed %v", msg, Classify(out))
				}
				for _, s := range scriptCodes[code] {
					if !errors.Is(out, s) {
						t.Fatalf("mapErr(%q) does not match %v", msg, s)
					}
				}
			} else if errors.Is(out, sentinel.ErrBadState) || errors.Is(out, sentinel.ErrConfigMismatch) {
				t.Fatalf("mapErr(%q) = %v matches a sentinel without a code", msg, out)
			}
			if _, isRedis := in.(redis.Error); !isRedis && !errors.As(in, new(redis.Error)) && out != in {
				t.Fatalf("mapErr changed a non-server error %v", in)
			}
			c := Classify(out)
			if c < noError || c > Canceled || c == noError {
				t.Fatalf("Classify(%v) = %v", out, c)
			}
			d := Describe(out)
			if d == "" || strings.ContainsAny(d, "\r\n") && !errors.Is(out, sentinel.ErrBadState) && !errors.As(out, new(*scriptError)) && errors.As(out, new(redis.Error)) {
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
	for err, want := range map[error]errorClass{
		nil:                               noError,
		context.Canceled:                  Canceled,
		context.DeadlineExceeded:          Canceled,
		io.EOF:                            Transient,
		redis.ErrClosed:                   Terminal,
		sentinel.ErrClosed:                Terminal,
		check.InvalidArgument("key", "x"): Terminal,
		GaveUp(context.Background()):      Canceled,
	} {
		if got := Classify(err); got != want {
			t.Errorf("Classify(%v) = %v, want %v", err, got, want)
		}
	}
}

// FuzzSameSlot checks that sameSlotKeys agrees with slot.Of (FuzzSlot in
// internal/slot checks slot.Of against the specification).
func FuzzSameSlot(f *testing.F) {
	fuzzseed.Seeds(f,
		[]any{"{user1000}.following", "{user1000}.followers"},
		[]any{"foo{}{bar}", "foo{}"},
		[]any{"foo{bar}{zap}", "bar"},
		[]any{"{", "}"},
	)
	f.Fuzz(func(t *testing.T, a, b string) {
		sa, sb := slot.Of(a), slot.Of(b)
		if err := sameSlotKeys(a, b); (err == nil) != (sa == sb) || (err != nil && !errors.Is(err, sentinel.ErrInvalidArgument)) {
			t.Fatalf("sameSlotKeys(%q, %q) = %v, slots %d %d", a, b, err, sa, sb)
		}
	})
}
