package coordination

import "fmt"

// ReleaseOutcome says what an owner-checked release found.
type ReleaseOutcome int

const (
	// Released means the caller held the lease and it is now deleted;
	// waiters were notified.
	Released ReleaseOutcome = iota + 1
	// AlreadyReleased means the lease was the caller's but is gone already:
	// released before (by this handle) or expired, and nobody holds it now.
	AlreadyReleased
	// NotOwned means someone else holds the lease now (the caller's lease
	// expired and was taken over). Nothing was changed.
	NotOwned
)

// String returns "released", "already released" or "not owned".
func (o ReleaseOutcome) String() string {
	switch o {
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
