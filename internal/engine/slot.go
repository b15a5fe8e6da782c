package engine

import (
	"fmt"

	"github.com/coordkit/coordination/internal/check"
)

// keySlot returns the Redis Cluster hash slot (0..16383) of key: CRC16-XMODEM
// of the key, or of the part between the first '{' and the next '}' when
// that part is non-empty (a hash tag), modulo 16384, as specified in the
// Redis Cluster specification ("Keys distribution model").
func keySlot(key string) int {
	if i := indexByte(key, '{'); i >= 0 {
		if j := indexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) & 16383)
}

// sameSlotKeys returns nil when every key hashes to the same Cluster slot, and
// otherwise an error wrapping [sentinel.ErrInvalidArgument] (argument "keys") that
// names the slots (never the keys). It is applied to prefixed keys, so a prefix's hash tag counts.
func sameSlotKeys(keys ...string) error { return sameSlot(nil, keys) }

// sameSlot is sameSlotKeys naming keys[i] names[i] when there is one, and
// "key i+1" otherwise.
func sameSlot(names, keys []string) error {
	if len(keys) < 2 {
		return nil
	}
	name := func(i int) string {
		if i < len(names) && names[i] != "" {
			return names[i]
		}
		return fmt.Sprintf("key %d", i+1)
	}
	first := keySlot(keys[0])
	for i, k := range keys[1:] {
		if s := keySlot(k); s != first {
			return check.InvalidArgument("keys", "%s is in Redis Cluster slot %d, %s in slot %d; give the keys one {hash tag}", name(0), first, name(i+1), s)
		}
	}
	return nil
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
