package engine

// Scripts of the named leases in hash fields (package lock), each next to
// its decoder. A lease is identified by two arguments, its field and its
// owner token (its id in the lease argument convention); the layout is
// documented in lease_acquire.lua. Every script calls HPEXPIRETIME first,
// so that a server without hash-field expiration fails it before anything
// is written, with an error matching ErrUnsupportedServer
// ([HashFieldExpiration]).
var (
	LeaseAcquire = NewScript("lease_acquire", decodeGrant).Requires(HashFieldExpiration)
	LeaseRefresh = NewScript("lease_refresh", Bool01).Requires(HashFieldExpiration)
	LeaseVerify  = NewScript("lease_verify", Bool01).Requires(HashFieldExpiration)
	LeaseRelease = NewScript("lease_release", ReleaseReply).Requires(HashFieldExpiration)
)

// FieldWaitKey returns the name whose release channel (ChannelPrefix +
// the name) a waiter for one field of the prefixed hash key full watches,
// and lease_release publishes on: the key, a NUL byte, the field.
func FieldWaitKey(full, field string) string { return full + "\x00" + field }
