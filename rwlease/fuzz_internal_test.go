package rwlease

import (
	"fmt"
	"testing"

	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/testkit/decoderfuzz"
	"github.com/coordkit/coordination/internal/testkit/fuzzseed"
)

// decoders are the decoders of the read-write lease's scripts, each with replies it accepts.
func decoders() []fuzzseed.Decoder {
	return []fuzzseed.Decoder{
		decoderfuzz.Of(scriptAcquire, decodeGrant, []any{[]any{1, 0, 1700000000000}}, []any{[]any{0, 300, 1700000000000}}),
		decoderfuzz.Of(scriptRefresh, decodeRefresh, []any{[]any{1, 1700000000000}}, []any{[]any{0, 1700000000000}}),
		decoderfuzz.Of(scriptVerify, decode.VerifyNow(false), []any{[]any{1, 900, 1700000000000}}, []any{[]any{0, 0, 1700000000000}}),
		decoderfuzz.Of(scriptRelease, decodeRelease, []any{[]any{1, 1700000000000}}, []any{[]any{0, 1700000000000}}),
		decoderfuzz.Of(scriptAbandon, decodeRelease, []any{[]any{1, 1700000000000}}, []any{[]any{0, 1700000000000}}),
	}
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
