package tiering

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/fluss-node/fluss-node/tiering/s3test"
)

func TestS3Store(t *testing.T) {
	endpoint := s3test.Serve(t, "fluss")
	cache := t.TempDir()
	s, err := NewS3Store(S3Config{Endpoint: endpoint, Bucket: "fluss", Prefix: "cluster-a/", Insecure: true}, cache)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	testStore(t, s)
	// Downloads are gone once their objects are closed.
	if ents, _ := os.ReadDir(cache); len(ents) != 0 {
		t.Fatalf("cache holds %d files after every object was closed", len(ents))
	}
	// Another prefix is another store.
	other, err := NewS3Store(S3Config{Endpoint: endpoint, Bucket: "fluss", Prefix: "cluster-b", Insecure: true}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if names, err := other.List("t1/p0/b0"); err != nil || len(names) != 0 {
		t.Fatalf("another prefix lists %v, %v", names, err)
	}
	missing, err := NewS3Store(S3Config{Endpoint: endpoint, Bucket: "missing", Insecure: true}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := missing.Check(context.Background()); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("Check of a missing bucket: %v", err)
	}
	for _, bad := range []string{"/abs", "a/../b", "a//b"} {
		if _, err := NewS3Store(S3Config{Endpoint: endpoint, Bucket: "fluss", Prefix: bad, Insecure: true}, t.TempDir()); err == nil {
			t.Fatalf("prefix %q accepted", bad)
		}
	}
}

// TestRemoteLogOnS3 uploads a log's closed segments to S3 and reads every
// offset back as the local log reads it.
func TestRemoteLogOnS3(t *testing.T) {
	s, err := NewS3Store(S3Config{Endpoint: s3test.Serve(t, "fluss"), Bucket: "fluss", Insecure: true}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l := fillLog(t, 120)
	rl := NewRemoteLog(s, BucketDir(1, 0, 0))
	defer rl.Close()
	for _, c := range l.ClosedSegments() {
		if _, err := rl.Upload(c); err != nil {
			t.Fatal(err)
		}
	}
	reader := NewRemoteLog(s, BucketDir(1, 0, 0))
	defer reader.Close()
	if err := reader.Refresh(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(reader.Segments(), rl.Segments()) {
		t.Fatalf("S3 lists %v, the uploader knows %v", reader.Segments(), rl.Segments())
	}
	_, end := reader.Range()
	want := readLocal(t, l, 0, end)
	for from := int64(0); from < end; from += 3 {
		if got := readRemote(t, reader, from, end); !slices.Equal(got, want[from/3:]) {
			t.Fatalf("S3 read from %d differs from the local one", from)
		}
	}
}
