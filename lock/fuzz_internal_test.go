package lock

import (
	"fmt"
	"testing"

	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/testkit/decoderfuzz"
	"github.com/coordkit/coordination/internal/testkit/fuzzseed"
)

// decoders are the decoders of the field leases' and the first-in first-out
// order's scripts (the key lock's are fuzzed in internal/lockcore), each
// with replies it accepts.
func decoders() []fuzzseed.Decoder {
	return []fuzzseed.Decoder{
		decoderfuzz.Of(fieldAcquire, decodeFieldGrant, []any{1, 10000}, []any{0, 2500}, []any{0, -1}),
		decoderfuzz.Of(fieldRefresh, decode.Bool01, []any{1}, []any{0}),
		decoderfuzz.Of(fieldVerify, decode.Bool01, []any{1}, []any{0}),
		decoderfuzz.Of(fieldRelease, decode.Release, []any{1}, []any{0}, []any{-1}),
		decoderfuzz.Of(fifoAcquire, decodeFIFOGrant, []any{"OK"}, []any{1500}, []any{0}, []any{-2}),
		decoderfuzz.Of(fifoRelease, decode.Release, []any{1}, []any{0}, []any{-1}),
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
