package engine

import (
	"strconv"
	"sync"
)

// Release marks. A release deletes what it releases, so a release re-sent
// by go-redis after its first send's reply was lost would find nothing and
// report decode.AlreadyReleased although its first send released. The release
// scripts of the kinds with [LeaseKind.ReleaseMark] therefore take one more
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

// markKey returns the release mark key of the prefixed key full, in full's
// Cluster slot and under the engine's key prefix: full followed by
// "\x00released" when full has a hash tag, otherwise the prefix, a hash tag
// chosen for full's slot ("{<decimal>}"), the rest of full and the
// suffix. It returns "" when no such key exists (a prefix with an unpaired
// '{'): the release then runs without a mark.
func (e *Engine) markKey(full string) string { return MarkKeyOf(e.prefix, full) }

// MarkKeyOf is Engine.markKey for the key prefix prefix (coordctl
// names the release marks it inspects with it).
func MarkKeyOf(prefix, full string) string {
	if i := indexByte(full, '{'); i >= 0 {
		if j := indexByte(full[i+1:], '}'); j > 0 {
			return full + markSuffix
		}
	}
	slot := keySlot(full)
	if len(full) < len(prefix) || full[:len(prefix)] != prefix {
		return ""
	}
	m := prefix + "{" + strconv.FormatUint(uint64(slotTags()[slot]), 10) + "}" + full[len(prefix):] + markSuffix
	if keySlot(m) != slot {
		return ""
	}
	return m
}

// WithMark returns keys followed by the release mark key of its first key,
// or keys unchanged when there is none or when the client never re-sends a
// command (MaxRetries < 1: nothing to recognise, nothing spent).
func (e *Engine) WithMark(keys Keys) Keys {
	if !e.resends {
		return keys
	}
	m := e.markKey(keys.firstKey())
	if m == "" {
		return keys
	}
	n := keys.Len()
	full := make([]string, n+1)
	boxed := make([]any, n+1)
	for i := range n {
		full[i] = keys.Full()[i]
		boxed[i] = keys.arg(i)
	}
	full[n], boxed[n] = m, m
	return Keys{full: full, boxed: boxed, name: keys.name, named: keys.named}
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
