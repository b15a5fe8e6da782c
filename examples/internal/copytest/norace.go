//go:build !race

package copytest

const raceEnabled = false
