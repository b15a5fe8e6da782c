// Package slot holds the Redis Cluster key-slot function (CRC16 of the key
// or of its hash tag) and a hash tag of each slot. It knows no primitive
// and no engine.
package slot

import (
	"strconv"
	"sync"
)

// Of returns the Redis Cluster hash slot (0..16383) of key: CRC16-XMODEM
// of the key, or of the part between the first '{' and the next '}' when
// that part is non-empty (a hash tag), modulo 16384, as specified in the
// Redis Cluster specification ("Keys distribution model").
func Of(key string) int {
	if i := indexByte(key, '{'); i >= 0 {
		if j := indexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) & 16383)
}

func indexByte(s string, b byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == b {
			return i
		}
	}
	return -1
}

var crcTable = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()

// crc16 is CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^s[i]]
	}
	return crc
}

// slotTags holds, for each Cluster slot, the smallest integer whose decimal
// form hashes to it: "{<n>}" is then a hash tag of that slot. Computed once,
// on the first call (about 170,000 CRC16s).
var slotTags = sync.OnceValue(func() *[16384]uint32 {
	var tags [16384]uint32
	var seen [16384]bool
	left := len(tags)
	var buf [10]byte
	for n := uint32(0); left > 0; n++ {
		s := int(crc16(string(strconv.AppendUint(buf[:0], uint64(n), 10))) & 16383)
		if !seen[s] {
			seen[s], tags[s] = true, n
			left--
		}
	}
	return &tags
})

// KeyIn returns a key in Cluster slot s (0..16383) that starts with base:
// base followed by the hash tag "{<n>}" of slot s when that lands there
// (base has no complete hash tag of its own), otherwise base followed by
// the smallest decimal integer that makes the key hash to s (base holds a
// '{' that no '}' closes, so the whole key is hashed), or "" when neither
// does (base holds a complete hash tag of another slot).
func KeyIn(base string, s int) string {
	if s < 0 || s >= len(slotTags()) {
		return ""
	}
	k := base + "{" + strconv.FormatUint(uint64(slotTags()[s]), 10) + "}"
	if Of(k) == s {
		return k
	}
	if Of(base+"0") == Of(base+"1") && Of(base+"1") == Of(base+"2") {
		return "" // base's own hash tag decides the slot
	}
	var buf []byte
	for n := uint64(0); n < 1<<22; n++ {
		buf = strconv.AppendUint(append(buf[:0], base...), n, 10)
		if Of(string(buf)) == s {
			return string(buf)
		}
	}
	return ""
}

// HasTag reports whether key holds a hash tag: a '{' followed, after at
// least one byte, by a '}'. Then the tag alone decides the key's slot,
// whatever follows it.
func HasTag(key string) bool {
	if i := indexByte(key, '{'); i >= 0 {
		return indexByte(key[i+1:], '}') > 0
	}
	return false
}
