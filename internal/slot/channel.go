package slot

// Release channels. A release script wakes the waiters of its key KEYS[1]
// (with a suffix: of one part of it, a hash field's lease) through the
// function the Lua fragment lua/fragments/notify.lua defines; Channels is
// its Go side and names the same channels, so that waiters subscribe where
// the scripts publish.
//
// The shard channel lies in the key's Cluster slot, so that a sharded
// publication (SPUBLISH) is delivered by the key's own shard: a key with a
// hash tag keeps its classic channel name (the tag is the channel's), a key
// without '{' or '}' is followed by itself as a tag. Any other key (braces
// that form no hash tag) has no shard channel: its channel's slot could
// only be named by computing the key's slot in the script, and it is
// published with classic Pub/Sub on every server.

// ChannelPrefix starts every release channel: ACLs grant the channels as
// &coordination:<key prefix>*.
const ChannelPrefix = "coordination:"

// Channels returns the release channels of the prefixed key full followed
// by suffix ("" for the key itself): classic, the channel the scripts
// PUBLISH on where sharded Pub/Sub is unavailable ("coordination:" + full +
// suffix), and shard, the channel they SPUBLISH on, in full's Cluster slot,
// or "" when full has none (braces that form no hash tag).
func Channels(full, suffix string) (classic, shard string) {
	classic = ChannelPrefix + full + suffix
	if i := indexByte(full, '{'); i >= 0 {
		if j := indexByte(full[i+1:], '}'); j > 0 {
			return classic, classic
		}
		return classic, ""
	}
	if full == "" || indexByte(full, '}') >= 0 {
		return classic, ""
	}
	return classic, ChannelPrefix + full + "{" + full + "}" + suffix
}
