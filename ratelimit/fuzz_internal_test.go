package ratelimit

import (
	"fmt"
	"testing"

	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/testkit/decoderfuzz"
	"github.com/coordkit/coordination/internal/testkit/fuzzseed"
)

// decoders are the rate limiters' script decoders, each with replies it
// accepts.
func decoders() []fuzzseed.Decoder {
	var out []fuzzseed.Decoder
	for _, p := range []scriptPair{fixedScripts, slidingScripts, bucketScripts, gcraScripts, compositeScripts} {
		out = append(out,
			decoderfuzz.Of(p.decide, decodeDecision, []any{5}, []any{[]any{0, 250000}}, []any{[]any{0, -1}}),
			decoderfuzz.Of(p.adjust, decodeAdjust, []any{[]any{1, 4}}, []any{[]any{0, 0}}))
	}
	return append(out,
		decoderfuzz.Of(concAcquireScript, decodeConcGrant, []any{[]any{1, 2, -1}}, []any{[]any{0, 0, 1500}}),
		decoderfuzz.Of(concRenewScript, decode.Bool01, []any{1}, []any{0}),
		decoderfuzz.Of(concVerifyScript, decode.Bool01, []any{1}, []any{0}),
		decoderfuzz.Of(concReleaseScript, decode.SoleRelease, []any{1}, []any{0}),
		decoderfuzz.Of(denyReadScript, decode.Bool01, []any{1}, []any{0}),
		decoderfuzz.Of(denyWriteScript, decode.Bool01, []any{1}, []any{0}),
	)
}

// checkDecoded holds what every accepted reply must give.
func checkDecoded(r any) error {
	switch x := r.(type) {
	case decode.Grant:
		if x.RetryIn < 0 || (x.Acquired && x.RetryIn != 0) || concAvailable(x) < 0 {
			return fmt.Errorf("grant %+v", x)
		}
	case decideReply:
		if x.Available < 0 || x.HasRetry != (x.RetryIn > 0) || (x.Acquired && x.HasRetry) {
			return fmt.Errorf("decision %+v", x)
		}
	case adjustReply:
		if x.Available < 0 {
			return fmt.Errorf("adjustment %+v", x)
		}
	case decode.Outcome:
		if x != decode.Released && x != decode.AlreadyReleased {
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
