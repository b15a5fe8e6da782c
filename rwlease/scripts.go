package rwlease

import (
	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/instrument"
)

// The scripts of the read-write leases, each next to its decoder. A lease
// is identified by its sorted-set member, "R:<token>" or "W:<token>" (its
// id in the lease argument convention); the layout is documented in
// rwlease_acquire.lua. Every reply also carries the server time the script
// ran at, which the decoders check and drop (the linearizability check
// reads it). The verify reply has the semaphore's shape
// (decode.VerifyNow).
var (
	scriptAcquire = engine.NewScript("rwlease_acquire", decodeGrant)
	scriptRefresh = engine.NewScript("rwlease_refresh", decodeRefresh)
	scriptVerify  = engine.NewScript("rwlease_verify", decode.VerifyNow(false))
	scriptRelease = engine.NewScript("rwlease_release", decodeRelease)
	// scriptAbandon is the cleanup of an ambiguous acquisition
	// (engine.LeaseKind.Abandon): the release, then the member's tombstone
	// (a score of -(expiry) - 0.5), which scriptAcquire refuses to that
	// member and everything else ignores. Its reply reads as the release's.
	scriptAbandon = engine.NewScript("rwlease_abandon", decodeRelease)
)

// metrics are the instruments of read-write leases
// (coordination.rwlease.*), told apart by mode (read, write).
var metrics = instrument.NewLease("rwlease", "read-write lease", "mode",
	"Read-write lease acquisitions (TryRead, Read, TryWrite, Write) refused by a holder or, for readers, a waiting writer, counted once per call.")

// decodeGrant reads {1, 0, now} (acquired) or {0, retry_ms, now}
// (refused; retry_ms >= 1 until the entry in the way expires).
func decodeGrant(v any) (decode.Grant, bool) {
	a, ok := decode.Ints(v, 3)
	if !ok || a[2] <= 0 {
		return decode.Grant{}, false
	}
	switch {
	case a[0] == 1 && a[1] == 0:
		return decode.Grant{Acquired: true}, true
	case a[0] == 0 && a[1] >= 1:
		return decode.Grant{RetryIn: decode.RetryIn(a[1])}, true
	}
	return decode.Grant{}, false
}

// decodeRefresh reads {1, now} (refreshed) or {0, now} (gone).
func decodeRefresh(v any) (bool, bool) {
	a, ok := decode.Ints(v, 2)
	if !ok || a[1] <= 0 {
		return false, false
	}
	return decode.Bool01(a[0])
}

// decodeRelease reads {1, now} (released) or {0, now} (already gone). An
// entry belongs to its holder alone: there is no NotOwned.
func decodeRelease(v any) (decode.Outcome, bool) {
	a, ok := decode.Ints(v, 2)
	if !ok || a[1] <= 0 {
		return 0, false
	}
	switch a[0] {
	case 1:
		return decode.Released, true
	case 0:
		return decode.AlreadyReleased, true
	}
	return 0, false
}
