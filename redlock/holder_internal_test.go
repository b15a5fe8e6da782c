package redlock

import (
	"testing"
	"time"

	"github.com/coordkit/coordination/internal/engine"
)

// A fencing node's lease in its last millisecond (PTTL 0: Redis rounds
// down) reads as free; a negative TTL other than -1 and a value that is no
// owner token stay outside the layout.
func TestDecodeFencingHolderLastMillisecond(t *testing.T) {
	tok := "abcdefghijklmnopqrstuv" // 22 bytes of base64url: an owner token
	for _, c := range []struct {
		name     string
		v        []any
		held, ok bool
		ttl      time.Duration
	}{
		{"held", []any{tok, "7", int64(5)}, true, true, 5 * time.Millisecond},
		{"marked", []any{tok + "+", "7", int64(1)}, true, true, time.Millisecond},
		{"no TTL", []any{tok, "7", int64(-1)}, true, true, engine.NoExpiry},
		{"last millisecond", []any{tok, "7", int64(0)}, false, true, 0},
		{"negative", []any{tok, "7", int64(-2)}, false, false, 0},
		{"garbage in the last millisecond", []any{"hello", "7", int64(0)}, false, false, 0},
	} {
		h, ok := decodeFencingHolder(c.v)
		if ok != c.ok || h.Held != c.held || (c.held && (h.Token != tok || h.TTL != c.ttl)) {
			t.Errorf("%s: %+v %v, want held %v ok %v ttl %v", c.name, h, ok, c.held, c.ok, c.ttl)
		}
	}
}
