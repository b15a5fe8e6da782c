// Package semaphore_test checks the histories of the semaphore package's scripts for
// linearizability (porcupine, with the models in this file's neighbour
// linearizability_test.go). It lives in the tests module so that porcupine
// stays out of the library's go.mod.
package semaphore_test

import (
	"testing"

	"github.com/coordkit/coordination/internal/testkit/testharness"
)

func TestMain(m *testing.M) { testharness.Main(m) }
