package engine

// The owner-token lock (package lock): its commands and scripts, each next
// to its decoder. The reply shapes are documented in the .lua files.
//
// The lock key holds the holder's owner token, followed by '+' once a
// blocked waiter has found it held: the release publishes a notification
// only then. A waiter always marks before it sleeps (its first attempt,
// LockTry, does not mark, but the wait loop subscribes and tries again with
// LockAcquire before sleeping), so a release that does not publish can
// only come before that marking attempt, which then finds the lock free.
var (
	// LockTry is the first attempt of every acquisition, without a
	// script: SET key token NX GET PX ttl (Redis 7.0 and later; Valkey).
	// Its reply is nil when it set the key, or the value it found: the
	// caller's own token (with or without the waiter mark) after a re-send
	// whose first run set it, another owner's token otherwise.
	LockTry     = NewCommand("lock_try", []any{"set", KeyAt(0), ArgAt(0), "nx", "get", "px", ArgAt(1)}, decodeLockTry)
	LockAcquire = NewScript("lock_acquire", decodeLockGrant)
	LockRefresh = NewScript("lock_refresh", Bool01)
	LockVerify  = NewScript("lock_verify", Bool01)
	LockRelease = NewScript("lock_release", ReleaseReply)
)

// decodeLockTry reads the reply of SET NX GET: nil (acquired), the
// caller's own token id, possibly marked (acquired by an earlier send of
// the same request: the TTL it set runs from before this call was sent), or
// another owner's value (held; the retry time is unknown).
func decodeLockTry(v, id any) (Grant, bool) {
	if v == nil {
		return Grant{Acquired: true}, true
	}
	s, ok := v.(string)
	if !ok {
		return Grant{}, false
	}
	if tok, ok := id.(string); ok && ownValue(s, tok) {
		return Grant{Acquired: true}, true
	}
	return Grant{}, true
}

// ownValue reports whether the lock value v is token, with or without the
// waiter mark '+'.
func ownValue(v, token string) bool {
	switch len(v) {
	case len(token):
		return v == token
	case len(token) + 1:
		return v[len(token)] == '+' && v[:len(token)] == token
	}
	return false
}

// decodeLockGrant reads 'OK' (acquired) or an integer, the holder's PTTL
// (held by another; -1 when it has no TTL).
func decodeLockGrant(v any) (Grant, bool) {
	switch r := v.(type) {
	case string:
		return Grant{Acquired: true}, r == "OK"
	case int64:
		return Grant{RetryIn: RetryIn(r)}, r >= -1
	}
	return Grant{}, false
}
