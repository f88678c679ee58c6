//go:build race

package harness

// raceEnabled makes plugin builds match the test binary, so that a data race
// in a plugin fails the harness test that provoked it.
const raceEnabled = true
