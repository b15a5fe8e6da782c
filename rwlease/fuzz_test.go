package rwlease_test

import (
	"testing"

	"github.com/coordkit/coordination/internal/testkit/replyfuzz"
	"github.com/coordkit/coordination/rwlease"
)

// decoders are the decoders of the read-write lease's scripts.
func decoders() []replyfuzz.Decoder {
	return []replyfuzz.Decoder{
		replyfuzz.Script(rwlease.ScriptAcquire, []any{[]any{1, 0, 1700000000000}}, []any{[]any{0, 300, 1700000000000}}),
		replyfuzz.Script(rwlease.ScriptRefresh, []any{[]any{1, 1700000000000}}, []any{[]any{0, 1700000000000}}),
		replyfuzz.Script(rwlease.ScriptVerify, []any{[]any{1, 900, 1700000000000}}, []any{[]any{0, 0, 1700000000000}}),
		replyfuzz.Script(rwlease.ScriptRelease, []any{[]any{1, 1700000000000}}, []any{[]any{0, 1700000000000}}),
	}
}

// FuzzDecoders gives the read-write lease's decoders arbitrary replies
// (see replyfuzz.Fuzz).
func FuzzDecoders(f *testing.F) { replyfuzz.Fuzz(f, decoders(), replyfuzz.CheckCommon) }

// TestDecoderSeedsAccepted proves the seeds are valid replies.
func TestDecoderSeedsAccepted(t *testing.T) { replyfuzz.SeedsAccepted(t, decoders()) }
