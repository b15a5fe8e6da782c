package engine

import "strings"

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
	LockTry     = lockTry()
	LockAcquire = NewScript("lock_acquire", decodeLockGrant)
	LockRefresh = NewScript("lock_refresh", Bool01)
	LockVerify  = NewScript("lock_verify", Bool01)
	LockRelease = NewScript("lock_release", ReleaseReply)
)

func lockTry() *Command[Grant] {
	c := NewCommand("lock_try", []any{"set", KeyAt(0), ArgAt(0), "nx", "get", "px", ArgAt(1)}, decodeLockTry)
	c.reject = rejectLockTry
	return c
}

// errForeignLockValue is the error of a lock key holding a string that is
// no owner token (someone else's value): the lock_acquire script raises the
// same.
var errForeignLockValue = &scriptError{code: "COORD_BADSTATE", detail: "the lock key holds a value that is not an owner token"}

// rejectLockTry returns errForeignLockValue for a SET NX GET reply that is
// a string but neither the caller's token nor token-shaped (36 bytes of a
// version 4 UUID in lower-case hex, from [NewToken]; a waiter may have
// appended '+'). SET NX wrote nothing then.
func rejectLockTry(v, id any) error {
	s, ok := v.(string)
	if !ok {
		return nil
	}
	if tok, ok := id.(string); ok && ownValue(s, tok) {
		return nil
	}
	if !IsToken(strings.TrimSuffix(s, "+")) {
		return errForeignLockValue
	}
	return nil
}

// IsToken reports whether s has the form of a [NewToken] token: 36 bytes,
// lower-case hex digits with '-' at 8, 13, 18 and 23.
func IsToken(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}

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
