package replica

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/kvstore"
)

// A replica's raft snapshot holds no records (doc.go), so a follower that
// catches up from one would hold nothing before the snapshot's index: the
// entries the leader still has locally and the remote log does not would
// be missing from that replica, and from the whole bucket once it led.
// So the snapshot a leader sends carries its local log with it: the
// group's transport (durableTransport → sendSnapshot) puts a log section,
// the leader's entries from its first index through the snapshot's, in
// front of the FSM snapshot, and the receiving FSM (Restore → restoreLog)
// makes them its log before it takes the state. The follower then holds what the
// leader held, as a Kafka follower fetches from the leader's log start;
// what the leader had dropped was in the remote log or expired.
//
// Section format (little-endian):
//
//	"FLG1" | first index u64 | last index u64 | last term u64 |
//	start offset i64 | entries bytes u64 |
//	per entry, first..last: index u64 | term u64 | type u8 |
//	ext length u32 | ext | data length u32 | data
//
// The start offset is the data offset of the first entry. The entries come
// from the sender's log, whose frames are CRC-checked when read; the
// receiver's snapshot store checks the stream's CRC whenever it reads the
// received snapshot back; StoreLogs checks indexes and data offsets as the
// entries go into the log. A snapshot
// without a section (one a node took itself, or one from a binary that
// predates sections) restores as before: the replica's log is emptied
// unless it already continues from the snapshot.

const (
	sectionMagic     = "FLG1"
	sectionHeaderLen = 4 + 5*8
	entryHeaderLen   = 8 + 8 + 1 + 4 + 4
	// maxSectionEntry bounds one entry's ext or data length when reading
	// a section (the log's frames are far smaller).
	maxSectionEntry = 256 << 20
	// importBatchBytes is how much of a section is stored per StoreLogs.
	importBatchBytes = 4 << 20
)

// logSection describes a section: its header.
type logSection struct {
	First, Last uint64
	LastTerm    uint64
	StartOffset int64
	Bytes       uint64
}

func (s logSection) appendHeader(b []byte) []byte {
	le := binary.LittleEndian
	b = append(b, sectionMagic...)
	b = le.AppendUint64(b, s.First)
	b = le.AppendUint64(b, s.Last)
	b = le.AppendUint64(b, s.LastTerm)
	b = le.AppendUint64(b, uint64(s.StartOffset))
	return le.AppendUint64(b, s.Bytes)
}

func appendSectionEntry(b []byte, e *raft.Log) []byte {
	le := binary.LittleEndian
	b = le.AppendUint64(b, e.Index)
	b = le.AppendUint64(b, e.Term)
	b = append(b, byte(e.Type))
	b = le.AppendUint32(b, uint32(len(e.Extensions)))
	b = append(b, e.Extensions...)
	b = le.AppendUint32(b, uint32(len(e.Data)))
	return append(b, e.Data...)
}

// readSectionHeader reads a section header (magic included).
func readSectionHeader(r io.Reader) (logSection, error) {
	var h [sectionHeaderLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return logSection{}, fmt.Errorf("%w: log section header: %w", ErrCorruptSnapshot, err)
	}
	if string(h[:4]) != sectionMagic {
		return logSection{}, fmt.Errorf("%w: log section magic %q", ErrCorruptSnapshot, h[:4])
	}
	le := binary.LittleEndian
	s := logSection{
		First:       le.Uint64(h[4:]),
		Last:        le.Uint64(h[12:]),
		LastTerm:    le.Uint64(h[20:]),
		StartOffset: int64(le.Uint64(h[28:])),
		Bytes:       le.Uint64(h[36:]),
	}
	if s.First == 0 || s.Last < s.First || s.StartOffset < 0 || s.Bytes < (s.Last-s.First+1)*entryHeaderLen {
		return logSection{}, fmt.Errorf("%w: log section [%d, %d] start offset %d in %d bytes", ErrCorruptSnapshot, s.First, s.Last, s.StartOffset, s.Bytes)
	}
	return s, nil
}

// sectionReader reads a section's entries in order, checking that they
// are the section's indexes and that they fill its bytes exactly.
type sectionReader struct {
	r    io.Reader
	sec  logSection
	next uint64 // index of the next entry
	left uint64 // bytes of the section not read yet
}

func newSectionReader(r io.Reader, sec logSection) *sectionReader {
	return &sectionReader{r: r, sec: sec, next: sec.First, left: sec.Bytes}
}

// entry reads the next entry; nil, nil after the last one. (Not io.EOF:
// a stream that ends early fails with an error wrapping it.)
func (s *sectionReader) entry() (*raft.Log, error) {
	if s.next > s.sec.Last {
		if s.left != 0 {
			return nil, fmt.Errorf("%w: log section has %d bytes after its last entry", ErrCorruptSnapshot, s.left)
		}
		return nil, nil
	}
	var h [8 + 8 + 1 + 4]byte
	if err := s.read(h[:]); err != nil {
		return nil, err
	}
	le := binary.LittleEndian
	e := &raft.Log{Index: le.Uint64(h[:]), Term: le.Uint64(h[8:]), Type: raft.LogType(h[16])}
	if e.Index != s.next {
		return nil, fmt.Errorf("%w: log section holds raft index %d where %d belongs", ErrCorruptSnapshot, e.Index, s.next)
	}
	if e.Index == s.sec.Last && e.Term != s.sec.LastTerm {
		return nil, fmt.Errorf("%w: log section's last entry has term %d, header says %d", ErrCorruptSnapshot, e.Term, s.sec.LastTerm)
	}
	var err error
	if e.Extensions, err = s.chunk(le.Uint32(h[17:])); err != nil {
		return nil, err
	}
	var n [4]byte
	if err := s.read(n[:]); err != nil {
		return nil, err
	}
	if e.Data, err = s.chunk(le.Uint32(n[:])); err != nil {
		return nil, err
	}
	s.next++
	return e, nil
}

func (s *sectionReader) read(b []byte) error {
	if uint64(len(b)) > s.left {
		return fmt.Errorf("%w: log section ends inside raft index %d", ErrCorruptSnapshot, s.next)
	}
	if _, err := io.ReadFull(s.r, b); err != nil {
		return fmt.Errorf("%w: log section at raft index %d: %w", ErrCorruptSnapshot, s.next, err)
	}
	s.left -= uint64(len(b))
	return nil
}

func (s *sectionReader) chunk(n uint32) ([]byte, error) {
	if n == 0 {
		return nil, nil
	}
	if n > maxSectionEntry {
		return nil, fmt.Errorf("%w: log section entry %d claims %d bytes", ErrCorruptSnapshot, s.next, n)
	}
	b := make([]byte, n)
	return b, s.read(b)
}

// skip reads the rest of the section without keeping it.
func (s *sectionReader) skip() error {
	n, err := io.CopyN(io.Discard, s.r, int64(s.left))
	s.left -= uint64(n)
	if err != nil {
		return fmt.Errorf("%w: log section: %w", ErrCorruptSnapshot, err)
	}
	return nil
}

// sectionFor measures the section of this replica's log that goes with a
// snapshot at (last, lastTerm): its entries from the log's first index
// through last. ok is false when the log holds none of them.
func (r *Replica) sectionFor(last, lastTerm uint64) (sec logSection, ok bool, err error) {
	first, err := r.log.FirstIndex()
	if err != nil || first == 0 || first > last {
		return logSection{}, false, err
	}
	sec = logSection{First: first, Last: last, LastTerm: lastTerm, StartOffset: r.log.StartOffset()}
	var e raft.Log
	for i := first; i <= last; i++ {
		if err := r.log.GetLog(i, &e); err != nil {
			return logSection{}, false, fmt.Errorf("log section: raft index %d: %w", i, err)
		}
		if i == last && e.Term != lastTerm {
			return logSection{}, false, fmt.Errorf("log section: raft index %d has term %d, the snapshot %d", i, e.Term, lastTerm)
		}
		sec.Bytes += uint64(entryHeaderLen + len(e.Extensions) + len(e.Data))
	}
	return sec, true, nil
}

// writeSection writes the section sec measured: header, then the entries.
// It fails if the log no longer holds them as measured (the head was
// deleted meanwhile); raft then sends the snapshot again later.
func (r *Replica) writeSection(w io.Writer, sec logSection) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	if _, err := bw.Write(sec.appendHeader(nil)); err != nil {
		return err
	}
	var (
		e       raft.Log
		buf     []byte
		written uint64
	)
	for i := sec.First; i <= sec.Last; i++ {
		if err := r.log.GetLog(i, &e); err != nil {
			return fmt.Errorf("log section: raft index %d: %w", i, err)
		}
		buf = appendSectionEntry(buf[:0], &e)
		written += uint64(len(buf))
		if written > sec.Bytes {
			return fmt.Errorf("log section: entries grew past the %d bytes measured", sec.Bytes)
		}
		if _, err := bw.Write(buf); err != nil {
			return err
		}
	}
	if written != sec.Bytes {
		return fmt.Errorf("log section: %d bytes written, %d measured", written, sec.Bytes)
	}
	return bw.Flush()
}

// restoreLog makes the replica's log agree with a snapshot being restored
// at raft index last (the FSM's Restore calls it): with a section (sec
// non-nil; src reads its entries) the log becomes the section's entries
// unless it already continues from the snapshot; without one the log is
// emptied unless it continues from the snapshot, and then takes any next
// index at data offset next. The log continues from the snapshot when it
// holds entry last with the snapshot's term (when known: with a section)
// or starts right after it: then everything up to last agrees with the
// leader's by raft's log matching, and what follows is raft's to keep or
// truncate. imported reports that the log now ends with the section.
func (r *Replica) restoreLog(last, lastTerm uint64, next int64, sec *logSection, src io.Reader) (imported bool, err error) {
	first, err := r.log.FirstIndex()
	if err != nil {
		return false, err
	}
	end, err := r.log.LastIndex()
	if err != nil {
		return false, err
	}
	continues := first == last+1
	if first != 0 && first <= last && last <= end {
		continues = true
		if sec != nil {
			var e raft.Log
			if err := r.log.GetLog(last, &e); err != nil {
				return false, fmt.Errorf("read raft index %d: %w", last, err)
			}
			continues = e.Term == lastTerm
		}
	}
	if sec == nil {
		if continues {
			return false, nil
		}
		r.logger.Info("log does not continue from the snapshot: emptied", "snapshot_index", last, "log_first", first, "log_last", end)
		return false, r.log.Reset(next)
	}
	sr := newSectionReader(src, *sec)
	if continues {
		return false, sr.skip()
	}
	if err := r.log.Reset(sec.StartOffset); err != nil {
		return false, err
	}
	var (
		batch []*raft.Log
		size  int
	)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := r.log.StoreLogs(batch)
		batch, size = batch[:0], 0
		if err != nil {
			return fmt.Errorf("store the snapshot's log: %w", err)
		}
		return nil
	}
	for {
		e, err := sr.entry()
		if err != nil {
			return false, err
		}
		if e == nil {
			break
		}
		batch = append(batch, e)
		if size += len(e.Data); size >= importBatchBytes {
			if err := flush(); err != nil {
				return false, err
			}
		}
	}
	if err := flush(); err != nil {
		return false, err
	}
	r.logger.Info("took the leader's log with its snapshot", "first_index", sec.First, "last_index", sec.Last,
		"start_offset", sec.StartOffset, "next_offset", r.log.NextOffset(), "bytes", sec.Bytes)
	return true, nil
}

// sendSnapshot sends a snapshot through tr with this replica's log section
// in front (durableTransport calls it), unless withSection says the
// cluster's nodes cannot all read sections yet or the log holds nothing
// up to the snapshot. A snapshot this replica received holds its sender's
// section in front: that one is dropped, and this replica's own log goes
// in its place.
func (r *Replica) sendSnapshot(tr raft.Transport, withSection func() bool, id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	sent := *args
	state := bufio.NewReaderSize(data, 64<<10)
	if magic, _ := state.Peek(len(sectionMagic)); string(magic) == sectionMagic {
		old, err := readSectionHeader(state)
		if err == nil {
			err = newSectionReader(state, old).skip()
		}
		if err != nil {
			return fmt.Errorf("snapshot to %s: the stored snapshot's log section: %w", id, err)
		}
		sent.Size -= sectionHeaderLen + int64(old.Bytes)
	}
	if withSection != nil && !withSection() {
		return tr.InstallSnapshot(id, target, &sent, resp, state)
	}
	sec, ok, err := r.sectionFor(args.LastLogIndex, args.LastLogTerm)
	if err != nil {
		return fmt.Errorf("snapshot to %s: %w", id, err)
	}
	if !ok {
		return tr.InstallSnapshot(id, target, &sent, resp, state)
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(r.writeSection(pw, sec)) }()
	defer pr.Close() // ends the writer if the transport stopped reading
	sent.Size += sectionHeaderLen + int64(sec.Bytes)
	r.logger.Info("sending a snapshot with the local log", "to", string(id), "first_index", sec.First, "last_index", sec.Last, "bytes", sent.Size)
	return tr.InstallSnapshot(id, target, &sent, resp, io.MultiReader(pr, state))
}

// LostState is what remote storage holds of a primary-key bucket's group
// that lost every replica (Config.Lost).
type LostState struct {
	// Snapshot opens the lost group's newest KV snapshot (a snapshot of
	// this package's primary-key format, as Raft took it); nil, and no
	// error, for the empty state before the first record.
	Snapshot func() (io.ReadCloser, error)
	// Changelog calls fn with the index and data of each raft entry that
	// holds records of [from, to), in order.
	Changelog func(from, to int64, fn func(index uint64, data []byte) error) error
}

// seedIndex is the raft index (and term) of the snapshot a group that
// starts at a data offset above 0 is bootstrapped with (seed).
const seedIndex = 1

// seed bootstraps a group that starts at data offset cfg.StartOffset: in
// place of raft.BootstrapCluster's first log entry (the configuration at
// index 1), a snapshot at index 1, term 1 holding the configuration and a
// state whose next offset and log start are cfg.StartOffset. Raft restores
// it when it starts (FSM.Restore, which empties the log to continue at that
// offset) and appends the group's entries after it. Every replica of the
// group seeds the same snapshot, as every replica of a new group bootstraps
// the same configuration. A primary-key bucket's seed carries its KV state
// too: the lost group's, from remote storage (restoreLost).
func (r *Replica) seed(conf raft.Configuration) error {
	st := fsmState{NextOffset: r.cfg.StartOffset, LogStart: r.cfg.StartOffset, AppliedIndex: seedIndex}
	var kv *kvstore.Snapshot
	if r.cfg.PK != nil {
		maxTs, err := r.restoreLost()
		if err != nil {
			return err
		}
		st.MaxTs = maxTs
		kv = r.cfg.PK.KV.NewSnapshot()
		defer kv.Release()
	}
	sink, err := r.snaps.Create(raft.SnapshotVersionMax, seedIndex, seedIndex, conf, seedIndex, r.cfg.Transport)
	if err != nil {
		return err
	}
	return (&fsmSnapshot{data: appendState(nil, &st), kv: kv}).Persist(sink)
}

// restoreLost makes the replica's KV state that of the lost group at
// StartOffset (Config.Lost): its KV snapshot, then the changelog entries
// after it, then the seed's raft index as the applied index. It returns the
// commit timestamp the lost group's snapshot had reached.
func (r *Replica) restoreLost() (maxTs int64, err error) {
	lost, kv := r.cfg.Lost, r.cfg.PK.KV
	if lost == nil {
		return 0, fmt.Errorf("a primary-key bucket restored at offset %d needs the lost group's KV snapshot", r.cfg.StartOffset)
	}
	rc, err := lost.Snapshot()
	if err != nil {
		return 0, fmt.Errorf("open the lost group's KV snapshot: %w", err)
	}
	var st fsmState // no snapshot: the empty state before offset 0
	if rc != nil {
		defer rc.Close()
		src := bufio.NewReaderSize(rc, 64<<10)
		b, err := readPKHeader(src)
		if err != nil {
			return 0, err
		}
		if st, err = decodeState(b); err != nil {
			return 0, err
		}
		if st.NextOffset > r.cfg.StartOffset {
			return 0, fmt.Errorf("%w: the KV snapshot reaches offset %d, past the start offset %d", ErrCorruptSnapshot, st.NextOffset, r.cfg.StartOffset)
		}
		if err := kv.Restore(src); err != nil {
			return 0, err
		}
	}
	next := st.NextOffset
	err = lost.Changelog(next, r.cfg.StartOffset, func(index uint64, data []byte) error {
		base, count, ts, ok := EntryOffsets(&raft.Log{Type: raft.LogCommand, Data: data})
		switch {
		case !ok:
			return nil
		case base != next:
			return fmt.Errorf("the lost group's changelog has an entry at offset %d, want %d", base, next)
		case index <= st.AppliedIndex:
			return fmt.Errorf("the lost group's changelog entry at offset %d has raft index %d, not after the snapshot's %d", base, index, st.AppliedIndex)
		}
		changes, err := r.pks.changes(data)
		if err != nil {
			return fmt.Errorf("the lost group's changelog at offset %d: %w", base, err)
		}
		if err := kv.Apply(changes, index); err != nil {
			return err
		}
		next, st.MaxTs = base+int64(count), max(st.MaxTs, ts)
		return nil
	})
	if err != nil {
		return 0, err
	}
	if next != r.cfg.StartOffset {
		return 0, fmt.Errorf("the lost group's changelog ends at offset %d, want %d", next, r.cfg.StartOffset)
	}
	return st.MaxTs, kv.SetAppliedIndex(seedIndex)
}

// IsPK reports whether this is a primary-key bucket's replica.
func (r *Replica) IsPK() bool { return r.cfg.PK != nil }

// KVSnapshot hands the replica's newest raft snapshot (a primary-key
// replica's KV state with its log state; tiering/kvsnap.go) to put, with
// its raft index and the data offset its state reaches, unless its index is
// not above have. It asks raft for a new snapshot first; when nothing was
// applied since the last one, that one is the newest. It reports whether it
// called put.
func (r *Replica) KVSnapshot(have uint64, put func(index uint64, next int64, rd io.Reader, size int64) error) (bool, error) {
	if r.cfg.PK == nil {
		return false, fmt.Errorf("replica %v: not a primary-key bucket", r.cfg.ID)
	}
	if err := r.raft.Snapshot().Error(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return false, fmt.Errorf("replica %v: snapshot: %w", r.cfg.ID, err)
	}
	metas, err := r.snaps.List()
	if err != nil || len(metas) == 0 || metas[0].Index <= have {
		return false, err
	}
	meta, rc, err := r.snaps.Open(metas[0].ID)
	if err != nil {
		return false, err
	}
	defer rc.Close()
	src := bufio.NewReaderSize(rc, 64<<10)
	state, err := readPKHeader(src)
	if err != nil {
		return false, fmt.Errorf("replica %v: snapshot %s: %w", r.cfg.ID, meta.ID, err)
	}
	st, err := decodeState(state)
	if err != nil {
		return false, err
	}
	// The header read, in front of the rest.
	hdr := binary.LittleEndian.AppendUint32([]byte(pkSnapMagic), uint32(len(state)))
	whole := io.MultiReader(bytes.NewReader(hdr), bytes.NewReader(state), src)
	if err := put(meta.Index, st.NextOffset, whole, meta.Size); err != nil {
		return false, fmt.Errorf("replica %v: upload the snapshot at raft index %d: %w", r.cfg.ID, meta.Index, err)
	}
	return true, nil
}
