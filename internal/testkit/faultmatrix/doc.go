// Package faultmatrix holds the library's fault matrix (it has no code of
// its own): every primitive under every fault of the reliability campaign,
// each cell a test on dedicated real servers that asserts the effect the
// package docs name. The faults are a connection cut while the command is
// on its way, a reply delayed past the context deadline, a reply lost and
// re-sent by go-redis, a server restart without persistence, SCRIPT FLUSH,
// CLIENT PAUSE WRITE, maxmemory with noeviction, and eviction under a
// volatile-* policy.
//
// The matrix is also a table in docs/faults.md ("Faults: what each
// primitive does"), generated from the test's cells: `go test -run
// TestREADMEFaultMatrix ./internal/testkit/faultmatrix/` prints the expected
// table when it differs.
//
// The cells run on one server flavor: COORD_MATRIX_FLAVOR (default redis8,
// which has the hash-field expiration the field leases need), or "all" for
// every flavor (hash-field leases then only where the server has it).
package faultmatrix
