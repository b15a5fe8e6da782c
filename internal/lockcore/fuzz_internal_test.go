package lockcore

import (
	"fmt"
	"testing"

	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/testkit/decoderfuzz"
	"github.com/coordkit/coordination/internal/testkit/fuzzseed"
)

// decoders are the decoders of the lock's command and scripts, each with replies it accepts.
func decoders() []fuzzseed.Decoder {
	return []fuzzseed.Decoder{
		commandOf("lock_try", decodeTry, "tok", []any{nil}, []any{"tok"}, []any{"tok+"}, []any{"other"}),
		decoderfuzz.Of(Acquire, decodeGrant, []any{"OK"}, []any{1500}, []any{-1}),
		decoderfuzz.Of(Refresh, decode.Bool01, []any{1}, []any{0}),
		decoderfuzz.Of(Verify, decode.Bool01, []any{1}, []any{0}),
		decoderfuzz.Of(Release, decode.Release, []any{1}, []any{0}, []any{-1}),
	}
}

// commandOf is decoderOf for the plain command named name (Try's, as
// NewCommand names it: engine.Command exports no Name, which this was the
// only reader of), whose decoder also takes the request's id (id).
func commandOf[R any](name string, decode func(any, any) (R, bool), id any, seeds ...[]any) fuzzseed.Decoder {
	return fuzzseed.Decoder{Name: name, Decode: func(v any) (any, bool) { return decode(v, id) }, Seeds: seeds}
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
