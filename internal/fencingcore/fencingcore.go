// Package fencingcore is the room of the fencing-token lock for what
// several packages run: its lease scripts, each next to its strict
// decoder, the read of its holder, the counter-reset instrument and the
// per-coordinator watch of the highest token handed out. The fencing lock
// (internal/fencelock, under packages fencing and leader) and redlock's
// fencing node run them; what only package fencing uses (the guarded
// resource) stays unexported there. The reply shapes are documented in the
// .lua files.
package fencingcore

import (
	"math"
	"sync"
	"time"

	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/instrument"
)

// The fencing lock's scripts, on the lease key and the counter key (one
// Cluster slot). Each is immutable and safe for concurrent use.
var (
	// Acquire (fencing_acquire.lua) takes the lease and hands out the next
	// token of the counter (Grant.Value, a positive decimal; the same
	// token on a re-send by the same owner), or reports the holder's PTTL.
	// Its errors about the counter name the counter key.
	Acquire = engine.NewScript("fencing_acquire", decodeGrant).ErrorsOn(1, "COORD_BADCOUNTER", "COORD_OVERFLOW")
	// Refresh (fencing_refresh.lua) extends the owner's TTL: true, or
	// false when the caller no longer holds the lease.
	Refresh = engine.NewScript("fencing_refresh", decode.Bool01)
	// Verify (fencing_verify.lua) reports whether the caller holds the
	// lease.
	Verify = engine.NewScript("fencing_verify", decode.Bool01)
	// Release (fencing_release.lua) ends the lease if the caller holds it.
	Release = engine.NewScript("fencing_release", decode.Release)
	// Read (fencing_read.lua) reports who holds the lease, without
	// writing.
	Read = engine.NewScript("fencing_read", decodeRead)
)

// CounterResets counts tokens that were not above the highest one the
// coordinator had seen from the same counter (see [NoteFence]).
var CounterResets = instrument.New(instrument.Counter, "coordination.fencing.counter_resets", "{acquisition}", "",
	"Fencing-token acquisitions (fencing locks, leader terms) whose token was not above the highest this coordinator had seen from the same counter: the counter went back (a restart without persistence, a failover that lost increments, eviction, FLUSHALL) and tokens may repeat.")

// maxMillis is the largest millisecond count a time.Duration holds.
const maxMillis = int64(math.MaxInt64 / int64(time.Millisecond))

// decodeGrant reads a string, the fence (acquired; a positive decimal),
// or an integer, the holder's PTTL (held by another; >= 0: a holder
// without a TTL is the script's COORD_BADSTATE).
func decodeGrant(v any) (decode.Grant, bool) {
	switch r := v.(type) {
	case string:
		_, ok := decode.PositiveDecimal(r)
		return decode.Grant{Acquired: true, Value: r}, ok
	case int64:
		return decode.Grant{RetryIn: decode.RetryIn(r)}, r >= 0
	}
	return decode.Grant{}, false
}

// Holder is the decoded reply of [Read]: who holds a fencing-token lease.
type Holder struct {
	Held   bool
	Fence  int64         // the holder's token; >= 1 when Held
	Holder string        // the holder's owner token
	TTL    time.Duration // the lease's remaining TTL (a lease without one is refused)
}

func decodeRead(v any) (Holder, bool) {
	if v == nil {
		return Holder{}, true
	}
	a, ok := decode.Array(v, 3)
	if !ok {
		return Holder{}, false
	}
	fence, ok1 := decode.PositiveDecimal(a[0])
	holder, ok2 := a[1].(string)
	pttl, ok3 := a[2].(int64)
	if !ok1 || !ok2 || !ok3 || pttl < 0 || pttl > maxMillis {
		return Holder{}, false
	}
	return Holder{Held: true, Fence: fence, Holder: holder, TTL: time.Duration(pttl) * time.Millisecond}, true
}

// MaxWatchedCounters bounds how many fencing counters one coordinator
// remembers the highest token of; past it, an arbitrary one is forgotten.
const MaxWatchedCounters = 4096

// fenceWatch remembers the highest fencing token a coordinator handed out
// per counter key.
type fenceWatch struct {
	mu   sync.Mutex
	high map[string]int64
}

// watchKey is the engine slot ([engine.Engine.Local]) of the fenceWatch.
type watchKey struct{}

// NoteFence records token as handed out by e from the counter at the
// prefixed key counterKey and reports whether the counter went back: token
// is not above the highest one e handed out from it before. Then tokens
// may repeat (the counter was lost in a restart without persistence, a
// failover that lost its last increments, eviction or a FLUSHALL, and
// started again); the caller counts it ([CounterResets]) and logs it.
// Redis alone cannot tell a lost counter from a new one; a process that
// saw a higher token can. It is safe for concurrent use.
func NoteFence(e *engine.Engine, counterKey string, token int64) bool {
	w := e.Local(watchKey{}, func() any { return new(fenceWatch) }).(*fenceWatch)
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
