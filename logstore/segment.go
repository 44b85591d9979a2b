package logstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"time"
)

const indexEntryLen = 16

// indexEntry is one sparse offset-index entry (see FORMAT.md).
type indexEntry struct {
	offset int64  // next data offset at the frame
	rel    uint32 // raft index - segment base
	pos    uint32 // frame position
}

// timeEntry is one time-index entry (see FORMAT.md).
type timeEntry struct {
	ts     int64
	offset int64
}

// segment is one .log file and its in-memory sparse indexes. Fields are
// guarded by Log.mu (written with it held exclusively, after the bytes they
// describe are written).
type segment struct {
	dir  string
	stem string
	base uint64 // raft index of the first frame
	f    File

	size        int64  // end of the last frame
	last        uint64 // last raft index; base-1 when empty
	firstOffset int64  // next data offset at the start of the segment
	nextOffset  int64  // data offset after the last frame
	maxTs       int64  // newest record timestamp; math.MinInt64 if none
	maxTsOffset int64  // base offset of the frame holding maxTs
	created     time.Time
	reserved    int64 // file blocks reserved (preallocated) up to here; active segment only

	index         []indexEntry
	tindex        []timeEntry
	sinceIdx      int64  // bytes written since the last index entry
	sinceTime     int64  // bytes written since the last time entry
	idxWritten    int    // entries of index already in the .index file
	tidxWritten   int    // entries of tindex already in the .timeindex file
	indexesDirty  bool   // files must be rewritten from scratch
	syncedThrough int64  // durable size (SyncAlways bookkeeping)
	idxF, tidxF   File   // open index files (nil until the first flush, or after close)
	scratch       []byte // encoding buffer of flushIndexes
}

func segmentStem(base uint64) string { return fmt.Sprintf("%020d", base) }

func (s *segment) logPath() string  { return join(s.dir, s.stem+".log") }
func (s *segment) idxPath() string  { return join(s.dir, s.stem+".index") }
func (s *segment) tidxPath() string { return join(s.dir, s.stem+".timeindex") }
func (s *segment) empty() bool      { return s.last < s.base }
func (s *segment) name() string     { return s.stem + ".log" }
func (s *segment) resetState(o int64) {
	s.size, s.last = 0, s.base-1
	s.firstOffset, s.nextOffset = o, o
	s.maxTs, s.maxTsOffset = math.MinInt64, 0
	s.index, s.tindex = s.index[:0], s.tindex[:0]
	s.sinceIdx, s.sinceTime = 0, 0
	s.indexesDirty = true
}

// observe records a frame written (or scanned) at pos. It returns whether
// index entries were added.
func (s *segment) observe(m *frameMeta, pos int64, interval int64) {
	if len(s.index) == 0 || s.sinceIdx >= interval {
		s.index = append(s.index, indexEntry{offset: m.offset, rel: uint32(m.index - s.base), pos: uint32(pos)})
		s.sinceIdx = 0
	}
	if m.hasRecords() && m.maxTs > s.maxTs {
		if len(s.tindex) == 0 || s.sinceTime >= interval {
			s.tindex = append(s.tindex, timeEntry{ts: m.maxTs, offset: m.offset})
			s.sinceTime = 0
		}
		s.maxTs, s.maxTsOffset = m.maxTs, m.offset
	}
	n := m.size()
	s.sinceIdx += n
	s.sinceTime += n
	s.last = m.index
	s.nextOffset = m.nextOffset()
	s.size = pos + n
}

// sealTimeIndex adds a final time entry so the newest timestamp is in the
// file (called when the segment is closed for appends).
func (s *segment) sealTimeIndex() {
	if s.maxTs == math.MinInt64 {
		return
	}
	if n := len(s.tindex); n == 0 || s.tindex[n-1].ts < s.maxTs {
		s.tindex = append(s.tindex, timeEntry{ts: s.maxTs, offset: s.maxTsOffset})
	}
}

// flushIndexes appends new in-memory entries to the index files (or
// rewrites them). Index files are a cache: they are synced only at seal,
// and errors are only logged by the caller.
//
// An open index file is appended to with one pwrite per flush; a file is
// truncated only when it is rewritten from scratch (indexesDirty: after
// recovery found it inconsistent, after tail truncation, or after a failed
// write). The file size is therefore always idxWritten (tidxWritten)
// entries when indexesDirty is false.
func (s *segment) flushIndexes(fs FS, sync bool) error {
	if s.indexesDirty {
		s.idxWritten, s.tidxWritten = 0, 0
	}
	err1 := writeEntries(fs, &s.idxF, s.idxPath(), s.indexesDirty, s.idxWritten, len(s.index), func(b []byte, i int) {
		e := s.index[i]
		binary.LittleEndian.PutUint64(b[0:], uint64(e.offset))
		binary.LittleEndian.PutUint32(b[8:], e.rel)
		binary.LittleEndian.PutUint32(b[12:], e.pos)
	}, sync, &s.scratch)
	err2 := writeEntries(fs, &s.tidxF, s.tidxPath(), s.indexesDirty, s.tidxWritten, len(s.tindex), func(b []byte, i int) {
		e := s.tindex[i]
		binary.LittleEndian.PutUint64(b[0:], uint64(e.ts))
		binary.LittleEndian.PutUint64(b[8:], uint64(e.offset))
	}, sync, &s.scratch)
	if err := errors.Join(err1, err2); err != nil {
		s.indexesDirty = true
		// Reopen on the next flush: the descriptor may be the problem.
		s.closeIndexes()
		return err
	}
	s.idxWritten, s.tidxWritten, s.indexesDirty = len(s.index), len(s.tindex), false
	return nil
}

// closeIndexes closes the index files if they are open (they are reopened
// by the next flushIndexes).
func (s *segment) closeIndexes() {
	for _, f := range []*File{&s.idxF, &s.tidxF} {
		if *f != nil {
			(*f).Close()
			*f = nil
		}
	}
}

// writeEntries writes entries [from, to) at their place in the index file
// *fp (opened on first use), after truncating it to zero when rewrite is
// set. scratch is a reusable encoding buffer.
func writeEntries(fs FS, fp *File, path string, rewrite bool, from, to int, put func([]byte, int), sync bool, scratch *[]byte) error {
	if !rewrite && from == to && !sync {
		return nil
	}
	if *fp == nil {
		f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		*fp = f
	}
	f := *fp
	if rewrite {
		if err := f.Truncate(0); err != nil {
			return err
		}
	}
	if n := (to - from) * indexEntryLen; n > 0 {
		if cap(*scratch) < n {
			*scratch = make([]byte, n)
		}
		buf := (*scratch)[:n]
		for i := from; i < to; i++ {
			put(buf[(i-from)*indexEntryLen:], i)
		}
		if _, err := f.WriteAt(buf, int64(from)*indexEntryLen); err != nil {
			return err
		}
	}
	if sync {
		return f.Sync()
	}
	return nil
}

func readAll(fs FS, path string) ([]byte, error) {
	f, err := fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n, err := f.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b, nil
}

// loadIndexes reads the index files and keeps their longest valid prefix.
func (s *segment) loadIndexes(fs FS, fileSize int64) {
	b, err := readAll(fs, s.idxPath())
	if err == nil {
		for i := 0; i+indexEntryLen <= len(b); i += indexEntryLen {
			e := indexEntry{
				offset: int64(binary.LittleEndian.Uint64(b[i:])),
				rel:    binary.LittleEndian.Uint32(b[i+8:]),
				pos:    binary.LittleEndian.Uint32(b[i+12:]),
			}
			if n := len(s.index); n == 0 {
				if e.pos != 0 || e.rel != 0 || e.offset < 0 {
					break
				}
			} else if p := s.index[n-1]; e.pos <= p.pos || e.rel <= p.rel || e.offset < p.offset {
				break
			}
			if int64(e.pos) >= fileSize {
				break
			}
			s.index = append(s.index, e)
		}
	}
	b, err = readAll(fs, s.tidxPath())
	if err == nil && len(s.index) > 0 {
		for i := 0; i+indexEntryLen <= len(b); i += indexEntryLen {
			e := timeEntry{ts: int64(binary.LittleEndian.Uint64(b[i:])), offset: int64(binary.LittleEndian.Uint64(b[i+8:]))}
			if n := len(s.tindex); n == 0 {
				if e.offset < s.index[0].offset {
					break
				}
			} else if p := s.tindex[n-1]; e.ts <= p.ts || e.offset <= p.offset {
				break
			}
			s.tindex = append(s.tindex, e)
		}
	}
	s.idxWritten, s.tidxWritten = len(s.index), len(s.tindex)
}

// idxFor returns the position of the last index entry with entry.offset <=
// offset (sparse offset lookup), or 0.
func (s *segment) idxForOffset(offset int64) int {
	i := sort.Search(len(s.index), func(i int) bool { return s.index[i].offset > offset })
	if i == 0 {
		return 0
	}
	return i - 1
}

// idxForIndex returns the index-entry number for raft index idx.
func (s *segment) idxForIndex(idx uint64) int {
	rel := uint32(idx - s.base)
	i := sort.Search(len(s.index), func(i int) bool { return s.index[i].rel > rel })
	if i == 0 {
		return 0
	}
	return i - 1
}

// frameReader reads consecutive frames of a file with pread, through a
// buffer it owns. Slices it returns are valid until the next call.
type frameReader struct {
	f        io.ReaderAt
	pos      int64 // position of the next frame
	end      int64 // do not read at or past end
	buf      []byte
	bufStart int64
	bufLen   int
	ahead    int64 // read size when refilling; 0 = len(buf)
}

func (r *frameReader) reset(f io.ReaderAt, pos, end int64) {
	r.f, r.pos, r.end = f, pos, end
	r.bufStart, r.bufLen, r.ahead = pos, 0, 0
	if r.buf == nil {
		r.buf = make([]byte, 64<<10)
	}
}

// fill makes [r.pos, r.pos+n) available in the buffer. It returns false at
// a short file.
func (r *frameReader) fill(n int64) (bool, error) {
	if r.pos+n > r.end {
		return false, nil
	}
	if r.pos >= r.bufStart && r.pos+n <= r.bufStart+int64(r.bufLen) {
		return true, nil
	}
	want := int64(len(r.buf))
	if r.ahead > 0 {
		want = r.ahead
	}
	if n > want {
		want = n
	}
	if want > int64(len(r.buf)) {
		r.buf = make([]byte, want)
	}
	if r.pos+want > r.end {
		want = r.end - r.pos
	}
	got, err := r.f.ReadAt(r.buf[:want], r.pos)
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	r.bufStart, r.bufLen = r.pos, got
	return int64(got) >= n, nil
}

// errTail marks the end of valid frames (a torn or corrupt frame) at pos.
type tailError struct {
	pos int64
	err error
}

func (e *tailError) Error() string { return fmt.Sprintf("at byte %d: %v", e.pos, e.err) }

// next decodes the frame at r.pos. io.EOF at exactly r.end; *tailError for
// an invalid or short frame; other errors are I/O errors.
func (r *frameReader) next(m *frameMeta) (pos int64, ext, data []byte, err error) {
	pos = r.pos
	if pos >= r.end {
		return pos, nil, nil, io.EOF
	}
	ok, err := r.fill(frameHeaderLen)
	if err != nil {
		return pos, nil, nil, err
	}
	if !ok {
		return pos, nil, nil, &tailError{pos, errShortFrame}
	}
	if err := decodeFrameHeader(r.buf[pos-r.bufStart:r.bufLen], m); err != nil {
		return pos, nil, nil, &tailError{pos, err}
	}
	if ok, err = r.fill(m.size()); err != nil {
		return pos, nil, nil, err
	} else if !ok {
		return pos, nil, nil, &tailError{pos, errShortFrame}
	}
	ext, data, err = decodeFrame(r.buf[pos-r.bufStart:r.bufLen], m)
	if err != nil {
		return pos, nil, nil, &tailError{pos, err}
	}
	r.pos = pos + m.size()
	return pos, ext, data, nil
}
