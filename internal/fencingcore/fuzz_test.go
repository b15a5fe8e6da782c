package fencingcore_test

import (
	"fmt"
	"testing"

	"github.com/coordkit/coordination/internal/fencingcore"
	"github.com/coordkit/coordination/internal/testkit/replyfuzz"
)

// decoders are the decoders of the fencing lock's scripts.
func decoders() []replyfuzz.Decoder {
	return []replyfuzz.Decoder{
		replyfuzz.Script(fencingcore.Acquire, []any{"7"}, []any{2500}, []any{-1}),
		replyfuzz.Script(fencingcore.Refresh, []any{1}, []any{0}),
		replyfuzz.Script(fencingcore.Verify, []any{1}, []any{0}),
		replyfuzz.Script(fencingcore.Release, []any{1}, []any{0}, []any{-1}),
		replyfuzz.Script(fencingcore.Read, []any{nil}, []any{[]any{"7", "holder", 900}}, []any{[]any{"3", "h", -1}}),
	}
}

func check(r any) error {
	if x, ok := r.(fencingcore.Holder); ok {
		if x.Held != (x.Fence >= 1) || x.TTL < 0 {
			return fmt.Errorf("fenced holder %+v", x)
		}
		return nil
	}
	return replyfuzz.CheckCommon(r)
}

// FuzzDecoders gives the fencing lock's decoders arbitrary replies (see
// replyfuzz.Fuzz).
func FuzzDecoders(f *testing.F) { replyfuzz.Fuzz(f, decoders(), check) }

// TestDecoderSeedsAccepted proves the seeds are valid replies.
func TestDecoderSeedsAccepted(t *testing.T) { replyfuzz.SeedsAccepted(t, decoders()) }
