package logstore

import (
	"fmt"
	"io"
	"math"
	"sort"
)

// ClosedSegment describes a segment that takes no more appends, for
// copying it elsewhere (tiering). Its bytes are [0, Size) of Data.
type ClosedSegment struct {
	Base, Last  uint64 // raft indexes of its first and last frame
	FirstOffset int64  // data offset at its start
	NextOffset  int64  // data offset after its last frame
	MaxTs       int64  // newest record timestamp; math.MinInt64 if it holds no records
	Size        int64
	// Data reads the segment file. Reads fail once the segment is
	// deleted (retention, tiering); a copy then starts over later.
	Data io.ReaderAt
}

// ClosedSegments lists the segments before the active one, oldest first.
func (l *Log) ClosedSegments() []ClosedSegment {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed || len(l.segs) < 2 {
		return nil
	}
	out := make([]ClosedSegment, 0, len(l.segs)-1)
	for _, s := range l.segs[:len(l.segs)-1] {
		out = append(out, ClosedSegment{
			Base: s.base, Last: s.last, FirstOffset: s.firstOffset, NextOffset: s.nextOffset,
			MaxTs: s.maxTs, Size: s.size, Data: s.f,
		})
	}
	return out
}

// Covered returns the last raft index of the newest closed segment that
// DeleteCovered(upTo, keep, index) may delete — the raft snapshot the
// deletion must not pass — or 0 when none may be.
func (l *Log) Covered(upTo int64, keep int) uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if n := l.coveredLocked(upTo, keep); n > 0 {
		return l.segs[n-1].last
	}
	return 0
}

// coveredLocked is how many segments, oldest first, lie wholly below upTo
// with at least keep closed segments after them.
func (l *Log) coveredLocked(upTo int64, keep int) int {
	n := 0
	for n < len(l.segs)-1-keep && l.segs[n].nextOffset <= upTo {
		n++
	}
	return n
}

// DeleteCovered deletes closed segments, oldest first, whose data lies
// wholly below upTo (it is stored elsewhere: tiered) and whose last raft
// index is <= maxIndex (the last raft snapshot), keeping the newest keep
// closed segments and the active one. It returns how many it deleted;
// FirstIndex and StartOffset move past them.
func (l *Log) DeleteCovered(upTo int64, keep int, maxIndex uint64) (int, error) {
	return l.deleteHead(func() int {
		n := l.coveredLocked(upTo, keep)
		for n > 0 && l.segs[n-1].last > maxIndex {
			n--
		}
		return n
	})
}

// SegmentFile is a read-only copy of a segment file (FORMAT.md), such as
// one tiered to remote storage. OpenSegmentFile checks every frame, so a
// damaged copy is refused whole rather than read in part.
type SegmentFile struct {
	seg segment
	r   io.ReaderAt
}

// OpenSegmentFile scans the size bytes of r as a segment file and builds
// its sparse indexes in memory. An empty file is an error: a tiered
// segment always holds frames.
func OpenSegmentFile(r io.ReaderAt, size int64) (*SegmentFile, error) {
	if size <= 0 {
		return nil, fmt.Errorf("logstore: segment file of %d bytes", size)
	}
	sf := &SegmentFile{r: r}
	fr := readerPool.Get().(*frameReader)
	defer readerPool.Put(fr)
	fr.reset(r, 0, size)
	var m frameMeta
	for first := true; ; first = false {
		pos, _, _, err := fr.next(&m)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("logstore: segment file at byte %d: %w", pos, err)
		}
		if m.hasRecords() && m.count <= 0 {
			return nil, fmt.Errorf("logstore: segment file at byte %d: frame of %d records", pos, m.count)
		}
		if first {
			sf.seg.base = m.index
			sf.seg.resetState(m.offset)
		} else if m.index != sf.seg.last+1 || m.offset != sf.seg.nextOffset {
			return nil, fmt.Errorf("logstore: segment file at byte %d: frame of index %d and offset %d follows index %d and offset %d",
				pos, m.index, m.offset, sf.seg.last, sf.seg.nextOffset)
		}
		sf.seg.observe(&m, pos, 4096)
	}
	sf.seg.sealTimeIndex()
	return sf, nil
}

// FirstOffset is the data offset at the start of the file.
func (f *SegmentFile) FirstOffset() int64 { return f.seg.firstOffset }

// NextOffset is the data offset after its last frame.
func (f *SegmentFile) NextOffset() int64 { return f.seg.nextOffset }

// MaxTs is its newest record timestamp, math.MinInt64 if it holds none.
func (f *SegmentFile) MaxTs() int64 { return f.seg.maxTs }

// Read is Log.Read over the file: it visits, in order, the frames holding
// records that overlap [offset, endOffset), stopping when fn returns false
// or before a frame that would take the data visited past maxBytes (the
// first is always visited). data is valid only until fn returns.
func (f *SegmentFile) Read(offset, endOffset int64, maxBytes int, fn func(index uint64, base int64, count int32, data []byte) bool) error {
	if offset < f.seg.firstOffset || offset > f.seg.nextOffset {
		return fmt.Errorf("logstore: read at offset %d, segment file holds [%d, %d): %w", offset, f.seg.firstOffset, f.seg.nextOffset, ErrOffsetOutOfRange)
	}
	r := readerPool.Get().(*frameReader)
	defer readerPool.Put(r)
	r.reset(f.r, int64(f.seg.index[f.seg.idxForOffset(offset)].pos), f.seg.size)
	visited, bytes := 0, 0
	var m frameMeta
	for {
		_, _, data, err := r.next(&m)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("logstore: segment file: %w", err)
		}
		if !m.hasRecords() || m.nextOffset() <= offset {
			continue
		}
		if m.offset >= endOffset || (visited > 0 && bytes+len(data) > maxBytes) {
			return nil
		}
		visited++
		bytes += len(data)
		if !fn(m.index, m.offset, m.count, data) {
			return nil
		}
	}
}

// OffsetForTimestamp returns the first data offset of the first frame
// whose newest record timestamp is >= tsMs, and true; or false when no
// frame of the file is that new.
func (f *SegmentFile) OffsetForTimestamp(tsMs int64) (int64, bool) {
	if f.seg.maxTs < tsMs || f.seg.maxTs == math.MinInt64 {
		return 0, false
	}
	var start int64
	if k := sort.Search(len(f.seg.tindex), func(i int) bool { return f.seg.tindex[i].ts >= tsMs }); k > 0 {
		start = int64(f.seg.index[f.seg.idxForOffset(f.seg.tindex[k-1].offset)].pos)
	}
	r := readerPool.Get().(*frameReader)
	defer readerPool.Put(r)
	r.reset(f.r, start, f.seg.size)
	var m frameMeta
	for {
		if _, _, _, err := r.next(&m); err != nil {
			return 0, false
		}
		if m.hasRecords() && m.maxTs >= tsMs {
			return m.offset, true
		}
	}
}
