package coordination

import "fmt"

// ReleaseOutcome says what an owner-checked release found.
type ReleaseOutcome int

const (
	// ReleaseUnknown, the zero value, is the outcome returned together with
	// an error: the release got no answer (the server was unreachable, ctx
	// ended, a hook rejected the call, the ACL denied the script), so what it
	// did is not known; the error says why. A release that may have run is
	// retried in the background (see the primitives' Release).
	ReleaseUnknown ReleaseOutcome = iota
	// Released means the caller held the lease and it is now deleted;
	// waiters were notified.
	Released
	// AlreadyReleased means the lease was the caller's but is gone already:
	// released before (by this handle) or expired, and nobody holds it now.
	AlreadyReleased
	// NotOwned means someone else holds the lease now (the caller's lease
	// expired and was taken over). Nothing was changed.
	NotOwned
)

// String returns "unknown", "released", "already released" or "not owned".
func (o ReleaseOutcome) String() string {
	switch o {
	case ReleaseUnknown:
		return "unknown"
	case Released:
		return "released"
	case AlreadyReleased:
		return "already released"
	case NotOwned:
		return "not owned"
	default:
		return fmt.Sprintf("ReleaseOutcome(%d)", int(o))
	}
}
