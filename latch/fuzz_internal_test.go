package latch

import (
	"fmt"
	"testing"

	"github.com/coordkit/coordination/internal/testkit/decoderfuzz"
	"github.com/coordkit/coordination/internal/testkit/fuzzseed"
)

// decoders are the latch scripts' decoders, each with replies it accepts.
func decoders() []fuzzseed.Decoder {
	return []fuzzseed.Decoder{
		decoderfuzz.Of(createScript, decodeCreate, []any{1, 1, 3, 0, 1700000000000}, []any{0, 2, 1, 1700000005000, 1700000000000}),
		decoderfuzz.Of(joinScript, decodeJoin, []any{nil}, []any{"id-1", 1, 2, 3, 0, 1700000000000}),
		decoderfuzz.Of(countDownScript, decodeCountDown, []any{1, 2, 1700000000000}, []any{4, 0, 1700000000000}, []any{5, 3, 1700000000000}),
		decoderfuzz.Of(readScript, decodeRead, []any{1, 2, 500, 1700000000000}, []any{1, 0, -1, 1700000000000}, []any{3, 0, -1, 1700000000000}, []any{5, 1, -1, 1700000000000}),
	}
}

// checkDecoded holds what every accepted reply must give.
func checkDecoded(r any) error {
	switch x := r.(type) {
	case createReply:
		if x.Gen < 1 || x.Count < 0 || x.Deadline < 0 {
			return fmt.Errorf("latch created %+v", x)
		}
	case joinReply:
		if x.Found && (x.ID == "" || x.Gen < 1 || x.Count < 0 || x.Count > x.Initial || x.Deadline < 0) {
			return fmt.Errorf("latch generation %+v", x)
		}
	case countDownReply:
		if x.Status < statusCurrent || x.Status > statusBroken || x.Remaining < 0 {
			return fmt.Errorf("latch count %+v", x)
		}
	case readReply:
		if x.Status < statusCurrent || x.Status > statusBroken || x.Status == statusComplete || x.Count < 0 || x.DeadlineIn < 0 {
			return fmt.Errorf("latch state %+v", x)
		}
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
