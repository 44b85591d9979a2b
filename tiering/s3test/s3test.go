// Package s3test serves an in-memory S3 for tests of tiering's S3 store
// (johannesboyne/gofakes3): no S3 server or network is needed.
package s3test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Serve serves an in-memory S3 with one bucket, bucket, on 127.0.0.1 until
// the test ends, sets credentials in the test's environment, and returns
// the endpoint (host:port, plain HTTP).
func Serve(t testing.TB, bucket string) string {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket(bucket); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	return strings.TrimPrefix(srv.URL, "http://")
}
