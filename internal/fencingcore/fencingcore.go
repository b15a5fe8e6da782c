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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/instrument"
	"github.com/coordkit/coordination/internal/slot"
)

// The fencing lock's scripts, on the lease key, the counter key and the
// slot's shared counter hash (one Cluster slot; see [Keys]). Each is immutable and safe for concurrent use.
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
	// Abandon (fencing_abandon.lua) is the cleanup of an ambiguous
	// acquisition (engine.LeaseKind.Abandon): it releases the token if it
	// holds the lease and leaves its tombstone, {owner: token + "!"} for
	// the given TTL (appended to another token's tombstone, a list of up
	// to 8, the TTL the longer of the two), which Acquire refuses to every
	// token in it (nothing written, the counter untouched) and takes over
	// for any other, and Read reads as free. The counter is never touched.
	Abandon = engine.NewScript("fencing_abandon", decode.Release)
)

// SharedBase starts the name of every shared counter hash, after the key
// prefix: the hash of one Cluster slot is the prefix, SharedBase and a hash
// tag of the slot ([SharedKey]).
const SharedBase = "coordination:fences:"

// SharedKey returns the full name of the shared counter hash that holds
// the counters of the fenced names in Cluster slot s (0..16383) under the
// key prefix prefix: prefix + [SharedBase] + "{<n>}" with a hash tag of the
// slot, or prefix + SharedBase + a number when the prefix holds a '{' that
// no '}' closes (see [slot.KeyIn]); "" when no such key lies in s (a prefix
// whose own hash tag is in another slot: then no key of the prefix is in
// s).
func SharedKey(prefix string, s int) string { return slot.KeyIn(prefix+SharedBase, s) }

// SharedKeyOf returns the full name of the shared counter hash that holds
// the counter of the fenced name whose full (prefixed) counter key is
// counterKey, under the key prefix prefix: its field there is counterKey.
// It is [SharedKey] of counterKey's slot, followed, when the prefix holds a
// hash tag of its own (every key of the prefix then lies in one slot), by
// ":" and the slot the counter key would have without the prefix, so that
// the names are spread over up to 16384 hashes of that slot instead of one
// (a hash of up to 128 short fields is stored compactly; one of a million
// fields costs more per field than a key of its own).
func SharedKeyOf(prefix, counterKey string) string {
	k := SharedKey(prefix, slot.Of(counterKey))
	if k != "" && slot.HasTag(prefix) && strings.HasPrefix(counterKey, prefix) {
		k += ":" + strconv.Itoa(slot.Of(counterKey[len(prefix):]))
	}
	return k
}

// Keys validates a fencing lock's lease and counter keys (without the
// prefix; names are their argument names for the errors, nil for "key 1",
// "key 2") and returns them, prefixed and slot-checked, followed by the
// shared counter hash of their slot ([SharedKeyOf]): the three keys of
// [Acquire]. Nothing is sent. The counter key names the counter: it is the
// field of the shared hash (its full, prefixed name), and a key only for an
// earlier version's counter, which the first acquisition folds in.
func Keys(e *engine.Engine, names []string, leaseKey, fenceKey string) (engine.Keys, error) {
	prefix := e.Prefix()
	shared := SharedKeyOf(prefix, prefix+fenceKey)
	if shared == "" {
		return engine.Keys{}, check.InvalidArgument("fenceKey", "no shared fence-counter key lies in its Cluster slot under the key prefix")
	}
	if names != nil {
		names = append(names[:len(names):len(names)], "fence counters")
	}
	return e.NamedKeys(names, leaseKey, fenceKey, shared[len(prefix):])
}

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
	Since  time.Time     // the term's start a leader recorded (server clock); zero when none
}

func decodeRead(v any) (Holder, bool) {
	if v == nil {
		return Holder{}, true
	}
	a, ok := decode.Array(v, 4)
	if !ok {
		return Holder{}, false
	}
	fence, ok1 := decode.PositiveDecimal(a[0])
	holder, ok2 := a[1].(string)
	pttl, ok3 := a[2].(int64)
	since, ok4 := a[3].(string)
	if !ok1 || !ok2 || !ok3 || !ok4 || pttl < 0 || pttl > maxMillis {
		return Holder{}, false
	}
	h := Holder{Held: true, Fence: fence, Holder: holder, TTL: time.Duration(pttl) * time.Millisecond}
	if since != "" {
		// Written by leader_proclaim from the server's TIME; anything
		// else in the field (an operator's write) is shown as no start.
		if ms, err := strconv.ParseInt(since, 10, 64); err == nil && ms > 0 && ms < maxMillis {
			h.Since = time.UnixMilli(ms)
		}
	}
	return h, true
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
