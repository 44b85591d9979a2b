package tiering

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/logstore"
)

func TestDirStore(t *testing.T) {
	root := t.TempDir()
	s, err := NewDirStore(root)
	if err != nil {
		t.Fatal(err)
	}
	testStore(t, s)
	// A Put in progress (or one a crash left behind) is not listed.
	if err := os.WriteFile(filepath.Join(root, "t1/p0/b0/c.log.123.tmp"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if names, err := s.List("t1/p0/b0"); err != nil || !slices.Equal(names, []string{"t1/p0/b0/b.log"}) {
		t.Fatalf("List with a temp file = %v, %v", names, err)
	}
}

// testStore checks what every Store promises. It leaves t1/p0/b0/b.log.
func testStore(t *testing.T, s Store) {
	t.Helper()
	if names, err := s.List("t1/p0/b0"); err != nil || len(names) != 0 {
		t.Fatalf("List of a missing dir = %v, %v", names, err)
	}
	for _, n := range []string{"t1/p0/b0/b.log", "t1/p0/b0/a.log", "t1/p0/b1/a.log", "t1/p0/b0x/a.log"} {
		data := "data of " + n
		if err := s.Put(n, strings.NewReader(data), int64(len(data))); err != nil {
			t.Fatalf("Put(%s): %v", n, err)
		}
	}
	names, err := s.List("t1/p0/b0")
	if err != nil || !slices.Equal(names, []string{"t1/p0/b0/a.log", "t1/p0/b0/b.log"}) {
		t.Fatalf("List = %v, %v", names, err)
	}
	o, err := s.Open("t1/p0/b0/a.log")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(io.NewSectionReader(o, 0, o.Size()))
	o.Close()
	if string(got) != "data of t1/p0/b0/a.log" {
		t.Fatalf("read back %q", got)
	}
	if err := s.Put("t1/p0/b0/a.log", strings.NewReader("replaced"), 8); err != nil {
		t.Fatal(err)
	}
	if o, err = s.Open("t1/p0/b0/a.log"); err != nil || o.Size() != int64(len("replaced")) {
		t.Fatalf("Open after replace: %v", err)
	}
	o.Close()
	if err := s.Delete("t1/p0/b0/a.log"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("t1/p0/b0/a.log"); err != nil {
		t.Fatalf("deleting a missing object: %v", err)
	}
	if _, err := s.Open("t1/p0/b0/a.log"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open of a deleted object = %v, want ErrNotExist", err)
	}
	for _, bad := range []string{"", "/etc/passwd", "../x", "a/../../x", "a//b", "a/./b"} {
		if err := s.Put(bad, strings.NewReader("x"), 1); err == nil {
			t.Fatalf("Put(%q) succeeded", bad)
		}
		if _, err := s.Open(bad); err == nil {
			t.Fatalf("Open(%q) succeeded", bad)
		}
	}
}

func TestSegmentNames(t *testing.T) {
	for _, c := range []struct{ first, next, ts int64 }{{0, 1, -9223372036854775808}, {5, 900, 1764583200000}, {1 << 40, 1<<40 + 1, 0}} {
		n := segmentName("d", c.first, c.next, c.ts)
		s, ok := parseSegmentName(baseName(n))
		if !ok || s.FirstOffset != c.first || s.NextOffset != c.next || s.MaxTs != c.ts {
			t.Fatalf("%s parsed as %+v, %v", n, s, ok)
		}
	}
	for _, bad := range []string{"x.log", "1-2_3.log", "00000000000000000005-00000000000000000005_1.log",
		"00000000000000000009-00000000000000000005_1.log", "00000000000000000001-00000000000000000005_+1.log",
		"00000000000000000001-00000000000000000005_01.log", "00000000000000000001-00000000000000000005_1.log.tmp"} {
		if s, ok := parseSegmentName(bad); ok {
			t.Fatalf("%q parsed as %+v", bad, s)
		}
	}
}

func baseName(n string) string { return n[strings.LastIndexByte(n, '/')+1:] }

func FuzzParseSegmentName(f *testing.F) {
	f.Add(baseName(segmentName("d", 3, 7, 11)))
	f.Add("00000000000000000001-00000000000000000005_-1.log")
	f.Fuzz(func(t *testing.T, name string) {
		s, ok := parseSegmentName(name)
		if !ok {
			return
		}
		if s.NextOffset <= s.FirstOffset || s.FirstOffset < 0 || baseName(segmentName("d", s.FirstOffset, s.NextOffset, s.MaxTs)) != name {
			t.Fatalf("%q parsed as %+v", name, s)
		}
	})
}

// Test entries: 3 records each, data = base(8) ts(8) payload; every 4th
// entry is a noop.
func offsets(l *raft.Log) (int64, int32, int64, bool) {
	if l.Type != raft.LogCommand {
		return 0, 0, 0, false
	}
	return int64(binary.LittleEndian.Uint64(l.Data)), 3, int64(binary.LittleEndian.Uint64(l.Data[8:])), true
}

// fillLog writes n entries of ~300 bytes into a log of 4 KiB segments and
// returns it; timestamps are 1000, 1010, ...
func fillLog(t *testing.T, n int) *logstore.Log {
	t.Helper()
	return fillLogSized(t, n, 4096)
}

// fillLogSized is fillLog with segments of segBytes: logs of the same
// entries that roll at other offsets, as two leaders' logs may.
func fillLogSized(t *testing.T, n int, segBytes int64) *logstore.Log {
	t.Helper()
	l, err := logstore.Open(logstore.Options{Dir: t.TempDir(), SegmentBytes: segBytes, IndexIntervalBytes: 512,
		OffsetFunc: offsets, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	next := int64(0)
	for i := 1; i <= n; i++ {
		e := &raft.Log{Index: uint64(i), Term: 1, Type: raft.LogNoop}
		if i%4 != 0 {
			d := binary.LittleEndian.AppendUint64(nil, uint64(next))
			d = binary.LittleEndian.AppendUint64(d, uint64(1000+10*i))
			d = append(d, bytes.Repeat([]byte{byte(i)}, 280)...)
			e = &raft.Log{Index: uint64(i), Term: 1, Type: raft.LogCommand, Data: d, AppendedAt: time.Unix(0, int64(i))}
			next += 3
		}
		if err := l.StoreLog(e); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

type read struct {
	base  int64
	count int32
	data  string
}

func readRemote(t *testing.T, rl *RemoteLog, from, end int64) []read {
	t.Helper()
	var out []read
	for from < end {
		n := len(out)
		err := rl.Read(from, end, 1<<20, func(_ uint64, base int64, count int32, data []byte) bool {
			out = append(out, read{base, count, string(data)})
			from = base + int64(count)
			return true
		})
		if err != nil {
			t.Fatalf("remote read at %d: %v", from, err)
		}
		if len(out) == n {
			t.Fatalf("remote read at %d visited nothing", from)
		}
	}
	return out
}

func readLocal(t *testing.T, l *logstore.Log, from, end int64) []read {
	t.Helper()
	var out []read
	if err := l.Read(from, end, 1<<30, func(_ uint64, base int64, count int32, data []byte) bool {
		out = append(out, read{base, count, string(data)})
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// dirRemoteLog is an empty remote log in a directory store (closed with the
// test), and the closed segments, at least min of them, of a local log of
// entries entries.
func dirRemoteLog(t *testing.T, entries, min int) (*RemoteLog, []logstore.ClosedSegment, *logstore.Log) {
	t.Helper()
	l := fillLog(t, entries)
	closed := l.ClosedSegments()
	if len(closed) < min {
		t.Fatalf("%d closed segments, want at least %d", len(closed), min)
	}
	store, err := NewDirStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rl := NewRemoteLog(store, BucketDir(7, 0, 2))
	t.Cleanup(rl.Close)
	return rl, closed, l
}

// TestRemoteLogUploadReadExpire uploads a log's closed segments, reads the
// remote log back against the local one, drops the local copies, and
// expires remote segments by timestamp.
func TestRemoteLogUploadReadExpire(t *testing.T) {
	rl, closed, l := dirRemoteLog(t, 120, 4)
	if err := rl.Refresh(); err != nil {
		t.Fatal(err)
	}
	if s, e := rl.Range(); s != 0 || e != 0 {
		t.Fatalf("empty remote log range [%d, %d)", s, e)
	}
	// Upload out of order: a gap, then filled.
	for _, i := range []int{0, 2, 1, 3} {
		if up, err := rl.Upload(closed[i]); err != nil || !up {
			t.Fatalf("Upload(segment %d) = %v, %v", i, up, err)
		}
		if i == 2 {
			if s, e := rl.Range(); s != 0 || e != closed[0].NextOffset {
				t.Fatalf("range with a gap = [%d, %d), want [0, %d)", s, e, closed[0].NextOffset)
			}
			if rl.Holds(closed[0].FirstOffset, closed[2].NextOffset) || !rl.Holds(closed[2].FirstOffset, closed[2].NextOffset) {
				t.Fatal("Holds wrong across the gap")
			}
		}
	}
	if up, err := rl.Upload(closed[1]); err != nil || up {
		t.Fatalf("second Upload of a held segment = %v, %v", up, err)
	}
	end := closed[3].NextOffset
	if s, e := rl.Range(); s != 0 || e != end {
		t.Fatalf("range = [%d, %d), want [0, %d)", s, e, end)
	}
	// A second reader lists what the first uploaded.
	other := NewRemoteLog(rl.store, rl.Dir())
	defer other.Close()
	if err := other.Refresh(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(other.Segments(), rl.Segments()) {
		t.Fatalf("listing %v, uploader knows %v", other.Segments(), rl.Segments())
	}
	want := readLocal(t, l, 0, end)
	for from := int64(0); from < end; from += 3 {
		got := readRemote(t, other, from, end)
		if !slices.Equal(got, want[from/3:]) {
			t.Fatalf("remote read from %d differs from the local one", from)
		}
	}
	if err := other.Read(end, end+3, 1, func(uint64, int64, int32, []byte) bool { return true }); !errors.Is(err, logstore.ErrOffsetOutOfRange) {
		t.Fatalf("read past the remote log = %v", err)
	}
	// Timestamps.
	if off, ok := other.OffsetForTimestamp(0); !ok || off != 0 {
		t.Fatalf("OffsetForTimestamp(0) = %d, %v", off, ok)
	}
	lo, lok := l.OffsetForTimestamp(closed[2].MaxTs)
	if off, ok := other.OffsetForTimestamp(closed[2].MaxTs); !ok || !lok || off != lo {
		t.Fatalf("OffsetForTimestamp = %d, %v; local %d, %v", off, ok, lo, lok)
	}
	// The local copies go; the data is still there, remotely.
	if n, err := l.DeleteCovered(end, 1, ^uint64(0)); err != nil || n != min(4, len(closed)-1) {
		t.Fatalf("DeleteCovered = %d, %v; want %d", n, err, min(4, len(closed)-1))
	}
	if l.StartOffset() > end {
		t.Fatalf("local log starts at %d, after the remote end %d", l.StartOffset(), end)
	}
	if got := readRemote(t, other, 0, end); !slices.Equal(got, want) {
		t.Fatal("remote read after dropping the local copies differs")
	}
	// Remote retention: segments 0 and 1 expire, but not past keepFrom.
	if n, err := rl.DeleteBefore(closed[1].MaxTs+1, closed[1].NextOffset-1); err != nil || n != 1 {
		t.Fatalf("DeleteBefore below an offset inside segment 1 = %d, %v; want 1", n, err)
	}
	if n, err := rl.DeleteBefore(closed[1].MaxTs+1, math.MaxInt64); err != nil || n != 1 {
		t.Fatalf("DeleteBefore = %d, %v; want 1", n, err)
	}
	if s, e := rl.Range(); s != closed[2].FirstOffset || e != end {
		t.Fatalf("range after expiry = [%d, %d)", s, e)
	}
	// The other reader's listing is stale: its read of an expired segment
	// says out of range, and a refresh catches up.
	other.Close()
	if err := other.Read(0, end, 1, func(uint64, int64, int32, []byte) bool { return true }); !errors.Is(err, logstore.ErrOffsetOutOfRange) {
		t.Fatalf("read of an expired segment = %v", err)
	}
	if err := other.Refresh(); err != nil {
		t.Fatal(err)
	}
	if s, _ := other.Range(); s != closed[2].FirstOffset {
		t.Fatalf("refreshed start %d", s)
	}
}

// TestRemoteLogRefusesDamage: a damaged local segment is not uploaded, and
// a damaged remote object is not read.
func TestRemoteLogRefusesDamage(t *testing.T) {
	l := fillLog(t, 60)
	c := l.ClosedSegments()[0]
	b, err := io.ReadAll(io.NewSectionReader(c.Data, 0, c.Size))
	if err != nil {
		t.Fatal(err)
	}
	store, err := NewDirStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rl := NewRemoteLog(store, "b")
	defer rl.Close()
	bad := bytes.Clone(b)
	bad[len(bad)/2] ^= 1
	damaged := c
	damaged.Data = bytes.NewReader(bad)
	if up, err := rl.Upload(damaged); err == nil || up {
		t.Fatalf("Upload of a damaged segment = %v, %v", up, err)
	}
	if names, _ := store.List("b"); len(names) != 0 {
		t.Fatalf("damaged upload left %v", names)
	}
	// Damage after upload.
	if _, err := rl.Upload(c); err != nil {
		t.Fatal(err)
	}
	name := rl.Segments()[0].Name
	if err := store.Put(name, bytes.NewReader(bad), int64(len(bad))); err != nil {
		t.Fatal(err)
	}
	if err := rl.Read(c.FirstOffset, c.NextOffset, 1<<20, func(uint64, int64, int32, []byte) bool { return true }); err == nil {
		t.Fatal("read of a damaged remote segment succeeded")
	}
}

// TestRemoteLogOverlappingSegments: two leaders whose logs hold the same
// entries but roll segments at other offsets upload into one remote log.
// Their segments overlap; the remote log reads every offset exactly as
// the local log does and its gap-free range spans both.
func TestRemoteLogOverlappingSegments(t *testing.T) {
	a, b := fillLogSized(t, 160, 4096), fillLogSized(t, 160, 7000)
	store, err := NewDirStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rl := NewRemoteLog(store, "b")
	defer rl.Close()
	ca, cb := a.ClosedSegments(), b.ClosedSegments()
	// Leader a uploads its first half, then leader b everything it has.
	for _, c := range ca[:len(ca)/2] {
		if _, err := rl.Upload(c); err != nil {
			t.Fatal(err)
		}
	}
	overlapping := 0
	for _, c := range cb {
		up, err := rl.Upload(c)
		if err != nil {
			t.Fatal(err)
		}
		if up && c.FirstOffset < ca[len(ca)/2-1].NextOffset {
			overlapping++
		}
	}
	if overlapping == 0 {
		t.Fatal("no uploaded segment overlaps another: the test does not test overlaps")
	}
	end := cb[len(cb)-1].NextOffset
	if s, e := rl.Range(); s != 0 || e != end {
		t.Fatalf("range = [%d, %d), want [0, %d)", s, e, end)
	}
	want := readLocal(t, a, 0, end)
	for from := int64(0); from < end; from += 3 {
		if got := readRemote(t, rl, from, end); !slices.Equal(got, want[from/3:]) {
			t.Fatalf("remote read from %d differs from the local one", from)
		}
	}
	if rl.HeldFrom(5) != end || rl.HeldFrom(end) != end {
		t.Fatalf("HeldFrom(5) = %d, HeldFrom(end) = %d; want %d", rl.HeldFrom(5), rl.HeldFrom(end), end)
	}
}

// TestRemoteLogKeepsRecentSegmentsOpen: readers at several places of one
// bucket keep their segments open (an object deleted behind the remote
// log's back still reads from its open file) up to openFiles; the least
// recently used is closed first.
func TestRemoteLogKeepsRecentSegmentsOpen(t *testing.T) {
	rl, closed, _ := dirRemoteLog(t, 160, openFiles+2)
	for _, c := range closed {
		if _, err := rl.Upload(c); err != nil {
			t.Fatal(err)
		}
	}
	readAt := func(off int64) error {
		return rl.Read(off, off+1, 1, func(uint64, int64, int32, []byte) bool { return true })
	}
	for _, c := range closed[:openFiles+1] {
		if err := readAt(c.FirstOffset); err != nil {
			t.Fatal(err)
		}
	}
	if len(rl.open) != openFiles {
		t.Fatalf("%d segment files open, want %d", len(rl.open), openFiles)
	}
	segs := rl.Segments()
	// Segment 1 is open (segment 0, the least recently used, was closed):
	// it reads after its object is gone; segment 0 does not.
	for _, i := range []int{0, 1} {
		if err := rl.store.Delete(segs[i].Name); err != nil {
			t.Fatal(err)
		}
	}
	if err := readAt(closed[1].FirstOffset); err != nil {
		t.Fatalf("read of an open segment whose object is gone: %v", err)
	}
	if err := readAt(closed[0].FirstOffset); !errors.Is(err, logstore.ErrOffsetOutOfRange) {
		t.Fatalf("read of a closed segment whose object is gone = %v, want ErrOffsetOutOfRange", err)
	}
	if rl.open[0].name != segs[1].Name {
		t.Fatalf("most recently used is %s, want %s", rl.open[0].name, segs[1].Name)
	}
	// Expiring a segment closes its file.
	if n, err := rl.DeleteBefore(closed[1].MaxTs+1, math.MaxInt64); err != nil || n != 2 {
		t.Fatalf("DeleteBefore = %d, %v", n, err)
	}
	for _, o := range rl.open {
		if o.name == segs[1].Name {
			t.Fatal("an expired segment's file stays open")
		}
	}
}
