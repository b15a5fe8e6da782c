package lock

import (
	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
)

// The scripts of the named leases in hash fields, each next to its
// decoder (the key lock's are in internal/lockcore, which redlock runs
// too). A lease is identified by two arguments, its field and its owner
// token (its id in the lease argument convention); the layout is
// documented in lease_acquire.lua. Every script calls HPEXPIRETIME first,
// so that a server without hash-field expiration fails it before anything
// is written, with an error matching ErrUnsupportedServer
// (engine.HashFieldExpiration).
var (
	fieldAcquire = engine.NewScript("lease_acquire", decodeFieldGrant).Requires(engine.HashFieldExpiration)
	fieldRefresh = engine.NewScript("lease_refresh", decode.Bool01).Requires(engine.HashFieldExpiration)
	fieldVerify  = engine.NewScript("lease_verify", decode.Bool01).Requires(engine.HashFieldExpiration)
	fieldRelease = engine.NewScript("lease_release", decode.Release).Requires(engine.HashFieldExpiration)
	// fieldAbandon is the cleanup of an ambiguous acquisition: it
	// releases the field if the token holds it and leaves the token's
	// tombstone (token + "!") there, appended to another token's tombstone
	// (a list of up to 8) (engine.LeaseKind.Abandon).
	fieldAbandon = engine.NewScript("lease_abandon", decode.Release).Requires(engine.HashFieldExpiration)
)

// decodeFieldGrant reads lease_acquire's two-integer reply: {1, ttl}
// (acquired) or {0, pttl} (held by another).
func decodeFieldGrant(v any) (decode.Grant, bool) {
	a, ok := decode.Ints(v, 2)
	if !ok {
		return decode.Grant{}, false
	}
	switch a[0] {
	case 1:
		return decode.Grant{Acquired: true}, true
	case 0:
		return decode.Grant{RetryIn: decode.RetryIn(a[1])}, true
	}
	return decode.Grant{}, false
}

// fieldWaitPart returns the part of the hash key's release channels
// ([engine.Engine.WatchPart]) a waiter for one field watches, and
// lease_release publishes on: a NUL byte, the field.
func fieldWaitPart(field string) string { return "\x00" + field }
