package engine

import "github.com/coordkit/coordination/internal/slot"

// markKey returns the release mark key of the prefixed key full, in full's
// Cluster slot and under the engine's key prefix: full followed by
// "\x00released" when full has a hash tag, otherwise the prefix, a hash tag
// chosen for full's slot ("{<decimal>}"), the rest of full and the
// suffix. It returns "" when no such key exists (a prefix with an unpaired
// '{'): the release then runs without a mark.
func (e *Engine) markKey(full string) string { return slot.MarkKey(e.prefix, full) }

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
	return Keys{full: full, boxed: boxed, name: keys.name, named: keys.named, field: keys.field}
}
