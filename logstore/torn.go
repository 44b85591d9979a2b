package logstore

import (
	"fmt"
	"io"
)

// Telling a torn tail from a damaged log.
//
// A crash can leave the last segment ending in a frame that is short or
// fails its checks: the tail of writes that were never synced, so never
// acknowledged. Open truncates it. But a frame can also fail its CRC
// because the disk changed bytes the log synced long ago; truncating there
// would throw away every acknowledged entry after it, silently. The two
// look alike at the bad frame; they differ in what comes after it:
//
//   - if no valid frame follows, only the end of the file is lost:
//     truncate (a damaged last frame cannot be told from a torn one);
//   - if valid frames follow, the bad region was written and then
//     overwritten or lost. A crash leaves that only where blocks of an
//     unsynced write never reached the disk, and such blocks read back as
//     zeros (unwritten or preallocated extents): truncate when the region
//     holds an all-zero, sector-aligned 512 bytes (as etcd's WAL decides);
//   - otherwise the segment is damaged: Open fails with a CorruptionError
//     that says where, and leaves the file as it is.

// sectorSize is the unit a disk writes atomically (the smallest there is).
const sectorSize = 512

// damagedNotTorn returns a *CorruptionError when the invalid frame at pos
// (cause) of the last segment s, whose file ends at end, is followed by a
// valid frame and the bytes between hold no zero sector; nil when it may
// be truncated as a torn tail.
func damagedNotTorn(s *segment, pos, end int64, cause error) error {
	next, idx, err := validFrameAfter(s.f, pos, end, s.last+1)
	if err != nil {
		return fmt.Errorf("logstore: read %s: %w", s.name(), err)
	}
	if next < 0 {
		return nil
	}
	zero, err := hasZeroSector(s.f, pos, next)
	if err != nil {
		return fmt.Errorf("logstore: read %s: %w", s.name(), err)
	}
	if zero {
		return nil
	}
	return &CorruptionError{Segment: s.name(), Offset: pos, Reason: fmt.Sprintf(
		"%v, but a valid frame (raft index %d) follows at byte %d: the segment is damaged, not torn by a crash, so it is left as it is; "+
			"restore the replica from another copy, or, to give up every entry from byte %d on, truncate the file to %d bytes and restart",
		cause, idx, next, pos, pos)}
}

// validFrameAfter returns the position and raft index of the first valid
// frame that starts in (pos, end) with a raft index above bad (the index
// the invalid frame should have had), or -1.
func validFrameAfter(f io.ReaderAt, pos, end int64, bad uint64) (int64, uint64, error) {
	const window = 1 << 20
	buf := make([]byte, window+frameHeaderLen)
	var m frameMeta
	for w := pos + 1; w+frameHeaderLen <= end; w += window {
		n := min(int64(len(buf)), end-w)
		if _, err := f.ReadAt(buf[:n], w); err != nil && err != io.EOF {
			return -1, 0, err
		}
		for i := int64(0); i < min(window, n-frameHeaderLen+1); i++ {
			b := buf[i:n]
			if b[8] != frameVersion || decodeFrameHeader(b, &m) != nil || m.index <= bad || w+i+m.size() > end {
				continue
			}
			frame := make([]byte, m.size())
			if _, err := f.ReadAt(frame, w+i); err != nil && err != io.EOF {
				return -1, 0, err
			}
			if _, _, err := decodeFrame(frame, &m); err == nil {
				return w + i, m.index, nil
			}
		}
	}
	return -1, 0, nil
}

// hasZeroSector reports whether [from, to) holds a sector-aligned run of
// sectorSize zero bytes.
func hasZeroSector(f io.ReaderAt, from, to int64) (bool, error) {
	first := (from + sectorSize - 1) / sectorSize * sectorSize
	buf := make([]byte, 256*sectorSize)
	for at := first; at+sectorSize <= to; at += int64(len(buf)) {
		n := min(int64(len(buf)), (to-at)/sectorSize*sectorSize)
		if _, err := f.ReadAt(buf[:n], at); err != nil && err != io.EOF {
			return false, err
		}
		for s := int64(0); s < n; s += sectorSize {
			if allZero(buf[s : s+sectorSize]) {
				return true, nil
			}
		}
	}
	return false, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
