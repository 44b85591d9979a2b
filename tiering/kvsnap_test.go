package tiering

import (
	"bytes"
	"io"
	"slices"
	"testing"
)

func TestKVSnapshotNames(t *testing.T) {
	for _, c := range []struct {
		index uint64
		next  int64
	}{{1, 0}, {77, 1200}, {1 << 63, 1<<62 + 5}} {
		n := kvSnapshotName("d", c.index, c.next)
		s, ok := parseKVSnapshotName(baseName(n))
		if !ok || s.Index != c.index || s.NextOffset != c.next {
			t.Fatalf("%s parsed as %+v, %v", n, s, ok)
		}
	}
	for _, bad := range []string{"kv-1-2.snap", "kv-00000000000000000000-00000000000000000005.snap",
		"kv-00000000000000000001--0000000000000000005.snap", "kv-00000000000000000001-00000000000000000005.snap.tmp",
		"00000000000000000001-00000000000000000005_1.log", "kv-+0000000000000000001-00000000000000000005.snap"} {
		if s, ok := parseKVSnapshotName(bad); ok {
			t.Fatalf("%q parsed as %+v", bad, s)
		}
	}
}

func FuzzParseKVSnapshotName(f *testing.F) {
	f.Add(baseName(kvSnapshotName("d", 3, 7)))
	f.Add("kv-00000000000000000001-00000000000000000000.snap")
	f.Fuzz(func(t *testing.T, name string) {
		s, ok := parseKVSnapshotName(name)
		if !ok {
			return
		}
		if s.Index == 0 || s.NextOffset < 0 || baseName(kvSnapshotName("d", s.Index, s.NextOffset)) != name {
			t.Fatalf("%q parsed as %+v", name, s)
		}
	})
}

// TestKVSnapshotsInTheRemoteLog: KV snapshots sit next to the bucket's
// segments without being taken for segments, the two newest are kept,
// they read back byte for byte, and RestorePoint picks the newest from
// which the remote log runs to the end without a gap, else offset 0 when
// the remote log runs from there, else none.
func TestKVSnapshotsInTheRemoteLog(t *testing.T) {
	rl, closed, _ := dirRemoteLog(t, 120, 4)
	for _, i := range []int{1, 2, 3} { // not the first: nothing from offset 0
		if _, err := rl.Upload(closed[i]); err != nil {
			t.Fatal(err)
		}
	}
	body := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 100+i) }
	at := []int64{closed[0].FirstOffset, closed[1].FirstOffset, closed[2].FirstOffset, closed[3].NextOffset}
	for i, next := range at {
		if err := rl.PutKVSnapshot(uint64(10+i), next, bytes.NewReader(body(i)), int64(len(body(i)))); err != nil {
			t.Fatal(err)
		}
	}
	if err := rl.Refresh(); err != nil {
		t.Fatal(err)
	}
	if n := len(rl.Segments()); n != 3 {
		t.Fatalf("%d segments listed, want 3 (KV snapshots are no segments)", n)
	}
	snaps, err := rl.KVSnapshots()
	if err != nil {
		t.Fatal(err)
	}
	var idx []uint64
	for _, s := range snaps {
		idx = append(idx, s.Index)
	}
	if !slices.Equal(idx, []uint64{12, 13}) {
		t.Fatalf("kept KV snapshots %v, want the newest two [12 13]", idx)
	}
	rc, err := rl.OpenKVSnapshot(snaps[0])
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, body(2)) {
		t.Fatalf("KV snapshot read back %d bytes (%v), want %d", len(got), err, len(body(2)))
	}
	end := closed[3].NextOffset
	for _, c := range []struct {
		end   int64
		index uint64 // 0: none
		ok    bool
	}{
		{end, 13, true},                   // its next offset is the end itself
		{closed[3].FirstOffset, 12, true}, // 13 is past it; 12 and the log after it reach it
		{closed[2].FirstOffset, 12, true}, // exactly at 12
		{closed[1].FirstOffset, 0, false}, // before both, and the log does not run from 0
		{0, 0, true},                      // an empty bucket
	} {
		s, ok, err := rl.RestorePoint(c.end)
		if err != nil || ok != c.ok || s.Index != c.index {
			t.Fatalf("RestorePoint(%d) = %+v, %v, %v; want index %d, %v", c.end, s, ok, err, c.index, c.ok)
		}
	}
	if _, err := rl.Upload(closed[0]); err != nil {
		t.Fatal(err)
	}
	if s, ok, err := rl.RestorePoint(closed[1].FirstOffset); err != nil || !ok || s.Name != "" {
		t.Fatalf("RestorePoint before every snapshot with the whole log remote = %+v, %v, %v; want the empty state", s, ok, err)
	}
	if err := rl.DeleteKVSnapshots(); err != nil {
		t.Fatal(err)
	}
	if snaps, err := rl.KVSnapshots(); err != nil || len(snaps) != 0 {
		t.Fatalf("after DeleteKVSnapshots: %v, %v", snaps, err)
	}
}
