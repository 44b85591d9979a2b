package logstore

import (
	"errors"
	"fmt"
	"io"
	"sort"
)

// Read visits, in order, the stored entries holding data that overlaps
// [offset, endOffset). endOffset is the caller's high watermark: entries
// at or past it are never visited. The first entry may start before
// offset. Read stops when fn returns false, or before an entry that would
// take the data visited past maxBytes (the first entry is always visited).
//
// data aliases a buffer of Read: it is valid only until fn returns, so fn
// copies what it keeps. fn runs with the log's read lock held and must not
// call methods of the Log.
//
// offset below StartOffset or above NextOffset returns ErrOffsetOutOfRange;
// offset == NextOffset visits nothing.
func (l *Log) Read(offset, endOffset int64, maxBytes int, fn func(index uint64, base int64, count int32, data []byte) bool) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return ErrClosed
	}
	if offset < l.startOffset || offset > l.nextOffset {
		return fmt.Errorf("logstore: read at offset %d, log holds [%d, %d): %w", offset, l.startOffset, l.nextOffset, ErrOffsetOutOfRange)
	}
	endOffset = min(endOffset, l.nextOffset)
	if offset >= endOffset {
		return nil
	}
	r := readerPool.Get().(*frameReader)
	defer readerPool.Put(r)
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].nextOffset > offset })
	visited, bytes := 0, 0
	var m frameMeta
	for first := true; i < len(l.segs); i, first = i+1, false {
		s := l.segs[i]
		var start int64
		if first {
			start = int64(s.index[s.idxForOffset(offset)].pos)
		}
		r.reset(s.f, start, s.size)
		for {
			pos, _, data, err := r.next(&m)
			if err == io.EOF {
				break
			}
			if err != nil {
				return readErr(s, pos, err)
			}
			if m.index < l.firstIndex || !m.hasRecords() || m.nextOffset() <= offset {
				continue
			}
			if m.offset >= endOffset {
				return nil
			}
			if visited > 0 && bytes+len(data) > maxBytes {
				return nil
			}
			visited++
			bytes += len(data)
			if !fn(m.index, m.offset, m.count, data) {
				return nil
			}
		}
	}
	return nil
}

func readErr(s *segment, pos int64, err error) error {
	var te *tailError
	if errors.As(err, &te) {
		return &CorruptionError{Segment: s.name(), Offset: te.pos, Reason: te.err.Error()}
	}
	return fmt.Errorf("logstore: read %s at %d: %w", s.name(), pos, err)
}

// OffsetForTimestamp returns the first data offset of the first entry
// whose newest record timestamp is >= tsMs, and true; or NextOffset and
// false when no stored entry is that new.
func (l *Log) OffsetForTimestamp(tsMs int64) (int64, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return 0, false
	}
	r := readerPool.Get().(*frameReader)
	defer readerPool.Put(r)
	var m frameMeta
	for _, s := range l.segs {
		if s.maxTs < tsMs {
			continue
		}
		var start int64
		// Frames up to the one of the last time entry below tsMs are older.
		if k := sort.Search(len(s.tindex), func(i int) bool { return s.tindex[i].ts >= tsMs }); k > 0 {
			start = int64(s.index[s.idxForOffset(s.tindex[k-1].offset)].pos)
		}
		r.reset(s.f, start, s.size)
		for {
			_, _, _, err := r.next(&m)
			if err != nil {
				break // corruption surfaces on Read; here: not found in s
			}
			if m.index >= l.firstIndex && m.hasRecords() && m.maxTs >= tsMs {
				return max(m.offset, l.startOffset), true
			}
		}
	}
	return l.nextOffset, false
}

// Expired returns the last raft index of the newest closed segment whose
// records are all older than cutoffMs — what DeleteBefore(cutoffMs, index)
// needs index to reach to delete every expired segment — or 0 when none is
// expired. It lets retention skip the raft snapshot (for a primary-key
// bucket: its whole KV state) when there is nothing to delete.
func (l *Log) Expired(cutoffMs int64) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var last uint64
	for i := 0; i < len(l.segs)-1 && l.segs[i].maxTs < cutoffMs; i++ {
		last = l.segs[i].last
	}
	return last
}

// DeleteBefore is retention: it deletes closed segments, oldest first,
// whose newest record timestamp is < cutoffMs and whose last raft index is
// <= maxIndex (the last raft snapshot). The active segment is never
// deleted. It returns how many segments were deleted; FirstIndex and
// StartOffset move past them.
func (l *Log) DeleteBefore(cutoffMs int64, maxIndex uint64) (int, error) {
	return l.deleteHead(func() int {
		n := 0
		for n < len(l.segs)-1 && l.segs[n].maxTs < cutoffMs && l.segs[n].last <= maxIndex {
			n++
		}
		return n
	})
}

// deleteHead deletes the oldest count() segments (count runs with the log
// locked and never counts the active segment) and returns how many.
func (l *Log) deleteHead(count func() int) (n int, err error) {
	err = l.mutate(func() error {
		n = count()
		if n == 0 {
			return nil
		}
		next := l.segs[n]
		first := max(l.firstIndex, next.base)
		if err := writeMeta(l.fs, l.opts.Dir, metaState{firstIndex: first, nextOffset: l.nextOffset}); err != nil {
			n = 0
			return err
		}
		for _, s := range l.segs[:n] {
			l.size -= s.size
			l.removeSegment(s)
		}
		l.segs = append(l.segs[:0:0], l.segs[n:]...)
		if first == next.base {
			l.firstIndex, l.startOffset = first, next.firstOffset
		}
		return l.syncDir()
	})
	return n, err
}
