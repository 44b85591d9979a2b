package replica

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/kvstore"
)

// WriterWindow is how many of a writer's most recent batch sequences the
// FSM remembers (as Kafka does): a retry of one of them is answered with the
// stored result, an older one is rejected with ErrOutOfOrderSequence.
const WriterWindow = 5

// WriterExpiryMs is how long, in commit-timestamp milliseconds, a writer that
// appends nothing is remembered (Kafka's producer id expiration: 7 days).
// Expiry runs inside Apply on commit time, so it is deterministic.
const WriterExpiryMs = 7 * 24 * 3600 * 1000

// writerSweepMs is how often (commit time) the writer table is swept.
const writerSweepMs = 3600 * 1000

// SeqResult is where one (writer, sequence) request landed.
type SeqResult struct {
	Seq   int32
	Base  int64
	Count int32
}

// writerState is one writer's window, oldest first, seqs ascending.
type writerState struct {
	LastTs  int64
	Results []SeqResult
}

// fsmState is the whole replicated state of a log-table replica.
type fsmState struct {
	NextOffset   int64
	LogStart     int64
	MaxTs        int64 // max commit timestamp applied (proposer keeps ts monotonic)
	AppliedIndex uint64
	LastSweep    int64 // commit time of the last writer-table sweep
	Writers      map[int64]*writerState
}

// FSM is the raft.BatchingFSM of a log-table bucket replica. Apply runs on
// raft's FSM goroutine only; the getters may be called from any goroutine.
// Invariant: NextOffset is the offset after the last record of the last
// applied entry, which is the high watermark.
type FSM struct {
	mu      sync.RWMutex
	st      fsmState
	entries uint64        // LogCommand entries applied since start (statistics, not replicated)
	waitCh  chan struct{} // closed and replaced after every apply that moved NextOffset
	closed  bool

	// logStartFn, when set, reports the local log start offset recorded in
	// snapshots (informational: retention is local, not replicated).
	logStartFn func() int64

	// pk is set for primary-key table replicas: Apply also applies the
	// changelog to the KV state, snapshots carry it.
	pk *PKConfig
	// pks resolves the schema versions of a PK replica's changelog
	// batches; stop ends a wait for one (the replica is closing).
	pks  *pkSchemas
	stop <-chan struct{}
	// abandoned: an ApplyBatch returned without applying its entries (the
	// replica is closing). Raft counts them applied; no snapshot may be
	// taken of the state that lacks them.
	abandoned bool
	// kvApplied is the KV state's applied raft index as last read or
	// written (valid when kvLoaded); entries at or below it are not even
	// decoded when raft replays them after a restart. FSM goroutine only.
	kvApplied uint64
	kvLoaded  bool

	// durable, when set, blocks until the entries up to an index are
	// durable (waitDurable); ApplyBatch applies nothing before that.
	durable func(index uint64) error

	// restoreLog, when set, makes the replica's log agree with a snapshot
	// being restored (Replica.restoreLog); logNextOffset is the log's next
	// data offset, checked against the snapshot's state after a log
	// section was taken.
	restoreLog    func(last, lastTerm uint64, next int64, sec *logSection, src io.Reader) (bool, error)
	logNextOffset func() int64
}

func newFSM() *FSM {
	return &FSM{st: fsmState{Writers: map[int64]*writerState{}}, waitCh: make(chan struct{})}
}

var _ raft.BatchingFSM = (*FSM)(nil)

// Apply implements raft.FSM.
func (f *FSM) Apply(l *raft.Log) interface{} { return f.ApplyBatch([]*raft.Log{l})[0] }

// ApplyBatch implements raft.BatchingFSM. It panics on an entry it cannot
// decode or whose base offset is not the next offset: the replica would
// otherwise diverge from its peers.
func (f *FSM) ApplyBatch(logs []*raft.Log) []interface{} {
	out := make([]interface{}, len(logs))
	abandon := func(err error) []interface{} {
		// Closed under a shutting-down raft: nothing more is applied.
		f.mu.Lock()
		f.abandoned = true
		f.mu.Unlock()
		for i := range out {
			out[i] = err
		}
		return out
	}
	if f.durable != nil && len(logs) > 0 {
		if err := f.durable(logs[len(logs)-1].Index); err != nil {
			return abandon(err)
		}
	}
	if f.pks != nil {
		if err := f.pks.awaitBatches(logs, f.stop); err != nil {
			if errors.Is(err, ErrClosed) {
				return abandon(err)
			}
			panic(fmt.Sprintf("replica FSM: raft index %d..%d: schema version of a changelog batch: %v; refusing to diverge", logs[0].Index, logs[len(logs)-1].Index, err))
		}
	}
	f.mu.Lock()
	moved := false
	for _, l := range logs {
		if l.Type == raft.LogCommand {
			f.applyCommand(l)
			f.entries++
			moved = true
		}
		f.st.AppliedIndex = l.Index
	}
	var ch chan struct{}
	if moved && !f.closed {
		ch = f.waitCh
		f.waitCh = make(chan struct{})
	}
	f.mu.Unlock()
	if ch != nil {
		close(ch)
	}
	return out
}

func (f *FSM) applyCommand(l *raft.Log) {
	if len(l.Data) == 0 || l.Data[0] != cmdAppend {
		var c int
		if len(l.Data) > 0 {
			c = int(l.Data[0])
		}
		panic(fmt.Sprintf("replica FSM: raft index %d: unknown command %d (entry of %d bytes); refusing to diverge", l.Index, c, len(l.Data)))
	}
	st := &f.st
	var cur *writerState // writer of the current request run
	var curW int64
	var curSeq int32
	var entryTs int64
	err := forEachBatch(l.Data[1:], func(h batchHeader, _ []byte) error {
		if h.Base != st.NextOffset {
			panic(fmt.Sprintf("replica FSM: raft index %d: batch base offset %d != next offset %d; refusing to diverge", l.Index, h.Base, st.NextOffset))
		}
		st.NextOffset += int64(h.Count)
		st.MaxTs = max(st.MaxTs, h.CommitTs)
		entryTs = max(entryTs, h.CommitTs)
		if h.WriterID == 0 {
			cur = nil
			return nil
		}
		if cur != nil && curW == h.WriterID && curSeq == h.Seq {
			// Another batch of the same request: extend its result.
			cur.Results[len(cur.Results)-1].Count += h.Count
			return nil
		}
		cur, curW, curSeq = nil, h.WriterID, h.Seq
		ws := st.Writers[h.WriterID]
		if ws == nil {
			ws = &writerState{}
			st.Writers[h.WriterID] = ws
		}
		ws.LastTs = max(ws.LastTs, h.CommitTs)
		if n := len(ws.Results); n > 0 && h.Seq <= ws.Results[n-1].Seq {
			// A duplicate the leader should have dropped: the data stays
			// (offsets are already assigned), the table keeps the original.
			return nil
		}
		ws.Results = append(ws.Results, SeqResult{Seq: h.Seq, Base: h.Base, Count: h.Count})
		if len(ws.Results) > WriterWindow {
			ws.Results = append(ws.Results[:0], ws.Results[len(ws.Results)-WriterWindow:]...)
		}
		cur = ws
		return nil
	})
	if err != nil {
		panic(fmt.Sprintf("replica FSM: raft index %d: undecodable entry: %v; refusing to diverge", l.Index, err))
	}
	if f.pk != nil {
		f.applyPK(l)
	}
	if entryTs-st.LastSweep >= writerSweepMs {
		st.LastSweep = entryTs
		for id, ws := range st.Writers {
			if ws.LastTs < entryTs-WriterExpiryMs {
				delete(st.Writers, id)
			}
		}
	}
}

// HighWatermark is the offset after the last applied record.
func (f *FSM) HighWatermark() int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.NextOffset
}

// wait returns the high watermark and a channel closed when it next moves
// (or the FSM closes).
func (f *FSM) wait() (int64, <-chan struct{}) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.NextOffset, f.waitCh
}

// close wakes every waiter for good.
func (f *FSM) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.closed {
		f.closed = true
		close(f.waitCh)
	}
}

// stats returns the applied raft index and the number of LogCommand entries
// applied since the FSM was created.
func (f *FSM) stats() (applied uint64, entries uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.AppliedIndex, f.entries
}

// view copies what a new leader's proposer starts from.
func (f *FSM) view() (next, maxTs int64, writers map[int64][]SeqResult) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	writers = make(map[int64][]SeqResult, len(f.st.Writers))
	for id, ws := range f.st.Writers {
		writers[id] = slices.Clone(ws.Results)
	}
	return f.st.NextOffset, f.st.MaxTs, writers
}

// writerIDs returns the set of tracked writers.
func (f *FSM) writerIDs() map[int64]struct{} {
	f.mu.RLock()
	defer f.mu.RUnlock()
	m := make(map[int64]struct{}, len(f.st.Writers))
	for id := range f.st.Writers {
		m[id] = struct{}{}
	}
	return m
}

// Snapshot implements raft.FSM: it encodes the (small) state under the lock;
// Persist only writes the bytes.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	var start int64
	if f.logStartFn != nil {
		start = f.logStartFn()
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.abandoned {
		return nil, fmt.Errorf("%w: entries were left unapplied", ErrClosed)
	}
	st := f.st
	st.LogStart = max(st.LogStart, start)
	snap := &fsmSnapshot{data: appendState(nil, &st)}
	if f.pk != nil {
		// On the FSM goroutine: the KV read txn sees exactly the state at
		// st.AppliedIndex. Persist streams it while Apply goes on.
		snap.kv = f.pk.KV.NewSnapshot()
	}
	return snap, nil
}

// Restore implements raft.FSM: decode into fresh state, then swap it in.
// A snapshot sent by a leader starts with its log section (snapshot.go),
// which goes to the log first.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	src := bufio.NewReaderSize(rc, 64<<10)
	var sec *logSection
	imported := false
	if magic, _ := src.Peek(len(sectionMagic)); string(magic) == sectionMagic {
		s, err := readSectionHeader(src)
		if err != nil {
			return fmt.Errorf("replica FSM restore: %w", err)
		}
		sec = &s
		if f.restoreLog != nil {
			imported, err = f.restoreLog(s.Last, s.LastTerm, -1, sec, src)
		} else {
			err = newSectionReader(src, s).skip()
		}
		if err != nil {
			return fmt.Errorf("replica FSM restore: log section: %w", err)
		}
	}
	var b []byte
	var err error
	if f.pk != nil {
		b, err = readPKHeader(src)
	} else {
		b, err = io.ReadAll(io.LimitReader(src, maxSnapshotBytes+1))
	}
	if err != nil {
		return fmt.Errorf("replica FSM restore: read snapshot: %w", err)
	}
	st, err := decodeState(b)
	if err != nil {
		return fmt.Errorf("replica FSM restore: %w", err)
	}
	switch {
	case sec != nil && sec.Last != st.AppliedIndex:
		return fmt.Errorf("replica FSM restore: %w: log section ends at raft index %d, the state at %d", ErrCorruptSnapshot, sec.Last, st.AppliedIndex)
	case imported && f.logNextOffset != nil && f.logNextOffset() != st.NextOffset:
		return fmt.Errorf("replica FSM restore: %w: the log section ends at data offset %d, the state at %d", ErrCorruptSnapshot, f.logNextOffset(), st.NextOffset)
	case sec == nil && f.restoreLog != nil:
		if _, err := f.restoreLog(st.AppliedIndex, 0, st.NextOffset, nil, nil); err != nil {
			return fmt.Errorf("replica FSM restore: %w", err)
		}
	}
	if f.pk != nil {
		f.kvLoaded = false // re-read after the restore
		if err := f.restoreKV(src, st.AppliedIndex); err != nil {
			return fmt.Errorf("replica FSM restore: %w", err)
		}
	}
	f.mu.Lock()
	f.st = st
	var ch chan struct{}
	if !f.closed {
		ch = f.waitCh
		f.waitCh = make(chan struct{})
	}
	f.mu.Unlock()
	if ch != nil {
		close(ch)
	}
	return nil
}

type fsmSnapshot struct {
	data []byte
	kv   *kvstore.Snapshot // PK replicas: the KV state at the same index
}

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	var err error
	if s.kv != nil {
		err = writePKSnapshot(sink, s.data, s.kv)
	} else {
		_, err = sink.Write(s.data)
	}
	if err != nil {
		sink.Cancel()
		return fmt.Errorf("replica FSM snapshot: write: %w", err)
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() {
	if s.kv != nil {
		s.kv.Release()
	}
}

// Snapshot encoding (little-endian), documented in doc.go:
//
//	"FRS1" | next i64 | logStart i64 | maxTs i64 | applied u64 | lastSweep i64 |
//	writers u32 | per writer (ascending id): id i64 | lastTs i64 | n u8 |
//	n × (seq i32 | base i64 | count i32) | CRC32-C u32 of everything before it
const snapMagic = "FRS1"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maxSnapshotBytes bounds what Restore reads (the state is small).
const maxSnapshotBytes = 1 << 30

// ErrCorruptSnapshot is wrapped by every snapshot decoding error.
var ErrCorruptSnapshot = errors.New("corrupt replica snapshot")

func appendState(dst []byte, st *fsmState) []byte {
	le := binary.LittleEndian
	start := len(dst)
	dst = append(dst, snapMagic...)
	dst = le.AppendUint64(dst, uint64(st.NextOffset))
	dst = le.AppendUint64(dst, uint64(st.LogStart))
	dst = le.AppendUint64(dst, uint64(st.MaxTs))
	dst = le.AppendUint64(dst, st.AppliedIndex)
	dst = le.AppendUint64(dst, uint64(st.LastSweep))
	ids := make([]int64, 0, len(st.Writers))
	for id := range st.Writers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	dst = le.AppendUint32(dst, uint32(len(ids)))
	for _, id := range ids {
		ws := st.Writers[id]
		dst = le.AppendUint64(dst, uint64(id))
		dst = le.AppendUint64(dst, uint64(ws.LastTs))
		dst = append(dst, byte(len(ws.Results)))
		for _, r := range ws.Results {
			dst = le.AppendUint32(dst, uint32(r.Seq))
			dst = le.AppendUint64(dst, uint64(r.Base))
			dst = le.AppendUint32(dst, uint32(r.Count))
		}
	}
	return le.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

func decodeState(b []byte) (fsmState, error) {
	le := binary.LittleEndian
	const fixed = 4 + 5*8 + 4
	if len(b) < fixed+4 || string(b[:4]) != snapMagic {
		return fsmState{}, fmt.Errorf("%w: bad magic or %d bytes too short", ErrCorruptSnapshot, len(b))
	}
	body := b[:len(b)-4]
	if got, want := crc32.Checksum(body, castagnoli), le.Uint32(b[len(b)-4:]); got != want {
		return fsmState{}, fmt.Errorf("%w: CRC %#x, stored %#x", ErrCorruptSnapshot, got, want)
	}
	st := fsmState{
		NextOffset:   int64(le.Uint64(body[4:])),
		LogStart:     int64(le.Uint64(body[12:])),
		MaxTs:        int64(le.Uint64(body[20:])),
		AppliedIndex: le.Uint64(body[28:]),
		LastSweep:    int64(le.Uint64(body[36:])),
	}
	n := le.Uint32(body[44:])
	p := body[fixed:]
	const perWriter, perResult = 17, 16
	if uint64(n)*perWriter > uint64(len(p)) {
		return fsmState{}, fmt.Errorf("%w: %d writers do not fit in %d bytes", ErrCorruptSnapshot, n, len(p))
	}
	st.Writers = make(map[int64]*writerState, n)
	for i := uint32(0); i < n; i++ {
		if len(p) < perWriter {
			return fsmState{}, fmt.Errorf("%w: writer %d truncated", ErrCorruptSnapshot, i)
		}
		id := int64(le.Uint64(p))
		ws := &writerState{LastTs: int64(le.Uint64(p[8:]))}
		k := int(p[16])
		p = p[perWriter:]
		if k > WriterWindow || len(p) < k*perResult {
			return fsmState{}, fmt.Errorf("%w: writer %d has %d results", ErrCorruptSnapshot, id, k)
		}
		for j := 0; j < k; j++ {
			ws.Results = append(ws.Results, SeqResult{
				Seq:   int32(le.Uint32(p)),
				Base:  int64(le.Uint64(p[4:])),
				Count: int32(le.Uint32(p[12:])),
			})
			p = p[perResult:]
		}
		if _, dup := st.Writers[id]; dup {
			return fsmState{}, fmt.Errorf("%w: writer %d listed twice", ErrCorruptSnapshot, id)
		}
		st.Writers[id] = ws
	}
	if len(p) != 0 {
		return fsmState{}, fmt.Errorf("%w: %d trailing bytes", ErrCorruptSnapshot, len(p))
	}
	return st, nil
}
