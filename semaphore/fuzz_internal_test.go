package semaphore

import (
	"fmt"
	"testing"

	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/testkit/decoderfuzz"
	"github.com/coordkit/coordination/internal/testkit/fuzzseed"
)

// decoders are the semaphore scripts' decoders, each with replies it
// accepts.
func decoders() []fuzzseed.Decoder {
	return []fuzzseed.Decoder{
		decoderfuzz.Of(acquireScript, decodeGrant, []any{0}, []any{700}, []any{-1}),
		decoderfuzz.Of(refreshScript, decode.Bool01, []any{1}, []any{0}),
		decoderfuzz.Of(verifyScript, decode.VerifyNow(true), []any{[]any{1, 900, 1700000000000}}, []any{[]any{0, 0, 1700000000000}}, []any{[]any{1, -1, 1700000000000}}),
		decoderfuzz.Of(releaseScript, decode.SoleRelease, []any{1}, []any{0}),
		// semaphore_read's reply gained its sixth element, the mode (the
		// capacity set in the key, draining) with SetCapacity and Drain.
		decoderfuzz.Of(readScript, decodeRead, []any{[]any{3, 2, 1, 0, 1700000000000, 0}}, []any{[]any{0, 0, 0, 0, 1700000000000, 0}},
			[]any{[]any{3, 2, 1, 0, 1700000000000, 1}}, []any{[]any{3, 0, 0, 0, 1700000000000, 2}}),
		decoderfuzz.Of(configureScript, decodeGrant, []any{0}, []any{700}, []any{-1}),
		decoderfuzz.Of(abandonScript, decode.SoleRelease, []any{1}, []any{0}),
		decoderfuzz.Of(fifoAcquireScript, decodeFIFOGrant, []any{0}, []any{700}, []any{-1}, []any{-2}),
		decoderfuzz.Of(fifoReleaseScript, decode.SoleRelease, []any{1}, []any{0}),
		decoderfuzz.Of(fifoAbandonScript, decode.SoleRelease, []any{1}, []any{0}),
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
		if x != decode.Released && x != decode.AlreadyReleased {
			return fmt.Errorf("outcome %d", x)
		}
	case readReply:
		if x.Capacity < 0 || x.Used < x.Holders || x.Holders < x.NoExpiry || x.NoExpiry < 0 || x.Mode < 0 || x.Mode > 2 ||
			(x.Capacity == 0 && x.Mode != 0) {
			return fmt.Errorf("semaphore state %+v", x)
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
