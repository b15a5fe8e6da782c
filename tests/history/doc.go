// Package history holds the checked-history campaign and the soak (tests
// only; see CONTRIBUTING.md, "Checked histories").
//
// TestHistories runs, on every real backend at once, many small histories
// of every primitive (lock, field lease, fenced lock with a fenced
// resource, semaphore, read-write lease, latch, idempotency store, deny
// list, and the fixed-window, sliding-window, token-bucket, GCRA,
// concurrency and composite rate limiters): a few clients with their own go-redis clients, behind fault
// proxies (internal/testkit/faultproxy) that drop, delay and replace replies (so
// that go-redis re-sends), while connections are cut (CutAll, CLIENT KILL)
// and short TTLs expire mid-run. Each history is recorded with
// lincheck.Do, ambiguous operations included as unknown outcomes, and
// checked with porcupine against the primitive's model in
// tests/lincheck. TestLeaderHistories runs electors that resign and
// campaign again under the same faults and checks that every fencing
// token goes to one term only and that later terms carry larger tokens. TestSoak runs a mixed workload of every primitive
// for a while under faults and checks the models, goroutines, heap and the
// keys left behind.
//
// COORD_HISTORIES (histories with faults per primitive and backend, 40 by
// default) and COORD_SOAK (a Go duration, 10s by default) size the runs;
// make test-long runs a longer campaign.
package history
