package fencing

import (
	"fmt"
	"testing"

	"github.com/coordkit/coordination/internal/testkit/replyfuzz"
)

// decoders are the decoders of the guarded resource's scripts (the lock's
// are fuzzed in internal/fencingcore).
func decoders() []replyfuzz.Decoder {
	return []replyfuzz.Decoder{
		replyfuzz.Script(guardedSet, []any{[]any{1, "7"}}, []any{[]any{0, "9"}}),
		replyfuzz.Script(guardedGet, []any{nil}, []any{[]any{"7", "value"}}),
	}
}

func check(r any) error {
	switch x := r.(type) {
	case guardedWrite:
		if x.Current < 1 {
			return fmt.Errorf("guarded write %+v", x)
		}
	case guardedValue:
		if x.Found != (x.Token >= 1) || (!x.Found && x.Value != "") {
			return fmt.Errorf("guarded value %+v", x)
		}
	default:
		return replyfuzz.CheckCommon(r)
	}
	return nil
}

// FuzzDecoders gives the guarded resource's decoders arbitrary replies
// (see replyfuzz.Fuzz).
func FuzzDecoders(f *testing.F) { replyfuzz.Fuzz(f, decoders(), check) }

// TestDecoderSeedsAccepted proves the seeds are valid replies.
func TestDecoderSeedsAccepted(t *testing.T) { replyfuzz.SeedsAccepted(t, decoders()) }
