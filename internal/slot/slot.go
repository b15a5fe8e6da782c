// Package slot holds the Redis Cluster key-slot function (CRC16 of the key
// or of its hash tag) and the naming of release marks, the keys a release
// records its id in, placed in the released key's slot. It knows no
// primitive and no engine.
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

// Release marks. A release deletes what it releases, so a release re-sent
// by go-redis after its first send's reply was lost would find nothing and
// report decode.AlreadyReleased although its first send released. The release
// scripts of the kinds with the engine's LeaseKind.ReleaseMark therefore take one more
// key, last: the lease's release mark, where a release that removes its
// lease records the released id (SET ... PX 5000); a release that finds
// its lease gone or taken over and its own id in the mark reports decode.Released.
// The mark holds the last release of the lease key only (a second release
// on the same key within the 5 s replaces it) and lasts 5 s, far longer
// than go-redis' re-send delays (MaxRetryBackoff, 512 ms by default).

// MarkTTL is how long a release mark lasts, in milliseconds.
const MarkTTL = 5000

// MarkSuffix ends every release mark key.
const MarkSuffix = "\x00released"

const markSuffix = MarkSuffix

// MarkKey returns the release mark key of the prefixed key full under the
// key prefix prefix (the engine's markKey for its own prefix; coordctl
// names the release marks it inspects with it), in full's Cluster slot:
// full followed by "\x00released" when full has a hash tag, otherwise the
// prefix, a hash tag chosen for full's slot ("{<decimal>}"), the rest of
// full and the suffix. It returns "" when no such key exists (a prefix
// with an unpaired '{').
func MarkKey(prefix, full string) string {
	if i := indexByte(full, '{'); i >= 0 {
		if j := indexByte(full[i+1:], '}'); j > 0 {
			return full + markSuffix
		}
	}
	slot := Of(full)
	if len(full) < len(prefix) || full[:len(prefix)] != prefix {
		return ""
	}
	m := prefix + "{" + strconv.FormatUint(uint64(slotTags()[slot]), 10) + "}" + full[len(prefix):] + markSuffix
	if Of(m) != slot {
		return ""
	}
	return m
}

// slotTags holds, for each Cluster slot, the smallest integer whose decimal
// form hashes to it: "{<n>}" is then a hash tag of that slot. Computed once,
// on the first release of an untagged key (about 170,000 CRC16s).
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
