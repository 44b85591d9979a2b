package logstore

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// framePositions lists where the frames of a segment's bytes start.
func framePositions(t *testing.T, data []byte) []int64 {
	t.Helper()
	var out []int64
	var m frameMeta
	for p := int64(0); p < int64(len(data)); p += m.size() {
		if _, _, err := decodeFrame(data[p:], &m); err != nil {
			t.Fatalf("frame at %d: %v", p, err)
		}
		out = append(out, p)
	}
	return out
}

// tornEnv stores 40 entries of ~300 bytes in one segment and returns the
// environment, the entries, the segment's path and bytes.
func tornEnv(t *testing.T) (*env, []int64, string, []byte) {
	e := newEnv(t)
	e.opts.SegmentBytes = 1 << 20
	l := e.open()
	mustStore(t, l, (&gen{}).batch(40, 300))
	l.Close()
	seg := filepath.Join("/d", segmentStem(1)+".log")
	data, _ := e.fs.ReadFile(seg)
	return e, framePositions(t, data), seg, data
}

// A frame that fails its checks in the middle of the last segment, with
// valid frames after it and no sign of an unfinished write, is damage, not
// a torn tail: Open refuses, names the spot, and leaves the file alone.
func TestDamagedLastSegmentIsNotTruncated(t *testing.T) {
	for _, tc := range []struct {
		name  string
		frame int // which frame to damage
		at    int64
	}{
		{"data byte", 20, 100},
		{"crc", 20, 5},
		{"length", 20, 1}, // the frame's length no longer points at the next one
		{"version", 5, 8},
		{"second to last frame", 38, 80},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, pos, seg, data := tornEnv(t)
			bad := append([]byte(nil), data...)
			bad[pos[tc.frame]+tc.at] ^= 0x40
			e.fs.WriteFile(seg, bad)
			o := e.opts
			o.FS = e.fs
			l, err := Open(o)
			var ce *CorruptionError
			if !errors.As(err, &ce) || ce.Offset != pos[tc.frame] {
				if l != nil {
					l.Close()
				}
				t.Fatalf("Open = %v, want a CorruptionError at byte %d", err, pos[tc.frame])
			}
			if want := fmt.Sprintf("truncate the file to %d bytes", pos[tc.frame]); !strings.Contains(ce.Reason, want) {
				t.Errorf("reason %q does not say %q", ce.Reason, want)
			}
			if after, _ := e.fs.ReadFile(seg); string(after) != string(bad) {
				t.Fatalf("the damaged segment was changed (%d bytes, was %d)", len(after), len(bad))
			}
		})
	}
}

// An unsynced write of which some sectors never reached the disk reads
// back with zeros in it, possibly before sectors that did: that is a torn
// tail, truncated at the first bad frame, even with valid frames after.
func TestTornWriteWithZeroSectorsIsTruncated(t *testing.T) {
	e, pos, seg, data := tornEnv(t)
	const first = 30 // frames 30.. were one write the crash cut
	torn := append([]byte(nil), data...)
	z := (pos[first] + 2*sectorSize - 1) / sectorSize * sectorSize // a sector inside frame 30 or 31
	clear(torn[z : z+sectorSize])
	e.fs.WriteFile(seg, torn)
	broken := 0
	for broken = range pos {
		var m frameMeta
		if _, _, err := decodeFrame(torn[pos[broken]:], &m); err != nil {
			break
		}
	}
	if broken < first || broken >= len(pos)-2 {
		t.Fatalf("setup: frame %d broken, want one of %d..%d", broken, first, len(pos)-3)
	}
	l := e.open()
	defer l.Close()
	checkRange(t, l, 1, uint64(broken))
	if after, _ := e.fs.ReadFile(seg); int64(len(after)) != pos[broken] {
		t.Fatalf("segment is %d bytes after open, want it cut to %d", len(after), pos[broken])
	}
}

// Garbage at the end with nothing valid after it is still a torn tail.
func TestDamagedLastFrameIsTruncated(t *testing.T) {
	e, pos, seg, data := tornEnv(t)
	bad := append([]byte(nil), data...)
	bad[pos[len(pos)-1]+20] ^= 0x40 // its term: the CRC fails
	e.fs.WriteFile(seg, bad)
	l := e.open()
	defer l.Close()
	checkRange(t, l, 1, uint64(len(pos)-1))
}

func TestValidFrameAfter(t *testing.T) {
	_, pos, _, data := tornEnv(t)
	r := memReader(data)
	for _, tc := range []struct {
		from    int64
		bad     uint64
		want    int64
		wantIdx uint64
	}{
		{pos[3], 4, pos[4], 5},     // the next frame
		{pos[3] + 1, 4, pos[4], 5}, // from inside a frame
		{pos[3], 10, pos[10], 11},  // frames at or below bad do not count
		{pos[39], 40, -1, 0},       // nothing after the last
	} {
		got, idx, err := validFrameAfter(r, tc.from, int64(len(data)), tc.bad)
		if err != nil || got != tc.want || idx != tc.wantIdx {
			t.Errorf("validFrameAfter(%d, bad %d) = %d, %d, %v; want %d, %d", tc.from, tc.bad, got, idx, err, tc.want, tc.wantIdx)
		}
	}
}

func TestHasZeroSector(t *testing.T) {
	b := make([]byte, 4*sectorSize)
	for i := range b {
		b[i] = 1
	}
	clear(b[sectorSize+10 : 3*sectorSize-10]) // zeros, but no whole aligned sector
	r := memReader(b)
	if z, err := hasZeroSector(r, 0, int64(len(b))); err != nil || z {
		t.Fatalf("no aligned zero sector: got %v, %v", z, err)
	}
	clear(b[2*sectorSize : 3*sectorSize])
	for _, tc := range []struct {
		from, to int64
		want     bool
	}{
		{0, int64(len(b)), true},
		{2 * sectorSize, 3 * sectorSize, true},
		{2*sectorSize + 1, int64(len(b)), false}, // the sector starts before from
		{0, 3*sectorSize - 1, false},             // and ends after to
	} {
		if z, err := hasZeroSector(r, tc.from, tc.to); err != nil || z != tc.want {
			t.Errorf("hasZeroSector(%d, %d) = %v, %v; want %v", tc.from, tc.to, z, err, tc.want)
		}
	}
}

type memReader []byte

func (m memReader) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(m)) {
		return 0, fmt.Errorf("read at %d past %d", off, len(m))
	}
	n := copy(p, m[off:])
	if n < len(p) {
		return n, fmt.Errorf("short read at %d", off)
	}
	return n, nil
}
