package logstore

import (
	"bytes"
	"errors"
	"io"
	"math"
	"testing"
)

// copySegment reads a closed segment's bytes as a tiering upload does.
func copySegment(t *testing.T, c ClosedSegment) []byte {
	t.Helper()
	b, err := io.ReadAll(io.NewSectionReader(c.Data, 0, c.Size))
	if err != nil {
		t.Fatalf("read segment %d: %v", c.Base, err)
	}
	return b
}

// filled opens a log of newEnv (4 KiB segments) holding batches batches
// of gen's entries, closed when the test ends.
func filled(t *testing.T, batches int) (*env, *Log) {
	t.Helper()
	e := newEnv(t)
	l := e.open()
	t.Cleanup(func() { l.Close() })
	g := &gen{}
	for range batches {
		mustStore(t, l, g.batch(10, 120))
	}
	return e, l
}

// TestSegmentCopiesReadAsTheLog copies every closed segment, opens each
// copy as a SegmentFile and checks that it reads exactly what the log
// reads over the same offsets, at every starting offset.
func TestSegmentCopiesReadAsTheLog(t *testing.T) {
	_, l := filled(t, 20)
	closed := l.ClosedSegments()
	if len(closed) < 3 || len(closed) != len(l.segs)-1 {
		t.Fatalf("%d closed segments of %d", len(closed), len(l.segs))
	}
	for i, c := range closed {
		if i > 0 && c.FirstOffset != closed[i-1].NextOffset {
			t.Fatalf("segment %d starts at %d, the one before ends at %d", i, c.FirstOffset, closed[i-1].NextOffset)
		}
		f, err := OpenSegmentFile(bytes.NewReader(copySegment(t, c)), c.Size)
		if err != nil {
			t.Fatalf("OpenSegmentFile(segment %d): %v", c.Base, err)
		}
		if f.FirstOffset() != c.FirstOffset || f.NextOffset() != c.NextOffset || f.MaxTs() != c.MaxTs {
			t.Fatalf("copy of segment %d: [%d, %d) ts %d; log says [%d, %d) ts %d", c.Base,
				f.FirstOffset(), f.NextOffset(), f.MaxTs(), c.FirstOffset, c.NextOffset, c.MaxTs)
		}
		for off := c.FirstOffset; off < c.NextOffset; off++ {
			got := visitAll(t, f.Read, off, c.NextOffset, 1<<20)
			want := readAll_(t, l, off, c.NextOffset, 1<<20)
			if len(got) == 0 || len(got) != len(want) {
				t.Fatalf("from %d: copy visits %v, log %v", off, got, want)
			}
			for k := range got {
				if got[k] != want[k] {
					t.Fatalf("from %d: visit %d is %v in the copy, %v in the log", off, k, got[k], want[k])
				}
			}
		}
		if v := visitAll(t, f.Read, c.FirstOffset, c.NextOffset, 1); len(v) != 1 {
			t.Fatalf("maxBytes 1 visited %d entries, want 1", len(v))
		}
		if err := f.Read(c.NextOffset+1, c.NextOffset+2, 1, func(uint64, int64, int32, []byte) bool { return true }); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("read past the copy = %v, want ErrOffsetOutOfRange", err)
		}
		for _, ts := range []int64{0, c.MaxTs, c.MaxTs + 1} {
			wantOff, wantOK := l.OffsetForTimestamp(ts)
			gotOff, gotOK := f.OffsetForTimestamp(ts)
			if wantOff >= c.NextOffset {
				wantOK = false // a later segment's
			}
			if gotOK != wantOK || (gotOK && gotOff != max(wantOff, c.FirstOffset)) {
				t.Fatalf("OffsetForTimestamp(%d) = %d, %v in the copy; log %d, %v", ts, gotOff, gotOK, wantOff, wantOK)
			}
		}
	}
}

// TestOpenSegmentFileRefusesDamage: a copy cut short or with a byte flipped
// anywhere is refused whole.
func TestOpenSegmentFileRefusesDamage(t *testing.T) {
	_, l := filled(t, 8)
	c := l.ClosedSegments()[0]
	good := copySegment(t, c)
	if _, err := OpenSegmentFile(bytes.NewReader(good), int64(len(good))); err != nil {
		t.Fatalf("intact copy: %v", err)
	}
	for _, cut := range []int{0, 1, frameHeaderLen, len(good) / 2, len(good) - 1} {
		if _, err := OpenSegmentFile(bytes.NewReader(good[:cut]), int64(cut)); err == nil {
			t.Fatalf("copy cut to %d of %d bytes opened", cut, len(good))
		}
	}
	for i := range good {
		bad := bytes.Clone(good)
		bad[i] ^= 0x40
		if _, err := OpenSegmentFile(bytes.NewReader(bad), int64(len(bad))); err == nil {
			t.Fatalf("copy with byte %d of %d flipped opened", i, len(good))
		}
	}
	// Two segments' bytes glued together skip the frames between them.
	second := copySegment(t, l.ClosedSegments()[2])
	glued := append(bytes.Clone(good), second...)
	if _, err := OpenSegmentFile(bytes.NewReader(glued), int64(len(glued))); err == nil {
		t.Fatal("segments 0 and 2 glued together opened")
	}
}

func TestDeleteCovered(t *testing.T) {
	e, l := filled(t, 20)
	closed := l.ClosedSegments()
	if len(closed) < 5 {
		t.Fatalf("%d closed segments, want at least 5", len(closed))
	}
	upTo := closed[3].NextOffset // segments 0..3 are stored elsewhere
	// With 2 closed segments kept, the first min(4, len-2) may go.
	if got, want := l.Covered(upTo, 2), closed[min(4, len(closed)-2)-1].Last; got != want {
		t.Fatalf("Covered = %d, want %d", got, want)
	}
	if got := l.Covered(closed[0].NextOffset-1, 0); got != 0 {
		t.Fatalf("Covered below the first segment's end = %d, want 0", got)
	}
	// The raft snapshot bound stops it after segment 1.
	if n, err := l.DeleteCovered(upTo, 0, closed[1].Last); err != nil || n != 2 {
		t.Fatalf("DeleteCovered = %d, %v; want 2", n, err)
	}
	if l.StartOffset() != closed[2].FirstOffset {
		t.Fatalf("StartOffset = %d, want %d", l.StartOffset(), closed[2].FirstOffset)
	}
	// keep: the newest len(closed)-3 closed segments stay, so only segment 2 goes.
	if n, err := l.DeleteCovered(upTo, len(closed)-3, math.MaxUint64); err != nil || n != 1 {
		t.Fatalf("DeleteCovered with keep = %d, %v; want 1", n, err)
	}
	if n, err := l.DeleteCovered(upTo, 0, math.MaxUint64); err != nil || n != 1 {
		t.Fatalf("DeleteCovered = %d, %v; want 1 (segment 3)", n, err)
	}
	if n, err := l.DeleteCovered(upTo, 0, math.MaxUint64); err != nil || n != 0 {
		t.Fatalf("DeleteCovered with nothing covered = %d, %v", n, err)
	}
	// Never the active segment, whatever upTo says.
	closedNow := len(l.segs) - 1
	if n, err := l.DeleteCovered(math.MaxInt64, 0, math.MaxUint64); err != nil || n != closedNow {
		t.Fatalf("DeleteCovered(all) = %d, %v; want %d", n, err, closedNow)
	}
	if len(l.segs) != 1 || l.StartOffset() != l.segs[0].firstOffset {
		t.Fatalf("%d segments left, start %d", len(l.segs), l.StartOffset())
	}
	// What is left reads, and survives reopening.
	next := l.NextOffset()
	start := l.StartOffset()
	if v := readAll_(t, l, start, next, 1<<30); len(v) == 0 {
		t.Fatal("nothing left to read")
	}
	l.Close()
	l = e.open()
	defer l.Close()
	if l.StartOffset() != start || l.NextOffset() != next {
		t.Fatalf("reopened: [%d, %d), want [%d, %d)", l.StartOffset(), l.NextOffset(), start, next)
	}
}
