package fencing

import (
	"fmt"
	"testing"

	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/testkit/decoderfuzz"
	"github.com/coordkit/coordination/internal/testkit/fuzzseed"
)

// decoders are the decoders of the guarded resource's scripts (the lock's are fuzzed in internal/fencingcore), each with replies it accepts.
func decoders() []fuzzseed.Decoder {
	return []fuzzseed.Decoder{
		decoderfuzz.Of(guardedSet, decodeGuardedSet, []any{[]any{1, "7"}}, []any{[]any{0, "9"}}),
		decoderfuzz.Of(guardedGet, decodeGuardedGet, []any{nil}, []any{[]any{"7", "value"}}),
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
	case guardedWrite:
		if x.Current < 1 {
			return fmt.Errorf("guarded write %+v", x)
		}
	case guardedValue:
		if x.Found != (x.Token >= 1) || (!x.Found && x.Value != "") {
			return fmt.Errorf("guarded value %+v", x)
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
