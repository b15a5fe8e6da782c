package engine

// Size bounds. Every argument that the library stores in Redis or sends in
// a script call has a maximum size, checked before anything is admitted or
// sent: a longer one is an error from [InvalidArgument] naming it. The
// bounds keep one call's work on the server's single thread small and
// predictable (a key is also hashed, published as a channel name and
// copied into every reply that names it), and catch a caller that passes
// a whole document where an identifier was meant.
const (
	// MaxKeyBytes bounds a key (before the coordinator's prefix) and a
	// field lease's field name: 1 KiB. Redis allows 512 MB, but keys are
	// identifiers; Redis' own guidance is to keep them short, and 1 KiB
	// holds any URL-ish name or a hash of a longer one.
	MaxKeyBytes = 1 << 10
	// MaxIdentityBytes bounds an identity stored with a lease or a list
	// entry: a leader's identity, a fencing lock's holder
	// (fencing.WithHolder), a deny-list identity, an owner token
	// handed back (the library's are 36 bytes): 256 bytes, room for a
	// host name, a pod name and a process id.
	MaxIdentityBytes = 256
	// MaxFingerprintBytes bounds an idempotency request fingerprint: 1 KiB
	// (the default fingerprint, a hex SHA-256, is 64 bytes; a longer one
	// is better hashed).
	MaxFingerprintBytes = 1 << 10
	// MaxValueBytes bounds a stored value: an idempotency result given to
	// Store.Complete, a fencing.Guarded.Set value: 16 MiB. The HTTP
	// middleware's stored responses have their own, lower, configurable
	// bound (idempotency.WithMaxResponseBytes, 1 MiB by default, at most
	// this).
	MaxValueBytes = 16 << 20
)

// CheckSize returns an error from [InvalidArgument] naming name when n
// bytes exceed max.
func CheckSize(name string, n, max int) error {
	if n > max {
		return InvalidArgument(name, "is %d bytes long; at most %d are allowed", n, max)
	}
	return nil
}
