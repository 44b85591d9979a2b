// Package integration holds tests that build the fluss-node binary and run
// it as real processes on loopback: kill -9, restart, and check that no
// acknowledged write is lost or duplicated. They need only Go; `go test
// -short` skips them.
package integration
