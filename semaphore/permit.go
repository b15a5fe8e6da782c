package semaphore

import (
	coordination "github.com/coordkit/coordination"
)

// Permit is one holder's share of a semaphore: N permits taken together by
// one acquisition, released together. It is returned by the acquire
// methods of [Semaphore] and is safe for concurrent use by multiple
// goroutines. Its lease methods are those of the embedded
// [coordination.Lease], admitted through hooks as SEMAPHORE RENEW, VERIFY
// and RELEASE: Refresh takes a TTL of at least 1 ms, as the acquisitions
// do (a permit always has a lease), Release never returns NotOwned (a permit belongs to its holder alone), and Key is the
// semaphore's key. Its member in the sorted set is "P:<N>:<Token>". It
// adds [Permit.N].
type Permit struct {
	coordination.Lease
	sem *Semaphore
	n   int64
	id  [1]any // the handle's id: the member, as a script argument
}

// N returns the number of permits held (1 for TryAcquire and Acquire).
func (p *Permit) N() int64 {
	if p == nil {
		return 0
	}
	return p.n
}
