package redlock_test

import (
	"testing"

	"github.com/coordkit/coordination/internal/testharness"
)

func TestMain(m *testing.M) { testharness.Main(m) }
