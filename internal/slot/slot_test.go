package slot

import (
	"strconv"
	"strings"
	"testing"

	"github.com/coordkit/coordination/internal/testkit/fuzzseed"
)

// refCRC16 is CRC16-XMODEM computed bit by bit, as the Redis Cluster
// specification's reference code does (no table).
func refCRC16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc ^= uint16(c) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// refSlot is the specification's HASH_SLOT, written from its text.
func refSlot(key string) int {
	s := strings.IndexByte(key, '{')
	if s >= 0 {
		e := strings.IndexByte(key[s+1:], '}')
		if e > 0 { // a non-empty tag
			return int(refCRC16([]byte(key[s+1:s+1+e])) % 16384)
		}
	}
	return int(refCRC16([]byte(key)) % 16384)
}

// FuzzSlot compares Of with the reference over arbitrary keys, and checks
// the hash-tag rules: a key and its tag alone share a slot (the engine's
// FuzzSameSlot checks its slot check against Of).
func FuzzSlot(f *testing.F) {
	fuzzseed.Seeds(f,
		[]any{"123456789", ""}, // the CRC16-XMODEM check value 0x31C3
		[]any{"{user1000}.following", "{user1000}.followers"},
		[]any{"foo{}{bar}", "foo{}"},
		[]any{"foo{{bar}}zap", "{bar"},
		[]any{"foo{bar}{zap}", "bar"},
		[]any{"{}", "}{"},
		[]any{"{", "}"},
		[]any{"\x00{\xff}", "\xff"},
	)
	if refCRC16([]byte("123456789")) != 0x31c3 || crc16("123456789") != 0x31c3 {
		f.Fatal("CRC16-XMODEM check value")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		sa, sb := Of(a), Of(b)
		if sa != refSlot(a) || sb != refSlot(b) {
			t.Fatalf("Of(%q) = %d, reference %d", a, sa, refSlot(a))
		}
		if sa < 0 || sa > 16383 {
			t.Fatalf("Of(%q) = %d", a, sa)
		}
		if b != "" && !strings.ContainsAny(b, "{}") && Of("pre{"+b+"}post"+a) != Of(b) {
			t.Fatalf("tag {%q} does not decide the slot", b)
		}
	})
}

// TestKeyIn checks that KeyIn's key starts with base and lies in the slot
// asked for, with the "{<n>}" tag where base has no tag of its own, a
// plain number where base has a '{' that nothing closes, and "" where
// base's own complete tag decides the slot.
func TestKeyIn(t *testing.T) {
	for _, s := range []int{0, 1, 866, 12182, 16383} {
		for _, base := range []string{"", "p:coordination:fences:", "a}b:", "{unclosed:", "{}:"} {
			k := KeyIn(base, s)
			if !strings.HasPrefix(k, base) || Of(k) != s || refSlot(k) != s {
				t.Fatalf("KeyIn(%q, %d) = %q (slot %d)", base, s, k, Of(k))
			}
		}
	}
	if k := KeyIn("x:", Of("{0}")); k != "x:{0}" {
		t.Fatalf("KeyIn(x:, slot of {0}) = %q, want x:{0}", k)
	}
	if k := KeyIn("{tag}:", Of("tag")); k != "{tag}:{"+strconv.Itoa(int(slotTags()[Of("tag")]))+"}" {
		t.Fatalf("KeyIn in the tag's own slot = %q", k)
	}
	if k := KeyIn("{tag}:", (Of("tag")+1)%16384); k != "" {
		t.Fatalf("KeyIn outside the base's own tag = %q, want \"\"", k)
	}
	if k := KeyIn("x", 16384); k != "" {
		t.Fatalf("KeyIn(x, 16384) = %q, want \"\"", k)
	}
}
