package logstore

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// allocated is the disk space a file holds (blocks, including blocks
// preallocated beyond its size).
func allocated(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Blocks * 512
}

// A new segment reserves minPrealloc of disk, not SegmentBytes: a node with
// thousands of idle buckets must not reserve a segment, or even a MiB, for
// each. The reservation follows the writes, at most preallocStep ahead.
func TestSegmentPreallocationFollowsWrites(t *testing.T) {
	dir := t.TempDir()
	s := NewSyncer(nil)
	defer s.Close()
	l, err := Open(Options{Dir: dir, OffsetFunc: testOffsets, Syncer: s, SegmentBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	g := &gen{}
	mustStore(t, l, g.batch(1, 100))
	seg := filepath.Join(dir, segmentStem(1)+".log")
	// Twice the reservation: room for a filesystem's own blocks.
	if got := allocated(t, seg); got > 2*minPrealloc {
		t.Fatalf("a new segment holds %d bytes of disk, want at most %d", got, 2*minPrealloc)
	}
	for range 30 {
		mustStore(t, l, g.batch(20, 8000)) // ~5 MB in all
	}
	fi, _ := os.Stat(seg)
	got := allocated(t, seg)
	if limit := fi.Size() + preallocStep + minPrealloc; got < fi.Size() || got > limit {
		t.Fatalf("segment of %d bytes holds %d bytes of disk, want between its size and %d", fi.Size(), got, limit)
	}
}
