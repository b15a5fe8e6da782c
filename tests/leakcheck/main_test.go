// Package leakcheck_test holds goleak-checked tests written as a user
// would write them for their own code: each snapshots the goroutines
// running (goleak.IgnoreCurrent), uses a primitive over a coordinator, shuts
// the coordinator down and closes its client, and then finds no goroutine
// left (goleak.VerifyNone). They live in the tests module so that goleak
// stays out of the library's go.mod. No test here is parallel: goleak sees
// every goroutine of the process.
package leakcheck_test

import (
	"testing"

	"github.com/coordkit/coordination/internal/testkit/testharness"
)

func TestMain(m *testing.M) { testharness.Main(m) }
