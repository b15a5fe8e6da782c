package lock_test

import (
	"testing"

	"github.com/coordkit/coordination/internal/testkit/replyfuzz"
	"github.com/coordkit/coordination/lock"
)

// decoders are the decoders of the field-lease scripts (the key lock's are
// fuzzed in internal/lockcore).
func decoders() []replyfuzz.Decoder {
	return []replyfuzz.Decoder{
		replyfuzz.Script(lock.FieldAcquire, []any{1, 10000}, []any{0, 2500}, []any{0, -1}),
		replyfuzz.Script(lock.FieldRefresh, []any{1}, []any{0}),
		replyfuzz.Script(lock.FieldVerify, []any{1}, []any{0}),
		replyfuzz.Script(lock.FieldRelease, []any{1}, []any{0}, []any{-1}),
	}
}

// FuzzDecoders gives the field-lease decoders arbitrary replies (see
// replyfuzz.Fuzz).
func FuzzDecoders(f *testing.F) { replyfuzz.Fuzz(f, decoders(), replyfuzz.CheckCommon) }

// TestDecoderSeedsAccepted proves the seeds are valid replies.
func TestDecoderSeedsAccepted(t *testing.T) { replyfuzz.SeedsAccepted(t, decoders()) }
