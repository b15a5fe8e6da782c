package slot

import "testing"

// A key's shard channel lies in the key's Cluster slot (an SPUBLISH from
// the key's script must stay in the script's slot), and a key without one
// is exactly a key whose braces form no hash tag.
func TestShardChannelIsInTheKeysSlot(t *testing.T) {
	for _, key := range []string{"plain", "t:lock", "{tag}:lease", "a{b}c", "x{}y{z}", "{}", "}", "odd}key", "open{only", "", "\x00bin\xff", "k:\x00field"} {
		for _, part := range []string{"", "\x00field", "\x00{f}"} {
			classic, shard := Channels(key, part)
			if classic != ChannelPrefix+key+part {
				t.Errorf("Channels(%q, %q) classic = %q", key, part, classic)
			}
			tagged := hasTag(key)
			if shard == "" {
				if tagged || key != "" && !hasBrace(key) {
					t.Errorf("Channels(%q, %q): no shard channel for a key that can have one", key, part)
				}
				continue
			}
			if Of(shard) != Of(key) {
				t.Errorf("Channels(%q, %q) shard %q is in slot %d, the key in %d", key, part, shard, Of(shard), Of(key))
			}
		}
	}
}

func hasTag(k string) bool {
	i := indexByte(k, '{')
	return i >= 0 && indexByte(k[i+1:], '}') > 0
}

func hasBrace(k string) bool { return indexByte(k, '{') >= 0 || indexByte(k, '}') >= 0 }
