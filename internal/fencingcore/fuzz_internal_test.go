package fencingcore

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/sentinel"
	"github.com/coordkit/coordination/internal/testkit/fuzzseed"
)

// decoders are the decoders of the fencing lock's scripts, each with replies it accepts.
func decoders() []fuzzseed.Decoder {
	return []fuzzseed.Decoder{
		decoderOf(Acquire, decodeGrant, []any{"7"}, []any{2500}, []any{-1}),
		decoderOf(Refresh, decode.Bool01, []any{1}, []any{0}),
		decoderOf(Verify, decode.Bool01, []any{1}, []any{0}),
		decoderOf(Release, decode.Release, []any{1}, []any{0}, []any{-1}),
		decoderOf(Read, decodeRead, []any{nil}, []any{[]any{"7", "holder", 900}}, []any{[]any{"3", "h", -1}}),
	}
}

func decoderOf[R any](s *engine.Script[R], decode func(any) (R, bool), seeds ...[]any) fuzzseed.Decoder {
	return fuzzseed.Decoder{Name: s.Name(), Decode: func(v any) (any, bool) { return decode(v) }, Seeds: seeds}
}

// checkDecoded holds what every accepted reply must give.
func checkDecoded(r any) error {
	switch x := r.(type) {
	case decode.Grant:
		if x.RetryIn < 0 || (x.Acquired && x.RetryIn != 0) {
			return fmt.Errorf("grant %+v", x)
		}
	case decode.Outcome:
		if x < decode.Released || x > decode.NotOwned {
			return fmt.Errorf("outcome %d", x)
		}
	case Holder:
		if x.Held != (x.Fence >= 1) || x.TTL < 0 {
			return fmt.Errorf("fenced holder %+v", x)
		}
	case bool:
	default:
		return fmt.Errorf("unchecked result type %T", r)
	}
	return nil
}

// FuzzDecoders gives every decoder of decoders() arbitrary replies: each
// either accepts the reply, with a result that meets its invariants, or
// refuses it, and the refusal becomes a terminal error wrapping
// ErrBadState that names the script. No reply panics. Its seeds and
// testdata/fuzz/FuzzDecoders run as a normal test.
func FuzzDecoders(f *testing.F) {
	fuzzseed.FuzzDecoders(f, decoders(), checkDecoded, func(name string, reply any) error {
		err := decode.Unexpected(name, reply)
		if !errors.Is(err, sentinel.ErrBadState) || engine.Classify(err) != engine.Terminal || !strings.Contains(err.Error(), name) {
			return fmt.Errorf("refusal %v is not a terminal ErrBadState", err)
		}
		return nil
	})
}

// TestDecoderSeedsAccepted proves the seeds are valid replies, so that the
// fuzzer starts from both sides of every decoder.
func TestDecoderSeedsAccepted(t *testing.T) {
	fuzzseed.DecoderSeedsAccepted(t, decoders())
}
