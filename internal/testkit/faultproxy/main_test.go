package faultproxy_test

import (
	"testing"

	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// TestMain stops the shared servers after the tests and fails the run if a
// goroutine leaked (a proxy not closed, a connection not torn down).
func TestMain(m *testing.M) { testharness.Main(m) }
