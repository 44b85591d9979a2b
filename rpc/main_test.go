package rpc_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no handler goroutine (Scan's per-bucket readers,
// Append's per-bucket writers) outlives the tests. Idle keep-alive
// connections of HTTP clients are not handler goroutines.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreAnyFunction("net/http.(*http2ClientConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*http2clientConnReadLoop).run"),
	)
}
