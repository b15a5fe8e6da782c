// Package decoderfuzz runs a package's script decoders under
// fuzzseed.FuzzDecoders with the refusal rule every primitive shares: a
// reply a decoder refuses becomes, through decode.Unexpected, a terminal
// error wrapping ErrBadState that names the script. It is test machinery
// (imported only by internal tests) and, unlike fuzzseed, imports the
// engine.
package decoderfuzz

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/sentinel"
	"github.com/coordkit/coordination/internal/testkit/fuzzseed"
)

// Of describes script s's decoder for the fuzzer: decode reads s's reply
// (false: refused), and seeds are replies it accepts (one value each, in
// fuzzseed's seed form).
func Of[R any](s interface{ Name() string }, decode func(any) (R, bool), seeds ...[]any) fuzzseed.Decoder {
	return fuzzseed.Decoder{Name: s.Name(), Decode: func(v any) (any, bool) { return decode(v) }, Seeds: seeds}
}

// Fuzz gives every decoder of ds arbitrary replies (fuzzseed.FuzzDecoders):
// an accepted reply's result must pass check, and a refused one must
// become a terminal ErrBadState naming its script (Refusal).
func Fuzz(f *testing.F, ds []fuzzseed.Decoder, check func(result any) error) {
	f.Helper()
	fuzzseed.FuzzDecoders(f, ds, check, Refusal)
}

// Refusal returns nil when the error the engine makes of a refused reply
// of script name is a terminal error wrapping ErrBadState whose text
// names the script; else an error saying what it is instead.
func Refusal(name string, reply any) error {
	err := decode.Unexpected(name, reply)
	if !errors.Is(err, sentinel.ErrBadState) || engine.Classify(err) != engine.Terminal || !strings.Contains(err.Error(), name) {
		return fmt.Errorf("refusal %v is not a terminal ErrBadState", err)
	}
	return nil
}
