package tiering

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/fluss-node/fluss-node/logstore"
)

// Segment is one object of a remote log: the frames of a closed local
// segment, byte for byte (logstore/FORMAT.md), holding the data offsets
// [FirstOffset, NextOffset).
type Segment struct {
	Name        string
	FirstOffset int64
	NextOffset  int64
	MaxTs       int64 // newest record timestamp
}

// segmentName is the object name of a segment under dir:
// <first offset, 20 digits>-<next offset, 20 digits>_<max timestamp>.log.
// The offsets sort names in offset order; the timestamp lets retention
// expire a segment without opening it.
func segmentName(dir string, first, next, maxTs int64) string {
	return fmt.Sprintf("%s/%020d-%020d_%d.log", dir, first, next, maxTs)
}

// parseSegmentName reads a name made by segmentName (base name only). It
// accepts only the canonical form, so every object has one reading.
func parseSegmentName(base string) (Segment, bool) {
	stem, ok := strings.CutSuffix(base, ".log")
	if !ok {
		return Segment{}, false
	}
	offs, ts, ok := strings.Cut(stem, "_")
	if !ok {
		return Segment{}, false
	}
	a, b, ok := strings.Cut(offs, "-")
	if !ok {
		return Segment{}, false
	}
	first, err1 := strconv.ParseInt(a, 10, 64)
	next, err2 := strconv.ParseInt(b, 10, 64)
	maxTs, err3 := strconv.ParseInt(ts, 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || first < 0 || next <= first {
		return Segment{}, false
	}
	if segmentName("", first, next, maxTs) != "/"+base {
		return Segment{}, false
	}
	return Segment{Name: base, FirstOffset: first, NextOffset: next, MaxTs: maxTs}, true
}

// RemoteLog is the remote log of one bucket: the segments under its
// directory of a Store. It caches the listing (Refresh reads it again) and
// the last openFiles segment files it opened (opening one reads it whole to
// check it). It is safe for concurrent use; reads of one RemoteLog take
// turns.
type RemoteLog struct {
	store Store
	dir   string

	mu   sync.Mutex
	segs []Segment  // by FirstOffset, then NextOffset
	open []openFile // most recently used first
}

// openFiles is how many segment files a RemoteLog keeps open: readers at a
// few different places of one bucket's cold data (a backfill next to a
// consumer catching up) do not reopen and recheck a segment per fetch.
const openFiles = 4

type openFile struct {
	name string
	obj  Object
	file *logstore.SegmentFile
}

// NewRemoteLog returns the remote log of store under dir (one per bucket,
// see BucketDir). Call Refresh to read what it holds.
func NewRemoteLog(store Store, dir string) *RemoteLog {
	return &RemoteLog{store: store, dir: dir}
}

// Dir is the remote log's directory in its store.
func (l *RemoteLog) Dir() string { return l.dir }

// BucketDir is the directory of a bucket's remote log.
func BucketDir(tableID, partitionID int64, bucket int32) string {
	return fmt.Sprintf("t%d/p%d/b%d", tableID, partitionID, bucket)
}

// Refresh lists the store again. Objects whose names are not segment
// names are ignored.
func (l *RemoteLog) Refresh() error {
	names, err := l.store.List(l.dir)
	if err != nil {
		return err
	}
	segs := make([]Segment, 0, len(names))
	for _, n := range names {
		if s, ok := parseSegmentName(path.Base(n)); ok {
			s.Name = n
			segs = append(segs, s)
		}
	}
	sortSegments(segs)
	l.mu.Lock()
	l.segs = segs
	l.mu.Unlock()
	return nil
}

func sortSegments(segs []Segment) {
	slices.SortFunc(segs, func(a, b Segment) int {
		return cmp.Or(cmp.Compare(a.FirstOffset, b.FirstOffset), cmp.Compare(a.NextOffset, b.NextOffset))
	})
}

// Segments returns the segments as last listed, by offset.
func (l *RemoteLog) Segments() []Segment {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.segs)
}

// Range returns where the remote log starts and the offset up to which it
// holds every record from there without a gap. start == end when it is
// empty.
func (l *RemoteLog) Range() (start, end int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.segs) == 0 {
		return 0, 0
	}
	start = l.segs[0].FirstOffset
	return start, l.contiguousLocked(start)
}

// contiguousLocked is the end of the gap-free run of segments that holds
// offset from (from itself if none holds it). Segments may overlap: leaders
// of different terms may have rolled their segments at different offsets,
// but the records at an offset are the same in every copy.
func (l *RemoteLog) contiguousLocked(from int64) int64 {
	end := from
	for _, s := range l.segs {
		if s.FirstOffset > end {
			break
		}
		end = max(end, s.NextOffset)
	}
	return end
}

// Holds reports whether the remote log holds every record of [first, next).
func (l *RemoteLog) Holds(first, next int64) bool { return l.HeldFrom(first) >= next }

// HeldFrom returns the offset up to which the remote log holds every
// record from offset first on, or first when no segment holds first.
func (l *RemoteLog) HeldFrom(first int64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.segs {
		if s.FirstOffset <= first && first < s.NextOffset {
			return l.contiguousLocked(first)
		}
	}
	return first
}

// Upload copies closed local segment c into the remote log unless the
// remote log already holds its records. It reads the copy through
// logstore.OpenSegmentFile first, so a damaged local segment is never
// uploaded (nor then dropped locally as tiered).
func (l *RemoteLog) Upload(c logstore.ClosedSegment) (bool, error) {
	if c.NextOffset <= c.FirstOffset || l.Holds(c.FirstOffset, c.NextOffset) {
		return false, nil
	}
	if _, err := logstore.OpenSegmentFile(c.Data, c.Size); err != nil {
		return false, fmt.Errorf("tiering: segment at offset %d not uploaded: %w", c.FirstOffset, err)
	}
	s := Segment{
		Name:        segmentName(l.dir, c.FirstOffset, c.NextOffset, c.MaxTs),
		FirstOffset: c.FirstOffset, NextOffset: c.NextOffset, MaxTs: c.MaxTs,
	}
	if err := l.store.Put(s.Name, io.NewSectionReader(c.Data, 0, c.Size), c.Size); err != nil {
		return false, err
	}
	l.mu.Lock()
	if !slices.ContainsFunc(l.segs, func(x Segment) bool { return x.Name == s.Name }) {
		l.segs = append(l.segs, s)
		sortSegments(l.segs)
	}
	l.mu.Unlock()
	return true, nil
}

// Read visits the records of the remote log from offset, as logstore's
// Log.Read does, within the one segment that holds offset (the one that
// reaches furthest): a reader continues at the offset after the last
// record visited. An offset no segment holds is ErrOffsetOutOfRange.
func (l *RemoteLog) Read(offset, endOffset int64, maxBytes int, fn func(index uint64, base int64, count int32, data []byte) bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	best := -1
	for i, s := range l.segs {
		if s.FirstOffset <= offset && offset < s.NextOffset && (best < 0 || s.NextOffset > l.segs[best].NextOffset) {
			best = i
		}
	}
	if best < 0 {
		return fmt.Errorf("tiering: no remote segment holds offset %d: %w", offset, logstore.ErrOffsetOutOfRange)
	}
	f, err := l.openLocked(l.segs[best])
	if err != nil {
		return err
	}
	return f.Read(offset, endOffset, maxBytes, fn)
}

// openLocked returns the segment file of s, keeping the last openFiles
// open.
func (l *RemoteLog) openLocked(s Segment) (*logstore.SegmentFile, error) {
	if i := slices.IndexFunc(l.open, func(o openFile) bool { return o.name == s.Name }); i >= 0 {
		o := l.open[i]
		copy(l.open[1:i+1], l.open[:i])
		l.open[0] = o
		return o.file, nil
	}
	obj, err := l.store.Open(s.Name)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			// Expired by the leader since the last listing.
			return nil, fmt.Errorf("tiering: remote segment %s is gone: %w", s.Name, logstore.ErrOffsetOutOfRange)
		}
		return nil, err
	}
	f, err := logstore.OpenSegmentFile(obj, obj.Size())
	if err == nil && (f.FirstOffset() != s.FirstOffset || f.NextOffset() != s.NextOffset) {
		err = fmt.Errorf("holds offsets [%d, %d), its name says [%d, %d)", f.FirstOffset(), f.NextOffset(), s.FirstOffset, s.NextOffset)
	}
	if err != nil {
		obj.Close()
		return nil, fmt.Errorf("tiering: remote segment %s: %w", s.Name, err)
	}
	if len(l.open) == openFiles {
		l.open[openFiles-1].obj.Close()
		l.open = l.open[:openFiles-1]
	}
	l.open = slices.Insert(l.open, 0, openFile{name: s.Name, obj: obj, file: f})
	return f, nil
}

// closeLocked closes the open file of segment name, if any.
func (l *RemoteLog) closeLocked(name string) {
	l.open = slices.DeleteFunc(l.open, func(o openFile) bool {
		if o.name == name {
			o.obj.Close()
			return true
		}
		return false
	})
}

// OffsetForTimestamp returns the first offset of the remote log whose
// record timestamp is >= tsMs, and true; false when no remote segment
// holds a record that new.
func (l *RemoteLog) OffsetForTimestamp(tsMs int64) (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.segs {
		if s.MaxTs < tsMs {
			continue
		}
		f, err := l.openLocked(s)
		if err != nil {
			return 0, false
		}
		if off, ok := f.OffsetForTimestamp(tsMs); ok {
			return off, true
		}
	}
	return 0, false
}

// DeleteBefore is remote retention: it deletes the segments, oldest first,
// whose records are all older than cutoffMs and below keepFrom (the lake
// end of a lake table; math.MaxInt64: no such bound), and returns how many.
func (l *RemoteLog) DeleteBefore(cutoffMs, keepFrom int64) (int, error) {
	n := 0
	for _, s := range l.Segments() {
		if s.MaxTs >= cutoffMs || s.NextOffset > keepFrom {
			break
		}
		if err := l.store.Delete(s.Name); err != nil {
			return n, err
		}
		l.mu.Lock()
		l.closeLocked(s.Name)
		l.segs = slices.DeleteFunc(l.segs, func(x Segment) bool { return x.Name == s.Name })
		l.mu.Unlock()
		n++
	}
	return n, nil
}

// Close closes the open segment files.
func (l *RemoteLog) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, o := range l.open {
		o.obj.Close()
	}
	l.open = nil
}
