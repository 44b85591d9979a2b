package logstore

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// OffsetFunc reports the data offsets an entry holds. ok=false for entries
// without records. Called on StoreLogs; must be pure. Its results are
// written into the frame, so indexes are rebuilt without calling it again.
type OffsetFunc func(l *raft.Log) (baseOffset int64, count int32, maxTimestampMs int64, ok bool)

// SyncMode says when StoreLogs makes data durable.
type SyncMode int

const (
	// SyncAlways: StoreLogs returns only after the entries are durable.
	SyncAlways SyncMode = iota
	// SyncInterval: entries are synced in the background every
	// Options.SyncInterval. Weaker: a machine crash loses up to that much
	// acknowledged data on this replica (a quorum may still have it).
	SyncInterval
)

// Options configures a Log. Zero values take the documented defaults.
type Options struct {
	// Dir holds the segments, indexes, meta and stable files. Required.
	Dir string
	// FS is the filesystem; default OSFS{}.
	FS FS
	// SegmentBytes rolls the active segment when the next frame would
	// make it larger. Default 128 MiB, at most 1 GiB. The active segment's
	// blocks are reserved preallocStep ahead of the write position
	// (FALLOC_FL_KEEP_SIZE), never the whole segment up front: a node holds
	// thousands of mostly idle buckets.
	SegmentBytes int64
	// SegmentMaxAge rolls a non-empty segment at the next append once it
	// is this old. Default 1 h.
	SegmentMaxAge time.Duration
	// IndexIntervalBytes is the spacing of sparse index entries. Default
	// 4096 bytes.
	IndexIntervalBytes int64
	// OffsetFunc reports the data range of an entry. Default: no entry
	// holds records.
	OffsetFunc OffsetFunc
	// Syncer group-commits syncs with other logs of the node. Default
	// nil: StoreLogs syncs its own file.
	Syncer *Syncer
	// SyncMode default SyncAlways.
	SyncMode SyncMode
	// SyncInterval is the background sync period for SyncInterval mode.
	// Default 100 ms.
	SyncInterval time.Duration
	// RecentEntries is how many recent entries GetLog finds by exact
	// position (16 bytes each). Default 1024.
	RecentEntries int
	// Logger default slog.Default().
	Logger *slog.Logger
	// Now is the clock for segment age. Default time.Now.
	Now func() time.Time
}

func (o *Options) setDefaults() error {
	if o.Dir == "" {
		return errors.New("logstore: Options.Dir is required")
	}
	if o.FS == nil {
		o.FS = OSFS{}
	}
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = 128 << 20
	}
	if o.SegmentBytes > 1<<30 {
		return fmt.Errorf("logstore: SegmentBytes %d is above the 1 GiB limit", o.SegmentBytes)
	}
	if o.SegmentMaxAge <= 0 {
		o.SegmentMaxAge = time.Hour
	}
	if o.IndexIntervalBytes <= 0 {
		o.IndexIntervalBytes = 4096
	}
	if o.OffsetFunc == nil {
		o.OffsetFunc = func(*raft.Log) (int64, int32, int64, bool) { return 0, 0, 0, false }
	}
	if o.SyncInterval <= 0 {
		o.SyncInterval = 100 * time.Millisecond
	}
	if o.RecentEntries <= 0 {
		o.RecentEntries = 1024
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

type recentPos struct {
	index uint64
	base  uint64 // segment base
	pos   int64
	size  int64
}

// Log is a segmented append-only log of raft entries. It implements
// raft.LogStore, raft.MonotonicLogStore and raft.StableStore, and the
// data-offset read API of the fetch path. Safe for concurrent use.
type Log struct {
	opts Options
	fs   FS
	lock io.Closer
	log  *slog.Logger

	// appendMu serializes mutators (StoreLogs, DeleteRange, DeleteBefore,
	// Close). Lock order: appendMu, then mu.
	appendMu sync.Mutex
	buf      []byte
	pend     []pendingFrame

	// mu guards the published state below. Readers hold it shared for the
	// whole read; mutators hold it exclusively only to publish.
	mu          sync.RWMutex
	segs        []*segment
	firstIndex  uint64 // logical first index; 0 when empty
	lastIndex   uint64 // 0 when empty
	startOffset int64
	nextOffset  int64
	size        int64
	recent      []recentPos
	bodies      [recentBodies]*raft.Log // newest small entries, by index % recentBodies
	closed      bool

	dirty  atomic.Bool
	stopBg chan struct{}
	bgDone chan struct{}

	// deferSync, deferWhen and dur: see durable.go.
	deferSync atomic.Bool
	deferWhen atomic.Pointer[func([]*raft.Log) bool]
	// deferred counts deferred syncs in flight. Close, DeleteRange and
	// DeleteBefore wait for them (holding appendMu, so none starts
	// meanwhile, and before l.mu, which a failed one takes) before they
	// close or remove a segment file a sync may still be using.
	deferred sync.WaitGroup
	dur      durability

	stable *stableStore
	// dirSynced: recovery synced the directory (it found segments).
	dirSynced bool
}

type pendingFrame struct {
	seg *segment
	m   frameMeta
	pos int64
	log *raft.Log
}

// Raft reads entries back right after storing them: a leader to send them
// to its followers (and the previous entry's term with them), a follower to
// apply them once the next AppendEntries says they are committed. GetLog
// serves the newest recentBodies entries of at most recentBodyMax bytes
// (data and extensions) from the entries StoreLogs was given instead of a
// pread, which was most of a small entry's read-back cost. Bounded so an
// idle log holds at most 8 x 4 KiB of them.
const (
	recentBodies  = 8
	recentBodyMax = 4 << 10
)

var (
	_ raft.LogStore          = (*Log)(nil)
	_ raft.StableStore       = (*Log)(nil)
	_ raft.MonotonicLogStore = (*Log)(nil)
)

// Open opens (creating if needed) the log in opts.Dir, locks the
// directory, and recovers it as FORMAT.md describes.
func Open(opts Options) (*Log, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	fs := opts.FS
	if err := fs.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("logstore: create %s: %w", opts.Dir, err)
	}
	lk, err := fs.Lock(join(opts.Dir, "LOCK"))
	if err != nil {
		return nil, fmt.Errorf("logstore: open %s: %w", opts.Dir, err)
	}
	l := &Log{opts: opts, fs: fs, lock: lk, log: opts.Logger.With("dir", opts.Dir),
		recent: make([]recentPos, opts.RecentEntries)}
	if err := l.recover(); err != nil {
		l.closeFiles()
		lk.Close()
		return nil, err
	}
	st, err := openStable(fs, opts.Dir)
	if err != nil {
		l.closeFiles()
		lk.Close()
		return nil, err
	}
	l.stable = st
	// Recovery's directory sync made the names as found durable: the
	// stable store's first Set need not sync the directory again.
	st.spareSafe = l.dirSynced
	// What recovery found is durable from here on: an earlier process may
	// have written entries whose deferred sync it never saw (SetDeferSync).
	if n := len(l.segs); n > 0 && opts.SyncMode == SyncAlways && l.segs[n-1].size > 0 {
		if err := l.syncFile(l.segs[n-1].f); err != nil {
			l.closeFiles()
			lk.Close()
			return nil, fmt.Errorf("logstore: sync %s: %w", l.segs[n-1].name(), err)
		}
	}
	l.dur.init(l.lastIndex)
	if opts.SyncMode == SyncInterval {
		l.stopBg, l.bgDone = make(chan struct{}), make(chan struct{})
		go l.syncLoop()
	}
	return l, nil
}

func (l *Log) recover() error {
	dir := l.opts.Dir
	names, err := l.fs.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("logstore: list %s: %w", dir, err)
	}
	logs := map[string]bool{}
	for _, n := range names {
		if stem, ok := strings.CutSuffix(n, ".log"); ok && len(stem) == 20 {
			if _, err := strconv.ParseUint(stem, 10, 64); err == nil {
				logs[stem] = true
			}
		}
	}
	for _, n := range names {
		var stem string
		switch {
		case strings.HasSuffix(n, ".tmp"):
			_ = l.fs.Remove(join(dir, n))
			continue
		case strings.HasSuffix(n, ".timeindex"):
			stem = strings.TrimSuffix(n, ".timeindex")
		case strings.HasSuffix(n, ".index"):
			stem = strings.TrimSuffix(n, ".index")
		default:
			continue
		}
		if !logs[stem] {
			_ = l.fs.Remove(join(dir, n))
		}
	}
	meta, err := readMeta(l.fs, dir)
	if err != nil {
		return err
	}
	stems := sortedNames(logs)
	prevNext := int64(-1)
	for i, stem := range stems {
		base, _ := strconv.ParseUint(stem, 10, 64)
		lastSeg := i == len(stems)-1
		s := &segment{dir: dir, stem: stem, base: base}
		s.resetState(max(prevNext, 0))
		f, err := l.fs.OpenFile(s.logPath(), os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("logstore: open segment: %w", err)
		}
		s.f = f
		l.segs = append(l.segs, s)
		if err := l.recoverSegment(s, lastSeg, prevNext); err != nil {
			return err
		}
		if n := len(l.segs); n > 1 && !s.empty() && l.segs[n-2].last+1 != s.base {
			return &CorruptionError{Segment: s.name(), Offset: 0,
				Reason: fmt.Sprintf("segment starts at raft index %d, previous segment ends at %d", s.base, l.segs[n-2].last)}
		}
		if s.empty() {
			// Only the last segment can be empty: a crash right after a roll.
			l.removeSegment(s)
			l.segs = l.segs[:len(l.segs)-1]
			continue
		}
		prevNext = s.nextOffset
		if s.indexesDirty || s.idxWritten != len(s.index) || s.tidxWritten != len(s.tindex) {
			if !lastSeg {
				s.sealTimeIndex()
			}
			if err := s.flushIndexes(l.fs, false); err != nil {
				l.log.Warn("logstore: cannot rewrite segment indexes", "segment", s.name(), "err", err)
			}
			if !lastSeg {
				s.closeIndexes()
			}
		}
	}
	// Drop segments entirely below the logical first index.
	for len(l.segs) > 0 && l.segs[0].last < meta.firstIndex {
		l.removeSegment(l.segs[0])
		l.segs = l.segs[1:]
	}
	if len(l.segs) == 0 {
		l.nextOffset, l.startOffset = meta.nextOffset, meta.nextOffset
		return nil
	}
	if err := l.fs.SyncDir(dir); err != nil {
		return fmt.Errorf("logstore: sync %s: %w", dir, err)
	}
	l.dirSynced = true
	l.firstIndex = max(meta.firstIndex, l.segs[0].base)
	last := l.segs[len(l.segs)-1]
	l.lastIndex, l.nextOffset = last.last, last.nextOffset
	last.syncedThrough = last.size
	for _, s := range l.segs {
		l.size += s.size
	}
	so, err := l.offsetAtLocked(l.firstIndex)
	if err != nil {
		return err
	}
	l.startOffset = so
	return nil
}

// recoverSegment rebuilds s's state from its files.
func (l *Log) recoverSegment(s *segment, lastSeg bool, prevNext int64) error {
	fileSize, err := s.f.Size()
	if err != nil {
		return fmt.Errorf("logstore: stat %s: %w", s.name(), err)
	}
	if !lastSeg {
		s.loadIndexes(l.fs, fileSize)
		if len(s.index) > 0 && (prevNext < 0 || s.index[0].offset == prevNext) {
			k := len(s.index) - 1
			if n := len(s.tindex); n > 0 {
				k = min(k, s.idxForOffset(s.tindex[n-1].offset))
			}
			e := s.index[k]
			keepT := sort.Search(len(s.tindex), func(i int) bool { return s.tindex[i].offset >= e.offset })
			s.tindex = s.tindex[:keepT]
			if keepT > 0 {
				s.maxTs, s.maxTsOffset = s.tindex[keepT-1].ts, s.tindex[keepT-1].offset
			}
			s.firstOffset = s.index[0].offset
			s.index = s.index[:k]
			s.sinceIdx, s.sinceTime = l.opts.IndexIntervalBytes, l.opts.IndexIntervalBytes
			s.last, s.nextOffset, s.size = s.base+uint64(e.rel)-1, e.offset, int64(e.pos)
			err := l.scanSegment(s, int64(e.pos), fileSize, false, true)
			if err == nil {
				return nil
			}
			var ce *CorruptionError
			if !errors.As(err, &ce) {
				return err
			}
			l.log.Warn("logstore: segment index is inconsistent, rebuilding", "segment", s.name(), "err", err)
		}
		s.resetState(max(prevNext, 0))
	}
	s.indexesDirty = true
	return l.scanSegment(s, 0, fileSize, lastSeg, prevNext < 0)
}

// scanSegment reads frames of s from pos to fileSize, feeding observe. In
// the last segment an invalid frame truncates the file, unless it looks
// damaged rather than torn (torn.go); elsewhere it is a *CorruptionError. anyFirstOffset accepts any data offset on the first
// frame (the first segment of the log).
func (l *Log) scanSegment(s *segment, pos, fileSize int64, lastSeg, anyFirstOffset bool) error {
	var r frameReader
	r.reset(s.f, pos, fileSize)
	var m frameMeta
	for {
		p, _, _, err := r.next(&m)
		if err == io.EOF {
			return nil
		}
		var te *tailError
		if errors.As(err, &te) {
			if !lastSeg {
				return &CorruptionError{Segment: s.name(), Offset: te.pos, Reason: te.err.Error()}
			}
			if err := damagedNotTorn(s, te.pos, fileSize, te.err); err != nil {
				return err
			}
			l.log.Warn("logstore: truncating torn or corrupt tail", "segment", s.name(), "position", te.pos, "file_size", fileSize, "reason", te.err.Error())
			if err := s.f.Truncate(te.pos); err != nil {
				return fmt.Errorf("logstore: truncate %s at %d: %w", s.name(), te.pos, err)
			}
			if err := s.f.Sync(); err != nil {
				return fmt.Errorf("logstore: sync %s: %w", s.name(), err)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("logstore: read %s: %w", s.name(), err)
		}
		if m.index != s.last+1 {
			return &CorruptionError{Segment: s.name(), Offset: p,
				Reason: fmt.Sprintf("frame has raft index %d, want %d", m.index, s.last+1)}
		}
		if p == 0 && anyFirstOffset {
			s.firstOffset, s.nextOffset = m.offset, m.offset
		}
		if m.offset != s.nextOffset {
			return &CorruptionError{Segment: s.name(), Offset: p,
				Reason: fmt.Sprintf("frame has data offset %d, want %d", m.offset, s.nextOffset)}
		}
		if p == 0 {
			s.created = l.opts.Now()
			if m.appendedAt != 0 {
				s.created = time.Unix(0, m.appendedAt)
			}
		}
		s.observe(&m, p, l.opts.IndexIntervalBytes)
	}
}

func (l *Log) removeSegment(s *segment) {
	if s.f != nil {
		s.f.Close()
	}
	s.closeIndexes()
	for _, p := range []string{s.logPath(), s.idxPath(), s.tidxPath()} {
		if err := l.fs.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			l.log.Warn("logstore: cannot remove file", "path", p, "err", err)
		}
	}
}

func (l *Log) closeFiles() {
	for _, s := range l.segs {
		if s.f != nil {
			s.f.Close()
		}
		s.closeIndexes()
	}
}

// Close flushes index files, closes all files and releases the directory
// lock. Further calls return ErrClosed.
func (l *Log) Close() error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	l.closed = true
	l.mu.Unlock()
	if l.stopBg != nil {
		close(l.stopBg)
		<-l.bgDone
	}
	l.deferred.Wait()
	var errs []error
	if n := len(l.segs); n > 0 {
		s := l.segs[n-1]
		if err := s.f.Sync(); err != nil {
			errs = append(errs, fmt.Errorf("logstore: sync %s: %w", s.name(), err))
		} else {
			l.dur.advance(l.dur.generation(), l.lastIndex)
		}
		if err := s.flushIndexes(l.fs, false); err != nil {
			l.log.Warn("logstore: cannot write segment indexes", "segment", s.name(), "err", err)
		}
	}
	l.dur.fail(ErrClosed)
	l.closeFiles()
	errs = append(errs, l.lock.Close())
	return errors.Join(errs...)
}

func (l *Log) syncLoop() {
	defer close(l.bgDone)
	t := time.NewTicker(l.opts.SyncInterval)
	defer t.Stop()
	for {
		select {
		case <-l.stopBg:
			return
		case <-t.C:
		}
		if !l.dirty.Swap(false) {
			continue
		}
		l.appendMu.Lock()
		var f File
		if n := len(l.segs); n > 0 {
			f = l.segs[n-1].f
		}
		l.appendMu.Unlock()
		if f != nil {
			if err := l.syncFile(f); err != nil && !errors.Is(err, os.ErrClosed) {
				l.log.Warn("logstore: background sync failed", "err", err)
				l.dirty.Store(true)
			}
		}
	}
}

func (l *Log) syncFile(f File) error {
	if l.opts.Syncer != nil {
		return l.opts.Syncer.Sync(f)
	}
	return f.Sync()
}

// IsMonotonic implements raft.MonotonicLogStore: the log never has gaps,
// so raft removes all entries after installing a snapshot, and the next
// StoreLogs may then start at any index. (Bucket replicas hide it and
// make the log agree with the snapshot themselves: node/replica
// snapshot.go.)
func (l *Log) IsMonotonic() bool { return true }

// FirstIndex implements raft.LogStore; 0 when empty.
func (l *Log) FirstIndex() (uint64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return 0, ErrClosed
	}
	return l.firstIndex, nil
}

// LastIndex implements raft.LogStore; 0 when empty.
func (l *Log) LastIndex() (uint64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return 0, ErrClosed
	}
	return l.lastIndex, nil
}

// NextOffset is the data offset after the last stored entry.
func (l *Log) NextOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.nextOffset
}

// StartOffset is the first data offset still readable.
func (l *Log) StartOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.startOffset
}

// Size is the total size of the segment files in bytes.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.size
}

// StoreLog implements raft.LogStore.
func (l *Log) StoreLog(log *raft.Log) error { return l.StoreLogs([]*raft.Log{log}) }

// StoreLogs implements raft.LogStore. Indexes must continue the log
// without a gap (any index when the log is empty); entries with records
// must continue the data offsets densely. With SyncAlways it returns after
// the entries are durable. The newest small entries are kept by reference
// for GetLog (see recentBodies): callers must not modify an entry after
// storing it (raft does not).
func (l *Log) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.RLock()
	closed, lastIndex, next := l.closed, l.lastIndex, l.nextOffset
	l.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	empty := lastIndex == 0
	var act *segment
	if n := len(l.segs); n > 0 {
		act = l.segs[n-1]
	}
	l.buf = l.buf[:0]
	l.pend = l.pend[:0]
	bufPos := int64(0)
	if act != nil {
		bufPos = act.size
	}
	for i, e := range logs {
		if (!empty || i > 0) && e.Index != lastIndex+1 {
			return fmt.Errorf("logstore: store raft index %d after %d: %w", e.Index, lastIndex, ErrNonContiguous)
		}
		if e.Index == 0 {
			return fmt.Errorf("logstore: store raft index 0: %w", ErrNonContiguous)
		}
		base, count, maxTs, ok := l.opts.OffsetFunc(e)
		records := ok && count > 0
		if records && base != next && !(empty && i == 0) {
			return fmt.Errorf("logstore: raft index %d holds data offset %d, want %d: %w", e.Index, base, next, ErrNonContiguous)
		}
		if !records {
			base = next
		}
		if empty && i == 0 {
			next = base
		}
		frameSize := int64(frameHeaderLen + len(e.Extensions) + len(e.Data))
		if frameSize-8 > maxFrameBody {
			return fmt.Errorf("logstore: raft index %d is %d bytes: %w", e.Index, frameSize, ErrFrameTooLarge)
		}
		now := l.opts.Now()
		if act == nil || (bufPos+int64(len(l.buf)) > 0 &&
			(bufPos+int64(len(l.buf))+frameSize > l.opts.SegmentBytes || now.Sub(act.created) >= l.opts.SegmentMaxAge)) {
			if act != nil {
				if err := l.writeBuf(act, bufPos); err != nil {
					return err
				}
				if err := l.seal(act); err != nil {
					return err
				}
			}
			s, err := l.newSegment(e.Index, next, now)
			if err != nil {
				return err
			}
			act, bufPos = s, 0
		}
		start := len(l.buf)
		l.buf = appendFrame(l.buf, e, base, count, maxTs, records)
		var m frameMeta
		_ = decodeFrameHeader(l.buf[start:], &m)
		l.pend = append(l.pend, pendingFrame{seg: act, m: m, pos: bufPos + int64(start), log: e})
		lastIndex = e.Index
		next = m.nextOffset()
	}
	if err := l.writeBuf(act, bufPos); err != nil {
		return err
	}
	switch {
	case l.opts.SyncMode != SyncAlways:
		// Acknowledged once written, by configuration: nothing waits.
		l.dirty.Store(true)
		l.dur.advance(l.dur.generation(), lastIndex)
	case l.shouldDefer(logs):
		l.deferred.Add(1)
		l.dur.deferring(lastIndex)
		l.syncDeferred(act.f, lastIndex, l.dur.generation())
	default:
		if err := l.syncFile(act.f); err != nil {
			return fmt.Errorf("logstore: sync %s: %w", act.name(), err)
		}
		l.dur.advance(l.dur.generation(), lastIndex)
	}
	// The active segment's index entries stay in memory until it is sealed
	// or the log closed: recovery scans the last segment in full anyway,
	// and index files written here would only make every sync round flush
	// them too.
	l.publish()
	return nil
}

func (l *Log) writeBuf(s *segment, pos int64) error {
	if len(l.buf) == 0 {
		return nil
	}
	l.reserve(s, pos+int64(len(l.buf)))
	if _, err := s.f.WriteAt(l.buf, pos); err != nil {
		// Nothing was published; drop whatever part was written.
		_ = s.f.Truncate(pos)
		return fmt.Errorf("logstore: write %s: %w", s.name(), err)
	}
	l.buf = l.buf[:0]
	return nil
}

// publish makes the pending frames visible to readers.
func (l *Log) publish() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.pend {
		p := &l.pend[i]
		s := p.seg
		s.observe(&p.m, p.pos, l.opts.IndexIntervalBytes)
		l.size += p.m.size()
		if l.lastIndex == 0 {
			l.firstIndex = p.m.index
			l.startOffset = p.m.offset
		}
		l.lastIndex = p.m.index
		l.nextOffset = p.m.nextOffset()
		l.recent[p.m.index%uint64(len(l.recent))] = recentPos{index: p.m.index, base: s.base, pos: p.pos, size: p.m.size()}
		body := &l.bodies[p.m.index%recentBodies]
		*body = nil
		if len(p.log.Data)+len(p.log.Extensions) <= recentBodyMax {
			*body = p.log
		}
		p.log = nil
	}
	l.pend = l.pend[:0]
}

// seal syncs a segment that stops taking appends, publishes its pending
// frames, and writes its indexes durably.
func (l *Log) seal(s *segment) error {
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("logstore: sync %s: %w", s.name(), err)
	}
	l.publish()
	l.mu.Lock()
	s.sealTimeIndex()
	l.mu.Unlock()
	if err := s.flushIndexes(l.fs, true); err != nil {
		l.log.Warn("logstore: cannot write segment indexes", "segment", s.name(), "err", err)
	}
	s.closeIndexes() // no more appends: do not hold descriptors for it
	return nil
}

// The active segment's blocks are reserved ahead of its write position, so
// that appends rarely allocate blocks (less journal work per fsync): as far
// ahead as the segment has been written, between minPrealloc and
// preallocStep. A new or idle segment holds minPrealloc of unused disk (a
// node with 4096 idle buckets reserves 256 MiB, not 4 GiB); one being
// written reaches preallocStep after its first MiB, five reservations later.
const (
	minPrealloc  = 64 << 10
	preallocStep = 1 << 20
)

// reserve makes sure s has blocks reserved beyond end (capped at the
// segment size). A failure (a filesystem without fallocate) is logged once
// per segment and not retried.
func (l *Log) reserve(s *segment, end int64) {
	if end < s.reserved {
		return
	}
	ahead := min(max(end, minPrealloc), preallocStep)
	want := min(end+ahead, max(l.opts.SegmentBytes, end))
	if err := s.f.Preallocate(want); err != nil {
		l.log.Debug("logstore: preallocate failed", "segment", s.name(), "err", err)
		want = 1 << 62
	}
	s.reserved = want
}

func (l *Log) newSegment(base uint64, offset int64, now time.Time) (*segment, error) {
	s := &segment{dir: l.opts.Dir, stem: segmentStem(base), base: base, created: now}
	s.resetState(offset)
	s.indexesDirty = false
	f, err := l.fs.OpenFile(s.logPath(), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("logstore: create segment: %w", err)
	}
	s.f = f
	l.reserve(s, 0)
	for _, p := range []string{s.idxPath(), s.tidxPath()} {
		_ = l.fs.Remove(p)
	}
	if err := l.fs.SyncDir(l.opts.Dir); err != nil {
		f.Close()
		_ = l.fs.Remove(s.logPath())
		return nil, fmt.Errorf("logstore: sync %s: %w", l.opts.Dir, err)
	}
	s.f = f
	l.mu.Lock()
	l.segs = append(l.segs, s)
	l.mu.Unlock()
	return s, nil
}

// findSegLocked returns the segment that holds raft index idx, or nil.
func (l *Log) findSegLocked(idx uint64) *segment {
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > idx })
	if i == 0 {
		return nil
	}
	s := l.segs[i-1]
	if idx > s.last {
		return nil
	}
	return s
}

var readerPool = sync.Pool{New: func() any { return new(frameReader) }}

// locateLocked finds the frame of raft index idx. The returned slices
// alias r's buffer; the caller puts r back.
func (l *Log) locateLocked(idx uint64, m *frameMeta) (s *segment, pos int64, r *frameReader, ext, data []byte, err error) {
	s = l.findSegLocked(idx)
	if s == nil {
		return nil, 0, nil, nil, nil, raft.ErrLogNotFound
	}
	r = readerPool.Get().(*frameReader)
	start, ahead := int64(s.index[s.idxForIndex(idx)].pos), int64(16<<10)
	if rp := l.recent[idx%uint64(len(l.recent))]; rp.index == idx && rp.base == s.base {
		start, ahead = rp.pos, rp.size
	}
	r.reset(s.f, start, s.size)
	r.ahead = ahead
	for {
		pos, ext, data, err = r.next(m)
		if err != nil {
			var te *tailError
			if errors.As(err, &te) || err == io.EOF {
				err = &CorruptionError{Segment: s.name(), Offset: pos, Reason: fmt.Sprintf("looking for raft index %d: %v", idx, err)}
			} else {
				err = fmt.Errorf("logstore: read %s: %w", s.name(), err)
			}
			return s, pos, r, nil, nil, err
		}
		if m.index == idx {
			return s, pos, r, ext, data, nil
		}
		if m.index > idx {
			return s, pos, r, nil, nil, &CorruptionError{Segment: s.name(), Offset: pos, Reason: fmt.Sprintf("raft index %d missing", idx)}
		}
	}
}

// GetLog implements raft.LogStore. It returns raft.ErrLogNotFound outside
// [FirstIndex, LastIndex]. out.Data and out.Extensions are fresh copies
// owned by the caller.
func (l *Log) GetLog(idx uint64, out *raft.Log) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return ErrClosed
	}
	if l.lastIndex == 0 || idx < l.firstIndex || idx > l.lastIndex {
		return raft.ErrLogNotFound
	}
	var m frameMeta
	var ext, data []byte
	if b := l.bodies[idx%recentBodies]; b != nil && b.Index == idx {
		m = frameMeta{index: b.Index, term: b.Term, typ: b.Type}
		if !b.AppendedAt.IsZero() {
			m.appendedAt = b.AppendedAt.UnixNano() // as the frame stores it
		}
		ext, data = b.Extensions, b.Data
	} else {
		var r *frameReader
		var err error
		_, _, r, ext, data, err = l.locateLocked(idx, &m)
		if r != nil {
			defer readerPool.Put(r)
		}
		if err != nil {
			return err
		}
	}
	cp := make([]byte, len(ext)+len(data))
	copy(cp, ext)
	copy(cp[len(ext):], data)
	m.fill(out, cp[:len(ext):len(ext)], cp[len(ext):])
	return nil
}

// offsetAtLocked is the data offset at raft index idx (the first offset
// the entry holds, or the next offset when it holds none).
func (l *Log) offsetAtLocked(idx uint64) (int64, error) {
	var m frameMeta
	_, _, r, _, _, err := l.locateLocked(idx, &m)
	if r != nil {
		readerPool.Put(r)
	}
	if err != nil {
		return 0, err
	}
	return m.offset, nil
}

// DeleteRange implements raft.LogStore for the two ranges raft deletes: a
// prefix (compaction; min <= FirstIndex) and a suffix (conflict
// truncation; max >= LastIndex). A range in the middle is an error.
// Deleting everything keeps NextOffset; the next StoreLogs may start at any
// raft index and data offset.
func (l *Log) DeleteRange(minIdx, maxIdx uint64) error {
	return l.mutate(func() error { return l.deleteRangeLocked(minIdx, maxIdx) })
}

func (l *Log) deleteRangeLocked(minIdx, maxIdx uint64) error {
	if l.lastIndex == 0 || minIdx > maxIdx || maxIdx < l.firstIndex || minIdx > l.lastIndex {
		return nil
	}
	clear(l.recent)
	clear(l.bodies[:])
	switch {
	case minIdx <= l.firstIndex && maxIdx >= l.lastIndex:
		l.dur.truncate(0)
		return l.deleteAllLocked()
	case minIdx <= l.firstIndex:
		return l.deleteHeadLocked(maxIdx + 1)
	case maxIdx >= l.lastIndex:
		l.dur.truncate(minIdx - 1)
		return l.truncateTailLocked(minIdx)
	default:
		return fmt.Errorf("logstore: DeleteRange(%d, %d) inside [%d, %d]: only a prefix or a suffix can be deleted",
			minIdx, maxIdx, l.firstIndex, l.lastIndex)
	}
}

// Reset deletes every entry and sets the data offset the next stored
// entry starts at when it holds no records (one with records sets its
// own): a replica that takes over another replica's log from a raft
// snapshot (node/replica snapshot.go) starts from that log's first data
// offset. As after deleting everything, the next StoreLogs may start at
// any raft index.
func (l *Log) Reset(nextOffset int64) error {
	return l.mutate(func() error {
		clear(l.recent)
		clear(l.bodies[:])
		l.dur.truncate(0)
		l.nextOffset = nextOffset
		return l.deleteAllLocked()
	})
}

// mutate runs fn as a mutator that is not an append: with the append
// mutex and the state lock held, after deferred syncs finished; ErrClosed
// on a closed log.
func (l *Log) mutate(fn func() error) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.deferred.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	return fn()
}

func (l *Log) deleteAllLocked() error {
	if err := writeMeta(l.fs, l.opts.Dir, metaState{firstIndex: 0, nextOffset: l.nextOffset}); err != nil {
		return err
	}
	for _, s := range l.segs {
		l.removeSegment(s)
	}
	l.segs = nil
	l.firstIndex, l.lastIndex, l.size = 0, 0, 0
	l.startOffset = l.nextOffset
	return l.syncDir()
}

func (l *Log) syncDir() error {
	if err := l.fs.SyncDir(l.opts.Dir); err != nil {
		return fmt.Errorf("logstore: sync %s: %w", l.opts.Dir, err)
	}
	return nil
}

func (l *Log) deleteHeadLocked(first uint64) error {
	so, err := l.offsetAtLocked(first)
	if err != nil {
		return err
	}
	if err := writeMeta(l.fs, l.opts.Dir, metaState{firstIndex: first, nextOffset: l.nextOffset}); err != nil {
		return err
	}
	n := 0
	for n < len(l.segs)-1 && l.segs[n].last < first {
		l.size -= l.segs[n].size
		l.removeSegment(l.segs[n])
		n++
	}
	l.segs = append(l.segs[:0:0], l.segs[n:]...)
	l.firstIndex, l.startOffset = first, so
	if n > 0 {
		return l.syncDir()
	}
	return nil
}

func (l *Log) truncateTailLocked(from uint64) error {
	var m frameMeta
	s, pos, r, _, _, err := l.locateLocked(from, &m)
	if r != nil {
		readerPool.Put(r)
	}
	if err != nil {
		return err
	}
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > s.base }) - 1
	for _, t := range l.segs[i+1:] {
		l.size -= t.size
		l.removeSegment(t)
	}
	l.segs = l.segs[:i+1]
	if pos == 0 {
		l.size -= s.size
		l.removeSegment(s)
		l.segs = l.segs[:i]
		if err := l.syncDir(); err != nil {
			return err
		}
	} else {
		if err := s.f.Truncate(pos); err != nil {
			return fmt.Errorf("logstore: truncate %s at %d: %w", s.name(), pos, err)
		}
		if err := s.f.Sync(); err != nil {
			return fmt.Errorf("logstore: sync %s: %w", s.name(), err)
		}
		if err := l.syncDir(); err != nil {
			return err
		}
		l.size -= s.size
		first := s.firstOffset
		s.resetState(first)
		if err := l.scanSegment(s, 0, pos, false, false); err != nil {
			return err
		}
		l.size += s.size
		if err := s.flushIndexes(l.fs, false); err != nil {
			l.log.Warn("logstore: cannot write segment indexes", "segment", s.name(), "err", err)
		}
	}
	last := l.segs[len(l.segs)-1]
	l.lastIndex, l.nextOffset = last.last, last.nextOffset
	return nil
}
