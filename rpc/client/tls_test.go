package client

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
)

// A server whose certificate the client does not trust is not retried: no
// attempt can pass, so the first error is the answer.
func TestUntrustedCertificateIsNotRetried(t *testing.T) {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	var dials atomic.Int32
	d := net.Dialer{Timeout: time.Second}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return d.DialContext(ctx, network, addr)
	}}}
	c := New(srv.URL, WithHTTPClient(hc), WithRetry(Retry{Attempts: 5, Base: time.Millisecond}))
	_, err := c.ListDatabases(context.Background())
	if connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("ListDatabases: %v, want unavailable", err)
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("%d connections for a certificate no retry can fix, want 1", n)
	}
}
