package lockcore_test

import (
	"testing"

	"github.com/coordkit/coordination/internal/lockcore"
	"github.com/coordkit/coordination/internal/testkit/replyfuzz"
)

// decoders are the decoders of the lock's command and scripts.
func decoders() []replyfuzz.Decoder {
	return []replyfuzz.Decoder{
		replyfuzz.Command(lockcore.Try, "tok", []any{nil}, []any{"tok"}, []any{"tok+"}, []any{"other"}),
		replyfuzz.Script(lockcore.Acquire, []any{"OK"}, []any{1500}, []any{-1}),
		replyfuzz.Script(lockcore.Refresh, []any{1}, []any{0}),
		replyfuzz.Script(lockcore.Verify, []any{1}, []any{0}),
		replyfuzz.Script(lockcore.Release, []any{1}, []any{0}, []any{-1}),
	}
}

// FuzzDecoders gives the lock's decoders arbitrary replies (see
// replyfuzz.Fuzz).
func FuzzDecoders(f *testing.F) { replyfuzz.Fuzz(f, decoders(), replyfuzz.CheckCommon) }

// TestDecoderSeedsAccepted proves the seeds are valid replies.
func TestDecoderSeedsAccepted(t *testing.T) { replyfuzz.SeedsAccepted(t, decoders()) }
