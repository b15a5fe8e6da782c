package engine

import "sync"

// MaxWatchedCounters bounds how many fencing counters one engine remembers
// the highest token of; past it, an arbitrary one is forgotten.
const MaxWatchedCounters = 4096

// fenceWatch remembers the highest fencing token the engine handed out per
// counter key.
type fenceWatch struct {
	mu   sync.Mutex
	high map[string]int64
}

// NoteFence records token as handed out from the counter at the prefixed
// key counterKey and reports whether the counter went back: token is not
// above the highest one this engine handed out from it before. Then
// tokens may repeat (the counter was lost in a restart without
// persistence, a failover that lost its last increments, eviction or a
// FLUSHALL, and started again); the caller counts it
// ([FencingCounterResets]) and logs it. Redis alone cannot tell a lost
// counter from a new one; a process that saw a higher token can. It is
// safe for concurrent use.
func (e *Engine) NoteFence(counterKey string, token int64) bool {
	w := &e.fences
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.high == nil {
		w.high = map[string]int64{}
	}
	prev, seen := w.high[counterKey]
	if !seen && len(w.high) >= MaxWatchedCounters {
		for k := range w.high {
			delete(w.high, k)
			break
		}
	}
	if token > prev {
		w.high[counterKey] = token
	}
	return seen && token <= prev
}
