// Package lockcore is the room of package lock's owner-token lock for what
// other packages also run: its command and scripts, each next to its
// strict decoder, and the instruments of the lock-shaped leases. Package
// lock builds its Mutex on them, redlock runs the same scripts on every
// node, and the fencing lock (internal/fencelock) records its leases in
// the same instruments. What only package lock uses (the named leases in
// hash fields) stays unexported there.
//
// The lock key holds the holder's owner token, followed by '+' once a
// blocked waiter has found it held: the release publishes a notification
// only then. A waiter always marks before it sleeps (its first attempt,
// [Try], does not mark, but the wait loop subscribes and tries again with
// [Acquire] before sleeping), so a release that does not publish can only
// come before that marking attempt, which then finds the lock free. The
// reply shapes are documented in the .lua files.
//
// The background cleanup of an ambiguous acquisition ([Abandon]) leaves
// the abandoned token followed by '!' (a tombstone) with a bounded TTL
// (engine.AbandonFor), beside those of other abandoned acquisitions
// ([Abandoned]): the acquisition's request, if it reaches the server
// after the cleanup, finds the key occupied ([Try]'s SET NX fails;
// [Acquire] refuses tombstones among which is the caller's own) and takes
// nothing. When another owner holds the lock at the cleanup, the engine
// runs it again until the lock is free (engine.Engine.Abandon). Any
// other acquirer takes tombstones over: [Try] reports them with
// decode.Grant.Again and the engine sends [Acquire] at once, which
// overwrites them; refresh, verify and release of any token never match them.
package lockcore

import (
	"strings"
	"time"

	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/instrument"
	"github.com/coordkit/coordination/internal/layout"
)

// The lock's command and scripts. Each is immutable and safe for
// concurrent use.
var (
	// Try is the first attempt of every acquisition, without a script:
	// SET key token NX GET PX ttl (Redis 7.0 and later; Valkey). Its
	// reply is nil when it set the key, or the value it found: the
	// caller's own token (with or without the waiter mark) after a re-send
	// whose first run set it, another owner's token otherwise. A value
	// that is no owner token at all is an error wrapping ErrBadState (SET
	// NX wrote nothing), as lock_acquire raises.
	Try = engine.NewCommand("lock_try", []any{"set", engine.KeyAt(0), engine.ArgAt(0), "nx", "get", "px", engine.ArgAt(1)}, decodeTry).
		Refusing("the lock key holds a value that is not an owner token", foreignValue)
	// Acquire (lock_acquire.lua) takes the lock or reports the holder's
	// PTTL, marking the lock for a waiter.
	Acquire = engine.NewScript("lock_acquire", decodeGrant)
	// Refresh (lock_refresh.lua) extends the owner's TTL: true, or false
	// when the caller no longer holds the lock.
	Refresh = engine.NewScript("lock_refresh", decode.Bool01)
	// RedlockRefresh (redlock_refresh.lua) is a Redlock node's refresh:
	// it extends the owner's TTL, or takes the key again when it is free
	// on that node (true), and leaves another owner's lock (false).
	RedlockRefresh = engine.NewScript("redlock_refresh", decode.Bool01)
	// Verify (lock_verify.lua) reports whether the caller holds the lock.
	Verify = engine.NewScript("lock_verify", decode.Bool01)
	// Release (lock_release.lua) deletes the key if the caller holds it.
	Release = engine.NewScript("lock_release", decode.Release)
	// Abandon (lock_abandon.lua) is the cleanup of an ambiguous
	// acquisition: it releases the token if it holds the lock and leaves
	// its tombstone (engine.LeaseKind.Abandon).
	Abandon = engine.NewScript("lock_abandon", decode.Release)
	// Holder (lock_holder.lua) reads the lock's owner and PTTL, writing
	// nothing (lock.Mutex.Holder and Adopt, a Redlock node's read).
	Holder = engine.NewScript("lock_holder", DecodeHolder(true))
)

// Holding is the decoded reply of lock_holder and lease_holder.
type Holding struct {
	Held  bool // false: free (no key, or an abandoned acquisition's tombstone)
	Token string
	TTL   time.Duration // engine.NoExpiry for none
}

// DecodeHolder reads false (free) or {value, pttl_ms}: value an owner
// token (with the waiter mark '+' when mark) or an abandoned
// acquisition's tombstone (free: lock_abandon, lease_abandon), pttl_ms >= 0
// or -1 (none); 0, the lease's last millisecond, reads as free.
func DecodeHolder(mark bool) func(v any) (Holding, bool) {
	return func(v any) (Holding, bool) {
		if v == nil {
			return Holding{}, true
		}
		a, ok := decode.Array(v, 2)
		if !ok {
			return Holding{}, false
		}
		s, ok1 := a[0].(string)
		p, ok2 := a[1].(int64)
		if ok1 && ok2 && IsTombstone(s) && (p >= 0 || p == -1) {
			// An abandoned acquisition's tombstone: the lease is free.
			return Holding{}, true
		}
		if mark {
			s = strings.TrimSuffix(s, "+")
		}
		if !ok1 || !ok2 || !layout.IsToken(s) || (p < 0 && p != -1) {
			return Holding{}, false
		}
		if p == 0 {
			// The lease's last millisecond (PTTL rounds down): ending now,
			// read as free.
			return Holding{}, true
		}
		ttl := engine.NoExpiry
		if p != -1 {
			ttl = time.Duration(p) * time.Millisecond
		}
		return Holding{Held: true, Token: s, TTL: ttl}, true
	}
}

// Tombstone is the mark that follows an abandoned token in the lock key
// (lock_abandon.lua).
const Tombstone = "!"

// IsTombstone reports whether the lock value v is tombstones: one to
// eight owner tokens, each followed by [Tombstone] (lock_abandon.lua;
// layout.Tombstones).
func IsTombstone(v string) bool { return Abandoned(v) != nil }

// Abandoned returns the owner tokens whose tombstones the lock value v
// holds, oldest first, or nil when v is not tombstones
// (layout.Tombstones).
func Abandoned(v string) []string { return layout.Tombstones(v) }

// Metrics are the instruments of the lock-shaped leases
// (coordination.lock.*), told apart by the attribute kind: lock (package
// lock's Mutex), fencing (the fencing lock and leader terms) and lease
// (package lock's named leases in hash fields).
var Metrics = instrument.NewLease("lock", "lock", "kind",
	"Lock acquisitions (a Mutex's or, for kind=lease, a FieldSet's TryAcquire or Acquire) that found the lock held, counted once per call.")

// foreignValue reports a SET NX GET reply that is a string but neither the
// caller's token nor token-shaped (layout.IsToken; a waiter may have
// appended '+').
func foreignValue(v, id any) bool {
	s, ok := v.(string)
	if !ok {
		return false
	}
	if tok, ok := id.(string); ok && ownValue(s, tok) {
		return false
	}
	return !layout.IsToken(strings.TrimSuffix(s, "+")) && !IsTombstone(s)
}

// decodeTry reads the reply of SET NX GET: nil (acquired), the caller's
// own token id, possibly marked (acquired by an earlier send of the same
// request: the TTL it set runs from before this call was sent), a
// tombstone (not acquired, Again: lock_acquire decides), or another
// owner's value (held; the retry time is unknown).
func decodeTry(v, id any) (decode.Grant, bool) {
	if v == nil {
		return decode.Grant{Acquired: true}, true
	}
	s, ok := v.(string)
	if !ok {
		return decode.Grant{}, false
	}
	if tok, ok := id.(string); ok && ownValue(s, tok) {
		return decode.Grant{Acquired: true}, true
	}
	if strings.HasSuffix(s, Tombstone) {
		return decode.Grant{Again: true}, true
	}
	return decode.Grant{}, true
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

// decodeGrant reads 'OK' (acquired) or an integer, the holder's PTTL
// (held by another; -1 when it has no TTL).
func decodeGrant(v any) (decode.Grant, bool) {
	switch r := v.(type) {
	case string:
		return decode.Grant{Acquired: true}, r == "OK"
	case int64:
		return decode.Grant{RetryIn: decode.RetryIn(r)}, r >= -1
	}
	return decode.Grant{}, false
}
