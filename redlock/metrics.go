package redlock

import "github.com/coordkit/coordination/internal/instrument"

// Redlock's instruments, recorded by this package.
var (
	redlockAcquireLatency = instrument.New(instrument.Histogram, "coordination.redlock.acquire_latency", "s", "result",
		"Time of one Redlock acquisition round over every node, from the first request to the decision, by result (acquired, contended, failed).")
	redlockNodeFailures = instrument.New(instrument.Counter, "coordination.redlock.node_failures", "{failure}", "operation, reason",
		"Redlock node calls that failed, by group operation (acquire, refresh, verify, release, adopt, read, force release) and reason (timeout: no answer within the node timeout; error).")
)
