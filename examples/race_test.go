//go:build race

package examples_test

// raceEnabled: the test binary runs with the race detector, so the copies
// are built with -race too (reusing the packages the test run compiled).
const raceEnabled = true
