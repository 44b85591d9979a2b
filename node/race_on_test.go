//go:build race

package node

// raceEnabled: the test binary runs with the race detector.
const raceEnabled = true
