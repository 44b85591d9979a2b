// Package integration holds tests that build the fluss-node binary once and
// run it as real processes on loopback ports chosen by the kernel: bad input
// over Connect JSON (exact codes, data unchanged), the README's curl and CLI
// examples verbatim, every CLI command end to end, restarts after SIGTERM and
// kill -9 (catalog, data and node id survive; no acknowledged write is lost
// or duplicated), and the Arrow path with the Go client.
//
// Invariants of the tests: every wait polls with a deadline (waitFor, bounded
// contexts); no assertion depends on how long something took; every process
// a test starts is killed in t.Cleanup. They need only Go; `go test -short`
// skips them all. $FLUSS_TEST_KILLS sets how many kill -9s the fault tests
// run (default 4), for longer soaks.
package integration
