package fencingcore

import (
	"fmt"
	"testing"

	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/testkit/decoderfuzz"
	"github.com/coordkit/coordination/internal/testkit/fuzzseed"
)

// decoders are the decoders of the fencing lock's scripts, each with replies it accepts.
func decoders() []fuzzseed.Decoder {
	return []fuzzseed.Decoder{
		decoderfuzz.Of(Acquire, decodeGrant, []any{"7"}, []any{2500}, []any{0}),
		decoderfuzz.Of(Refresh, decode.Bool01, []any{1}, []any{0}),
		decoderfuzz.Of(Verify, decode.Bool01, []any{1}, []any{0}),
		decoderfuzz.Of(Release, decode.Release, []any{1}, []any{0}, []any{-1}),
		decoderfuzz.Of(Abandon, decode.Release, []any{1}, []any{0}, []any{-1}),
		decoderfuzz.Of(Read, decodeRead, []any{nil}, []any{[]any{"7", "holder", 900, ""}}, []any{[]any{"3", "h", 0, "1796535184027"}}),
	}
}

// The acquire's decoder refuses a negative PTTL: the script answers a
// holder without a TTL with COORD_BADSTATE, never -1.
func TestAcquireDecoderRefusesANegativePTTL(t *testing.T) {
	for _, r := range []int64{-1, -2} {
		if _, ok := decodeGrant(r); ok {
			t.Errorf("decodeGrant(%d) accepted", r)
		}
	}
	if g, ok := decodeGrant(int64(0)); !ok || g.Acquired || g.RetryIn <= 0 {
		t.Errorf("decodeGrant(0) = %+v %v", g, ok)
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

// FuzzDecoders: decoderfuzz.Fuzz over decoders(), results checked by
// checkDecoded (seeds and testdata/fuzz run as a normal test).
func FuzzDecoders(f *testing.F) {
	decoderfuzz.Fuzz(f, decoders(), checkDecoded)
}

// TestDecoderSeedsAccepted: every seed is a reply its decoder accepts.
func TestDecoderSeedsAccepted(t *testing.T) {
	fuzzseed.DecoderSeedsAccepted(t, decoders())
}
