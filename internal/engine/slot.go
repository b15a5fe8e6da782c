package engine

import (
	"fmt"

	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/slot"
)

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
	first := slot.Of(keys[0])
	for i, k := range keys[1:] {
		if s := slot.Of(k); s != first {
			return check.InvalidArgument("keys", "%s is in Redis Cluster slot %d, %s in slot %d; give the keys one {hash tag}", name(0), first, name(i+1), s)
		}
	}
	return nil
}
