package lock

import "github.com/coordkit/coordination/internal/engine"

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
	fieldRefresh = engine.NewScript("lease_refresh", engine.Bool01).Requires(engine.HashFieldExpiration)
	fieldVerify  = engine.NewScript("lease_verify", engine.Bool01).Requires(engine.HashFieldExpiration)
	fieldRelease = engine.NewScript("lease_release", engine.ReleaseReply).Requires(engine.HashFieldExpiration)
)

// decodeFieldGrant reads lease_acquire's two-integer reply: {1, ttl}
// (acquired) or {0, pttl} (held by another).
func decodeFieldGrant(v any) (engine.Grant, bool) {
	a, ok := engine.Ints(v, 2)
	if !ok {
		return engine.Grant{}, false
	}
	switch a[0] {
	case 1:
		return engine.Grant{Acquired: true}, true
	case 0:
		return engine.Grant{RetryIn: engine.RetryIn(a[1])}, true
	}
	return engine.Grant{}, false
}

// fieldWaitKey returns the name whose release channel
// (the engine's channel prefix + the name) a waiter for one field of the prefixed
// hash key full watches, and lease_release publishes on: the key, a NUL
// byte, the field.
func fieldWaitKey(full, field string) string { return full + "\x00" + field }
