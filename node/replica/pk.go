package replica

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/kvstore"
	"github.com/fluss-node/fluss-node/logstore/record"
)

// PKConfig makes a replica the replica of a primary-key table bucket: its
// log holds the changelog the leader computes, and every replica applies
// that changelog to its KV state (DESIGN §6).
type PKConfig struct {
	KV     *kvstore.Replica // this replica's part of the node's badger store
	Merger *kvstore.Merger
	Schema *record.Schema // the table schema (the KV codec's) when the replica opens
	// Versions returns a schema version of the table from the node's
	// catalog, ErrSchemaUnknown (wrapped) while the catalog does not hold
	// it yet; nil when the table's schema never changes (tests).
	Versions func(schemaID int32) (*PKVersion, error)
	// Compression of changelog batches with 32 records or more (smaller
	// ones are stored uncompressed, as the log-table write path does).
	Compression record.Compression
	ZstdLevel   int
}

// PKWrite is one Upsert or Delete request for one bucket of a primary-key
// table. Rows are full rows of schema version SchemaID (0: the replica's
// current one); for a Delete only the key columns matter. TargetCols
// (schema indexes, nil = every column) makes it a partial update or
// partial delete.
type PKWrite struct {
	Rows       []kvstore.Row
	TargetCols []int
	Delete     bool
	SchemaID   int32
}

// ErrNotPK is returned by the primary-key methods of a log-table replica
// (and by Append on a primary-key replica).
var ErrNotPK = errors.New("operation does not fit the bucket's table kind")

// ErrRejected wraps a merge-engine refusal of a write (a delete on a table
// with table.delete.behavior=disable, NOT NULL violations of a partial
// insert, aggregation overflow): the request is not stored.
var ErrRejected = errors.New("write rejected")

// smallChangelog: changelog batches with fewer records are not compressed.
const smallChangelog = 32

// Write merges a PK write against the current rows (the applied KV state
// plus the leader's pre-write buffer) and stores the resulting changelog as
// one request of writer writerID with sequence seq. It returns once the
// changelog is committed and applied: the base offset and record count of
// the changelog (count 0 when the merge engine changed nothing). A retry of
// an applied or in-flight (writerID, seq) returns the first result; the
// rows are never merged twice.
func (r *Replica) Write(ctx context.Context, w *PKWrite, writerID int64, seq int32) (int64, int32, error) {
	if r.cfg.PK == nil {
		return 0, 0, fmt.Errorf("%w: %v belongs to a log table", ErrNotPK, r.cfg.ID)
	}
	if len(w.Rows) == 0 {
		return 0, 0, fmt.Errorf("%w: %v: no rows", ErrInvalidBatch, r.cfg.ID)
	}
	// Rows of a later version than the replica's current one: make it
	// current first (the catalog of the node that decoded them has it, this
	// node's learns it in moments). Rows of an earlier version merge as rows
	// of the current one with NULL in the columns added since.
	if err := r.pks.await(ctx, r.stopping, w.SchemaID); err != nil {
		return 0, 0, fmt.Errorf("%v: rows of schema version %d: %w", r.cfg.ID, w.SchemaID, err)
	}
	req := &appendReq{pk: w, writer: writerID, seq: seq, done: make(chan appendResult, 1)}
	// A rough size for the queue bound; the real one is known after merging.
	req.size = 64 * len(w.Rows) * len(r.pks.current().Schema.Columns)
	return r.submit(ctx, req)
}

// preparePK runs the merge engine over one PK request in the proposer
// goroutine and turns its changelog into the request's batch. Rows are
// merged in order against the pre-write view; the request's own updates are
// staged in an overlay so that a refused row leaves the view untouched.
func (t *term) preparePK(req *appendReq) error {
	pk := t.r.cfg.PK
	type staged struct {
		key []byte
		row kvstore.Row
	}
	overlay := make(map[string]int, len(req.pk.Rows))
	var stage []staged
	var changes []kvstore.Change
	var key, scratch []byte
	// Drop the buffer entries the FSM applied (complete publishes how far),
	// then open one read view for the whole request: every entry removed
	// here is in the view, every entry applied later is still buffered.
	t.pw.Applied(uint64(t.appliedUpTo.Load()))
	rd := pk.KV.NewReader()
	defer rd.Close()
	// The version to merge with, taken after the reader opened: at least
	// as wide as every row the reader or the buffer holds (pkSchemas.upgrade).
	v := t.r.pks.current()
	codec, width := v.Codec, len(v.Schema.Columns)
	for i, in := range req.pk.Rows {
		var err error
		if len(in) > width {
			return fmt.Errorf("%w: %v row %d: %d columns, schema version %d has %d", ErrSchemaUnknown, t.r.cfg.ID, i, len(in), v.Schema.ID, width)
		}
		in = padRow(in, width)
		if key, err = codec.AppendKey(key[:0], in); err != nil {
			return fmt.Errorf("%w: row %d: %w", ErrRejected, i, err)
		}
		// Apply must not fail on a committed entry: refuse what badger
		// would refuse, before proposing.
		if err := kvstore.CheckKey(key); err != nil {
			return fmt.Errorf("%w: %v row %d: %w", ErrTooLarge, t.r.cfg.ID, i, err)
		}
		var old kvstore.Row
		if j, ok := overlay[string(key)]; ok {
			old = stage[j].row
		} else if old, err = t.pw.LookupIn(rd, key); err != nil {
			return fmt.Errorf("%v: read current row: %w", t.r.cfg.ID, err)
		}
		old = padRow(old, width)
		var nw kvstore.Row
		if req.pk.Delete {
			nw, changes, err = v.Merger.Delete(changes, old, req.pk.TargetCols)
		} else {
			nw, changes, err = v.Merger.Upsert(changes, old, in, req.pk.TargetCols)
		}
		if err != nil {
			return fmt.Errorf("%w: row %d: %w", ErrRejected, i, err)
		}
		if scratch, err = pk.KV.CheckRow(codec, nw, scratch); err != nil {
			return fmt.Errorf("%w: %v row %d: %w", ErrTooLarge, t.r.cfg.ID, i, err)
		}
		if j, ok := overlay[string(key)]; ok {
			stage[j].row = nw
		} else {
			overlay[string(key)] = len(stage)
			stage = append(stage, staged{key: append([]byte(nil), key...), row: nw})
		}
	}
	comp := pk.Compression
	if len(changes) < smallChangelog {
		comp = record.CompressionNone
	}
	rec, err := kvstore.ChangelogRecord(v.Schema, changes, memory.DefaultAllocator)
	if err != nil {
		return fmt.Errorf("%v: build changelog: %w", t.r.cfg.ID, err)
	}
	defer rec.Release()
	h := record.BatchHeader{
		Attributes:    record.AttrChangeType,
		RecordCount:   int32(len(changes)),
		WriterID:      req.writer,
		BatchSequence: req.seq,
		SchemaID:      v.Schema.ID,
	}
	batch, err := record.AppendRecordBatch(nil, h, rec, comp, pk.ZstdLevel)
	if err != nil {
		return fmt.Errorf("%v: encode changelog: %w", t.r.cfg.ID, err)
	}
	if len(batch) > t.r.tuning.MaxEntryBytes {
		return fmt.Errorf("%w: %v: a changelog of %d bytes, limit %d; send fewer rows per request", ErrTooLarge, t.r.cfg.ID, len(batch), t.r.tuning.MaxEntryBytes)
	}
	req.batches, req.size, req.count = [][]byte{batch}, len(batch), int32(len(changes))
	// The view changes once the whole request merged. Tag: the offset after
	// this request's changelog; the buffer entry is dropped once the FSM
	// applied that offset (Applied in complete).
	tag := uint64(t.next) + uint64(len(changes))
	for _, s := range stage {
		if s.row == nil {
			t.pw.Delete(s.key, tag)
		} else {
			t.pw.Put(s.key, s.row, tag)
		}
	}
	return nil
}

// applyPK applies the changelog batches of one entry to the KV state with
// the entry's raft index (kvstore skips an index it already applied). It
// panics on an undecodable batch or a KV write failure: the replica must
// not go on with state that differs from its peers'.
func (f *FSM) applyPK(l *raft.Log) {
	if !f.kvLoaded {
		idx, err := f.pk.KV.AppliedIndex()
		if err != nil {
			panic(fmt.Sprintf("replica FSM: raft index %d: read KV applied index: %v", l.Index, err))
		}
		f.kvApplied, f.kvLoaded = idx, true
	}
	if l.Index <= f.kvApplied {
		return // replayed after a restart: the KV state already holds it
	}
	// ApplyBatch made every version of the entry's batches known
	// (awaitBatches) before it took the lock.
	changes, err := f.pks.changes(l.Data)
	if err != nil {
		panic(fmt.Sprintf("replica FSM: raft index %d: undecodable changelog: %v; refusing to diverge", l.Index, err))
	}
	if err := f.pk.KV.Apply(changes, l.Index); err != nil {
		panic(fmt.Sprintf("replica FSM: raft index %d: KV apply failed: %v; refusing to diverge", l.Index, err))
	}
	f.kvApplied = l.Index
}

// changes decodes the changelog batches of a bucket entry's data (a
// cmdAppend command) into KV changes.
func (s *pkSchemas) changes(data []byte) ([]kvstore.Change, error) {
	if len(data) == 0 || data[0] != cmdAppend {
		return nil, fmt.Errorf("not an append entry")
	}
	var changes []kvstore.Change
	err := forEachBatch(data[1:], func(h batchHeader, b []byte) error {
		if h.Count == 0 {
			return nil
		}
		bt, _, err := record.CheckBatch(b)
		if err != nil {
			return err
		}
		v, err := s.version(bt.SchemaID)
		if err != nil {
			return err
		}
		rec, err := record.DecodeBody(kvstore.ChangelogArrowSchema(v.Schema), bt.Body, memory.DefaultAllocator)
		if err != nil {
			return err
		}
		defer rec.Release()
		changes, err = kvstore.ChangesFromRecord(changes, v.Schema, rec)
		return err
	})
	return changes, err
}

// verifier coalesces leadership confirmations (confirmLeadership): a read
// waits for a round that started after the read did, and every read
// waiting then shares it.
type verifier struct {
	confirm func() error
	mu      sync.Mutex
	running bool
	next    *verifyRound
}

type verifyRound struct {
	done chan struct{}
	err  error
}

func (v *verifier) verify(ctx context.Context) error {
	v.mu.Lock()
	rd := v.next
	if rd == nil {
		rd = &verifyRound{done: make(chan struct{})}
		v.next = rd
		if !v.running {
			v.startLocked()
		}
	}
	v.mu.Unlock()
	select {
	case <-rd.done:
		return rd.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// startLocked runs the pending round. Caller holds v.mu.
func (v *verifier) startLocked() {
	rd := v.next
	v.next, v.running = nil, true
	go func() {
		rd.err = v.confirm()
		close(rd.done)
		v.mu.Lock()
		v.running = false
		if v.next != nil {
			v.startLocked()
		}
		v.mu.Unlock()
	}()
}

// pkSnapshotThreshold is the default SnapshotThreshold of PK replicas.
const pkSnapshotThreshold = 16384

// PK snapshot stream (doc.go): "FPK1" | u32 LE length of the log-state
// snapshot | the log-state snapshot (appendState) | the KV snapshot stream
// (kvstore FORMAT.md, checksummed on its own).
const pkSnapMagic = "FPK1"

func writePKSnapshot(w io.Writer, state []byte, kv *kvstore.Snapshot) error {
	hdr := make([]byte, 0, 8+len(state))
	hdr = append(hdr, pkSnapMagic...)
	hdr = binary.LittleEndian.AppendUint32(hdr, uint32(len(state)))
	hdr = append(hdr, state...)
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	_, err := kv.WriteTo(w)
	return err
}

// readPKHeader reads the magic and the log-state part of a PK snapshot.
func readPKHeader(r io.Reader) ([]byte, error) {
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, fmt.Errorf("%w: PK snapshot header: %v", ErrCorruptSnapshot, err)
	}
	if string(hdr[:4]) != pkSnapMagic {
		return nil, fmt.Errorf("%w: not a primary-key bucket snapshot (magic %q)", ErrCorruptSnapshot, hdr[:4])
	}
	n := binary.LittleEndian.Uint32(hdr[4:])
	if n > maxSnapshotBytes {
		return nil, fmt.Errorf("%w: log state of %d bytes", ErrCorruptSnapshot, n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("%w: PK snapshot log state: %v", ErrCorruptSnapshot, err)
	}
	return b, nil
}

// restoreKV replaces the KV state by the snapshot's, unless the store
// already holds the state of index or a later one (a restart: raft restores
// its latest snapshot and then replays the log after it, and kvstore skips
// the entries it already applied).
func (f *FSM) restoreKV(r io.Reader, index uint64) error {
	have, err := f.pk.KV.AppliedIndex()
	if err != nil {
		return err
	}
	if have > 0 && have >= index {
		_, err := io.Copy(io.Discard, r)
		return err
	}
	return f.pk.KV.Restore(r)
}

// pkRead checks that a read of the KV state is linearizable: this replica
// leads, its barrier applied every earlier term's entries, and a quorum
// still confirms its leadership after the read arrived (confirmLeadership,
// coalesced). The KV state read afterwards holds every write acknowledged
// before the read started (writes are acknowledged after they are applied)
// and nothing uncommitted (only applied entries reach it).
func (r *Replica) pkRead(ctx context.Context) (*PKConfig, error) {
	if r.cfg.PK == nil {
		return nil, fmt.Errorf("%w: %v belongs to a log table", ErrNotPK, r.cfg.ID)
	}
	if err := r.ServingReads(); err != nil {
		return nil, err
	}
	if r.soleVoter() {
		// No other server can be elected: confirming would answer at once
		// (raft's own single-voter hot path) after a trip through the
		// leader loop; skip the trip.
		return r.cfg.PK, nil
	}
	if err := r.verify.verify(ctx); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%v lookup: %w", r.cfg.ID, ctx.Err())
		}
		if nerr := r.notReadyErr(); nerr != nil && !errors.Is(nerr, ErrNoLeader) {
			return nil, nerr
		}
		return nil, fmt.Errorf("%w: %v: leadership not confirmed: %v; retry", ErrNoLeader, r.cfg.ID, err)
	}
	return r.cfg.PK, nil
}

// soleVoter reports whether this replica is the only voter of its group's
// latest configuration (committed or not: the one raft counts quorums in).
// GetConfiguration does not wait for the raft loop.
func (r *Replica) soleVoter() bool {
	f := r.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	voters := 0
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			if s.ID != r.cfg.LocalID {
				return false
			}
			voters++
		}
	}
	return voters == 1
}

// Lookup returns the stored row value (kvstore row encoding) of each
// encoded primary key (kvstore.Codec.AppendKey), nil where the key has no
// row. Linearizable (pkRead). With maxBytes > 0, rows totalling more than
// maxBytes fail the lookup with ErrTooLarge.
func (r *Replica) Lookup(ctx context.Context, keys [][]byte, maxBytes int) ([][]byte, error) {
	pk, err := r.pkRead(ctx)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(keys))
	if _, err := pk.KV.AppendValues(nil, keys, out, maxBytes); err != nil {
		if errors.Is(err, kvstore.ErrOverBudget) {
			return nil, fmt.Errorf("%w: %v lookup: %w", ErrTooLarge, r.cfg.ID, err)
		}
		return nil, fmt.Errorf("%v lookup: %w", r.cfg.ID, err)
	}
	return out, nil
}

// errLimit stops a scan at its limit.
var errLimit = errors.New("limit reached")

// PrefixScan returns the values (kvstore row encoding) of the rows whose
// encoded key starts with prefix (kvstore.Codec.AppendBucketKey; empty: every
// row), in key order, at most limit (0: no limit). With maxBytes > 0 it
// also stops after the row that takes the values past maxBytes bytes in
// all (so the caller can tell "over" from "exactly"). Linearizable
// (pkRead).
func (r *Replica) PrefixScan(ctx context.Context, prefix []byte, limit, maxBytes int) ([][]byte, error) {
	pk, err := r.pkRead(ctx)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	total := 0
	err = pk.KV.PrefixScan(prefix, func(_, v []byte) error {
		if (limit > 0 && len(out) >= limit) || (maxBytes > 0 && total > maxBytes) {
			return errLimit
		}
		out = append(out, append([]byte(nil), v...))
		total += len(v)
		return nil
	})
	if err != nil && err != errLimit {
		return nil, fmt.Errorf("%v prefix scan: %w", r.cfg.ID, err)
	}
	return out, nil
}
