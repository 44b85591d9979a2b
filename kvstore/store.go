package kvstore

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync/atomic"

	badger "github.com/dgraph-io/badger/v4"
)

// Options size the node's badger DB. Defaults are sized for many bucket
// replicas per node sharing one DB: one small memtable set and one small
// block cache serve every replica, instead of badger's per-DB defaults
// (64 MiB memtables, 256 MiB block cache) that assume one hot table.
type Options struct {
	// MemTableSize is the size of one memtable in bytes. Default 16 MiB.
	// It also bounds one Apply: badger rejects a txn larger than ~15% of it
	// (ErrTxnTooBig), about 2.4 MiB at the default.
	MemTableSize int64
	// NumMemtables is how many memtables may be held in memory. Default 3.
	NumMemtables int
	// BlockCacheSize is the shared SST block cache in bytes. Default 32 MiB.
	BlockCacheSize int64
	// IndexCacheSize bounds the in-memory SST indexes and bloom filters in
	// bytes (0 keeps all in memory). Default 16 MiB.
	IndexCacheSize int64
	// ValueThreshold: values up to this size live in the LSM tree, larger
	// ones in the value log. Default 1 KiB.
	ValueThreshold int64
	// ValueLogFileSize is the size of one value-log file. Default 64 MiB.
	ValueLogFileSize int64
	// NumCompactors is the number of compaction goroutines. Default 2.
	NumCompactors int
	// SyncWrites fsyncs every Apply. Default false: the Raft log is the
	// durable record and replays anything after the stored applied index.
	SyncWrites bool
	// InMemory keeps everything in memory (tests).
	InMemory bool
}

// DefaultOptions returns the defaults documented on Options.
func DefaultOptions() Options {
	return Options{
		MemTableSize:     16 << 20,
		NumMemtables:     3,
		BlockCacheSize:   32 << 20,
		IndexCacheSize:   16 << 20,
		ValueThreshold:   1 << 10,
		ValueLogFileSize: 64 << 20,
		NumCompactors:    2,
	}
}

// Store is the node's single badger DB holding every bucket replica's
// primary-key state, each under its own 8-byte prefix.
type Store struct {
	db       *badger.DB
	maxValue int // MaxValueBytes of its replicas
}

// MaxKeyBytes is the most bytes a row's primary key may take encoded.
// badger refuses a key over 65,000 bytes (ours add a 9-byte prefix) when
// the batch commits; 16 KiB leaves room and keeps the LSM's in-memory
// index small.
const MaxKeyBytes = 16 << 10

// ErrRowTooLarge wraps a row whose encoded key or value is over the
// replica's limits (Replica.CheckRow).
var ErrRowTooLarge = errors.New("kvstore: row too large")

// ErrOverBudget wraps a read whose answer would be over the byte budget
// its caller gave.
var ErrOverBudget = errors.New("kvstore: answer over its byte budget")

// withDefaults replaces zero fields of o by DefaultOptions' values.
func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.MemTableSize <= 0 {
		o.MemTableSize = d.MemTableSize
	}
	if o.NumMemtables <= 0 {
		o.NumMemtables = d.NumMemtables
	}
	if o.BlockCacheSize <= 0 {
		o.BlockCacheSize = d.BlockCacheSize // badger requires a block cache with compression on
	}
	if o.IndexCacheSize < 0 {
		o.IndexCacheSize = 0
	}
	if o.ValueThreshold <= 0 {
		o.ValueThreshold = d.ValueThreshold
	}
	if o.ValueLogFileSize <= 0 {
		o.ValueLogFileSize = d.ValueLogFileSize
	}
	if o.NumCompactors < 2 {
		o.NumCompactors = d.NumCompactors // badger needs at least 2
	}
	return o
}

// Open opens (creating if needed) the badger DB in dir. Zero fields of o take
// their DefaultOptions value.
func Open(dir string, o Options) (s *Store, err error) {
	o = o.withDefaults()
	defer func() {
		// badger panics on option combinations it rejects; report them.
		if p := recover(); p != nil {
			s, err = nil, fmt.Errorf("kvstore: open badger in %q: invalid options: %v", dir, p)
		}
	}()
	bo := badger.DefaultOptions(dir).
		WithLogger(nil).
		WithMemTableSize(o.MemTableSize).
		WithNumMemtables(o.NumMemtables).
		WithBlockCacheSize(o.BlockCacheSize).
		WithIndexCacheSize(o.IndexCacheSize).
		WithValueThreshold(o.ValueThreshold).
		WithValueLogFileSize(o.ValueLogFileSize).
		WithNumCompactors(o.NumCompactors).
		WithSyncWrites(o.SyncWrites).
		WithInMemory(o.InMemory)
	if o.InMemory {
		bo = bo.WithDir("").WithValueDir("")
	}
	db, err := badger.Open(bo)
	if err != nil {
		return nil, fmt.Errorf("kvstore: open badger in %q: %w", dir, err)
	}
	// badger refuses a value larger than a value-log file, or, in memory
	// (no value log), larger than the value threshold.
	maxValue := min(16<<20, o.ValueLogFileSize/2)
	if o.InMemory {
		maxValue = min(maxValue, o.ValueThreshold)
	}
	return &Store{db: db, maxValue: int(maxValue)}, nil
}

// Close closes the DB. Replicas must not be used afterwards.
func (s *Store) Close() error { return s.db.Close() }

// Namespaces under a replica prefix (FORMAT.md).
const (
	nsMeta byte = 0
	nsRow  byte = 1
)

var appliedIndexName = []byte("applied_index")

// Replica is one bucket replica's view of the Store. Apply, Restore and Drop
// are called by the replica's single FSM goroutine; Get, PrefixScan,
// AppliedIndex and Snapshot may run concurrently with them and see a
// consistent point-in-time view (one badger read txn each).
type Replica struct {
	db       *badger.DB
	codec    atomic.Pointer[Codec] // only ever replaced by a wider one (SetCodec)
	prefix   [8]byte
	maxValue int
}

// Replica returns the handle of the replica with the given prefix (unique
// per bucket replica on this node; the caller allocates it).
func (s *Store) Replica(prefix uint64, c *Codec) *Replica {
	r := &Replica{db: s.db, maxValue: s.maxValue}
	r.codec.Store(c)
	binary.BigEndian.PutUint64(r.prefix[:], prefix)
	return r
}

// Codec returns the replica's codec: the latest schema version it was
// given (SetCodec).
func (r *Replica) Codec() *Codec { return r.codec.Load() }

// SetCodec makes c the replica's codec if its schema has more columns than
// the current one's (columns are only appended, so the wider schema is the
// later version); otherwise it keeps the current one. Rows written by
// earlier versions read with NULL for the columns added since.
func (r *Replica) SetCodec(c *Codec) {
	for {
		cur := r.codec.Load()
		if cur != nil && len(c.kinds) <= len(cur.kinds) {
			return
		}
		if r.codec.CompareAndSwap(cur, c) {
			return
		}
	}
}

// MaxValueBytes is the most bytes a row may take encoded as a value: half a
// value-log file, at most 16 MiB (the value threshold for an in-memory
// store).
func (r *Replica) MaxValueBytes() int { return r.maxValue }

// CheckKey reports, wrapping ErrRowTooLarge, a primary key (encoded) over
// MaxKeyBytes: Apply would fail on it, and a lookup cannot find it.
func CheckKey(key []byte) error {
	if len(key) > MaxKeyBytes {
		return fmt.Errorf("%w: its primary key is %d bytes encoded, over the limit of %d", ErrRowTooLarge, len(key), MaxKeyBytes)
	}
	return nil
}

// CheckRow reports, wrapping ErrRowTooLarge, a row (nil for a delete) that
// encodes to more than MaxValueBytes: Apply would fail on it. The leader
// checks every key and row it proposes, so a committed changelog always
// applies. c is the codec of the row's schema version (the encoding is the
// same through any later one); scratch is reused for the encoding and
// returned.
func (r *Replica) CheckRow(c *Codec, row Row, scratch []byte) ([]byte, error) {
	if row == nil {
		return scratch, nil
	}
	scratch, err := c.AppendRow(scratch[:0], row)
	if err != nil {
		return scratch, err
	}
	if len(scratch) > r.maxValue {
		return scratch, fmt.Errorf("%w: the row is %d bytes encoded, over the limit of %d", ErrRowTooLarge, len(scratch), r.maxValue)
	}
	return scratch, nil
}

func (r *Replica) rowKey(dst, key []byte) []byte {
	dst = append(dst, r.prefix[:]...)
	dst = append(dst, nsRow)
	return append(dst, key...)
}

func (r *Replica) metaKey() []byte {
	k := append(r.prefix[:0:0], r.prefix[:]...)
	k = append(k, nsMeta)
	return append(k, appliedIndexName...)
}

// Get returns the row stored under the encoded primary key (Codec.AppendKey),
// or ok=false when absent. The returned row does not alias badger memory.
func (r *Replica) Get(key []byte) (row Row, ok bool, err error) {
	v, ok, err := r.AppendValue(nil, key)
	if err != nil || !ok {
		return nil, false, err
	}
	row, err = r.Codec().DecodeRow(nil, v)
	if err != nil {
		return nil, false, fmt.Errorf("kvstore: get: %w", err)
	}
	return row, true, nil
}

// AppendValue appends the encoded row value stored under key to dst (the
// allocation-free lookup path); ok=false when absent.
func (r *Replica) AppendValue(dst, key []byte) (out []byte, ok bool, err error) {
	var val [1][]byte
	out, err = r.AppendValues(dst, [][]byte{key}, val[:], 0)
	return out, val[0] != nil, err
}

// AppendValues looks up keys in one read view: it appends the encoded row
// value of each found key to dst and sets vals[i] (len(keys) of them) to
// it, or to nil when keys[i] has no row. Slices set earlier keep pointing
// into dst's earlier arrays when dst grows; append never overwrites those.
// With maxBytes > 0 it stops with ErrOverBudget once the values appended
// total more than maxBytes.
func (r *Replica) AppendValues(dst []byte, keys, vals [][]byte, maxBytes int) ([]byte, error) {
	var buf [128]byte
	out := dst
	err := r.db.View(func(txn *badger.Txn) error {
		for i, key := range keys {
			vals[i] = nil
			item, err := txn.Get(r.rowKey(buf[:0], key))
			if errors.Is(err, badger.ErrKeyNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			start := len(out)
			if err := item.Value(func(v []byte) error {
				out = append(out, v...)
				return nil
			}); err != nil {
				return err
			}
			vals[i] = out[start:len(out):len(out)]
			if maxBytes > 0 && len(out)-len(dst) > maxBytes {
				return fmt.Errorf("%w: the rows of %d of %d keys hold more than %d bytes", ErrOverBudget, i+1, len(keys), maxBytes)
			}
		}
		return nil
	})
	if err != nil {
		return dst, fmt.Errorf("kvstore: get: %w", err)
	}
	return out, nil
}

// PrefixScan calls fn, in key order, for every row whose encoded key starts
// with keyPrefix (for example Codec.AppendBucketKey: all rows of one bucket
// key, found with one seek). key and value are the encoded key (without the
// replica prefix) and row value; both are valid only during the call. A
// non-nil error from fn stops the scan and is returned.
func (r *Replica) PrefixScan(keyPrefix []byte, fn func(key, value []byte) error) error {
	p := r.rowKey(nil, keyPrefix)
	skip := len(r.prefix) + 1
	return r.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: p})
		defer it.Close()
		for it.Seek(p); it.ValidForPrefix(p); it.Next() {
			item := it.Item()
			k := item.Key()
			if err := item.Value(func(v []byte) error { return fn(k[skip:], v) }); err != nil {
				return err
			}
		}
		return nil
	})
}

// AppliedIndex returns the Raft index of the last applied changelog batch
// (0 for a new or half-restored replica).
func (r *Replica) AppliedIndex() (uint64, error) {
	var idx uint64
	err := r.db.View(func(txn *badger.Txn) error {
		var err error
		idx, err = readIndex(txn, r.metaKey())
		return err
	})
	return idx, err
}

// SetAppliedIndex records index as the Raft index of the last applied
// batch, whatever it was: a bucket restored from another group's state
// (node/replica seed) continues under the new group's indexes.
func (r *Replica) SetAppliedIndex(index uint64) error {
	var ib [8]byte
	binary.BigEndian.PutUint64(ib[:], index)
	if err := r.db.Update(func(txn *badger.Txn) error { return txn.Set(r.metaKey(), ib[:]) }); err != nil {
		return fmt.Errorf("kvstore: set applied index: %w", err)
	}
	return nil
}

func readIndex(txn *badger.Txn, k []byte) (uint64, error) {
	item, err := txn.Get(k)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("kvstore: read applied index: %w", err)
	}
	var idx uint64
	err = item.Value(func(v []byte) error {
		if len(v) != 8 {
			return fmt.Errorf("%w: applied index is %d bytes", ErrCorrupt, len(v))
		}
		idx = binary.BigEndian.Uint64(v)
		return nil
	})
	return idx, err
}

// Apply writes one changelog batch and its Raft index: +I/+U put the row,
// -D deletes its key, -U writes nothing (the +U that follows overwrites
// it). A batch whose index is <= AppliedIndex is already applied and is
// skipped (replay after restart). Normally one badger txn holds the batch
// and the index. A batch too large for one txn (badger's ErrTxnTooBig) is
// committed in several, the index in the last: a crash in between leaves
// AppliedIndex below the batch, whose replay rewrites the same final values
// (puts and deletes are absolute). Apply is deterministic.
func (r *Replica) Apply(changes []Change, appliedIndex uint64) error {
	if err := r.apply(changes, appliedIndex); err != nil {
		return fmt.Errorf("kvstore: apply index %d: %w", appliedIndex, err)
	}
	return nil
}

func (r *Replica) apply(changes []Change, appliedIndex uint64) error {
	mk := r.metaKey()
	txn := r.db.NewTransaction(true)
	defer func() { txn.Discard() }()
	cur, err := readIndex(txn, mk)
	if err != nil {
		return err
	}
	if appliedIndex <= cur {
		return nil
	}
	// One arena for every key and value: badger keeps the slices until
	// commit, and appending never moves bytes already handed out (a growing
	// append copies to a new array).
	arena := make([]byte, 0, len(changes)*64)
	codec := r.Codec()
	for i, c := range changes {
		start := len(arena)
		arena = append(arena, r.prefix[:]...)
		arena = append(arena, nsRow)
		if arena, err = codec.AppendKey(arena, c.Row); err != nil {
			return fmt.Errorf("change %d: %w", i, err)
		}
		k := arena[start:len(arena):len(arena)]
		var v []byte
		switch c.Type {
		case Insert, UpdateAfter:
			vstart := len(arena)
			if arena, err = codec.AppendRow(arena, c.Row); err != nil {
				return fmt.Errorf("change %d: %w", i, err)
			}
			v = arena[vstart:len(arena):len(arena)]
		case Delete:
		case UpdateBefore:
			continue
		default:
			return fmt.Errorf("%w: change %d has type %v", ErrCorrupt, i, c.Type)
		}
		op := func() error {
			if v == nil {
				return txn.Delete(k)
			}
			return txn.Set(k, v)
		}
		if err = op(); errors.Is(err, badger.ErrTxnTooBig) {
			if err = txn.Commit(); err != nil {
				return err
			}
			txn = r.db.NewTransaction(true)
			err = op()
		}
		if err != nil {
			return fmt.Errorf("change %d: %w", i, err)
		}
	}
	var ib [8]byte
	binary.BigEndian.PutUint64(ib[:], appliedIndex)
	if err = txn.Set(mk, ib[:]); errors.Is(err, badger.ErrTxnTooBig) {
		if err = txn.Commit(); err != nil {
			return err
		}
		txn = r.db.NewTransaction(true)
		err = txn.Set(mk, ib[:])
	}
	if err != nil {
		return err
	}
	return txn.Commit()
}

// Snapshot stream format (FORMAT.md "Snapshot").
var snapMagic = []byte("FKVS\x01")

// Snapshot streams every key of the replica (rows and applied index), as of
// one read txn, to w (FORMAT.md "Snapshot").
func (r *Replica) Snapshot(w io.Writer) error {
	snap := r.NewSnapshot()
	defer snap.Release()
	_, err := snap.WriteTo(w)
	return err
}

// Snapshot is a point-in-time view of one replica (a badger read txn), for
// the hashicorp FSM split: take it in FSM.Snapshot (cheap, on the FSM
// goroutine), write it in Persist (any goroutine) while Apply continues,
// and Release it in FSMSnapshot.Release.
type Snapshot struct {
	r   *Replica
	txn *badger.Txn
}

// NewSnapshot captures the replica's current state. The caller must call
// Release; a held Snapshot keeps old versions from being compacted away.
func (r *Replica) NewSnapshot() *Snapshot {
	return &Snapshot{r: r, txn: r.db.NewTransaction(false)}
}

// Release discards the snapshot's read txn. Safe to call twice.
func (s *Snapshot) Release() {
	if s.txn != nil {
		s.txn.Discard()
		s.txn = nil
	}
}

// WriteTo writes the snapshot stream to w and returns the bytes written.
func (s *Snapshot) WriteTo(w io.Writer) (int64, error) {
	if s.txn == nil {
		return 0, fmt.Errorf("kvstore: snapshot already released")
	}
	cw := &countWriter{w: w}
	bw := bufio.NewWriterSize(cw, 64<<10)
	crc := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	out := io.MultiWriter(bw, crc)
	pfx := s.r.prefix[:]
	err := func() error {
		if _, err := out.Write(snapMagic); err != nil {
			return err
		}
		var hdr []byte
		it := s.txn.NewIterator(badger.IteratorOptions{Prefix: pfx, PrefetchValues: true, PrefetchSize: 64})
		defer it.Close()
		for it.Seek(pfx); it.ValidForPrefix(pfx); it.Next() {
			item := it.Item()
			k := item.Key()[len(pfx):]
			err := item.Value(func(v []byte) error {
				hdr = binary.AppendUvarint(hdr[:0], uint64(len(k))+1)
				hdr = binary.AppendUvarint(hdr, uint64(len(v)))
				if _, err := out.Write(hdr); err != nil {
					return err
				}
				if _, err := out.Write(k); err != nil {
					return err
				}
				_, err := out.Write(v)
				return err
			})
			if err != nil {
				return err
			}
		}
		return nil
	}()
	if err == nil {
		_, err = out.Write([]byte{0})
	}
	if err == nil {
		_, err = bw.Write(binary.BigEndian.AppendUint32(nil, crc.Sum32()))
	}
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		return cw.n, fmt.Errorf("kvstore: snapshot: %w", err)
	}
	return cw.n, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

type kv struct{ k, v []byte }

// maxSnapshotEntry bounds one key or value in a snapshot stream.
const maxSnapshotEntry = 256 << 20

// readSnapshot parses and verifies a whole snapshot stream.
func readSnapshot(r io.Reader) ([]kv, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	crc := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	tr := io.TeeReader(br, crc)
	magic := make([]byte, len(snapMagic))
	if _, err := io.ReadFull(tr, magic); err != nil || !bytes.Equal(magic, snapMagic) {
		return nil, fmt.Errorf("%w: snapshot: bad magic", ErrCorrupt)
	}
	byteR := &teeByteReader{r: tr}
	var out []kv
	for {
		kl, err := binary.ReadUvarint(byteR)
		if err != nil {
			return nil, fmt.Errorf("%w: snapshot: entry header: %v", ErrCorrupt, err)
		}
		if kl == 0 {
			break
		}
		vl, err := binary.ReadUvarint(byteR)
		if err != nil || kl-1 > maxSnapshotEntry || vl > maxSnapshotEntry {
			return nil, fmt.Errorf("%w: snapshot: entry lengths", ErrCorrupt)
		}
		buf := make([]byte, kl-1+vl)
		if _, err := io.ReadFull(tr, buf); err != nil {
			return nil, fmt.Errorf("%w: snapshot: truncated entry: %v", ErrCorrupt, err)
		}
		out = append(out, kv{buf[:kl-1], buf[kl-1:]})
	}
	sum := crc.Sum32()
	var tail [4]byte
	if _, err := io.ReadFull(br, tail[:]); err != nil || binary.BigEndian.Uint32(tail[:]) != sum {
		return nil, fmt.Errorf("%w: snapshot: checksum mismatch", ErrCorrupt)
	}
	return out, nil
}

type teeByteReader struct {
	r io.Reader
	b [1]byte
}

func (t *teeByteReader) ReadByte() (byte, error) {
	if _, err := io.ReadFull(t.r, t.b[:]); err != nil {
		return 0, err
	}
	return t.b[0], nil
}

// Restore replaces the replica's keys wholesale with a Snapshot stream. The
// stream is verified (checksum) before anything is touched. The applied
// index is deleted first and written last, so an interrupted Restore leaves
// AppliedIndex()==0 and the caller restores again.
func (r *Replica) Restore(rd io.Reader) error {
	entries, err := readSnapshot(rd)
	if err != nil {
		return err
	}
	if err := r.Drop(); err != nil {
		return err
	}
	wb := r.db.NewWriteBatch()
	defer wb.Cancel()
	var meta []kv
	for _, e := range entries {
		if len(e.k) > 0 && e.k[0] == nsMeta {
			meta = append(meta, e)
			continue
		}
		if err := wb.Set(append(r.prefix[:len(r.prefix):len(r.prefix)], e.k...), e.v); err != nil {
			return fmt.Errorf("kvstore: restore: %w", err)
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("kvstore: restore: %w", err)
	}
	err = r.db.Update(func(txn *badger.Txn) error {
		for _, e := range meta {
			if err := txn.Set(append(r.prefix[:len(r.prefix):len(r.prefix)], e.k...), e.v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("kvstore: restore: %w", err)
	}
	return nil
}

// Drop deletes every key of the replica: the applied index first, then the
// rows in batches. It iterates keys rather than using badger's DropPrefix,
// which would block writes of every other replica on the node.
func (r *Replica) Drop() error {
	if err := r.db.Update(func(txn *badger.Txn) error { return txn.Delete(r.metaKey()) }); err != nil {
		return fmt.Errorf("kvstore: drop: %w", err)
	}
	wb := r.db.NewWriteBatch()
	defer wb.Cancel()
	err := r.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: r.prefix[:]})
		defer it.Close()
		for it.Seek(r.prefix[:]); it.ValidForPrefix(r.prefix[:]); it.Next() {
			if err := wb.Delete(it.Item().KeyCopy(nil)); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		err = wb.Flush()
	}
	if err != nil {
		return fmt.Errorf("kvstore: drop: %w", err)
	}
	return nil
}

// Reader is a point-in-time view of one replica for many point reads: one
// badger read txn instead of one per Get. It sees the state applied when it
// was created and nothing applied later. Not safe for concurrent use.
type Reader struct {
	r     *Replica
	codec *Codec // the replica's when the Reader opened
	txn   *badger.Txn
	key   []byte
}

// NewReader opens a Reader; Close releases it. It decodes rows with the
// replica's codec as of now (Codec): a caller that set a wider one (SetCodec)
// before it applied rows of that version reads them all.
func (r *Replica) NewReader() *Reader {
	return &Reader{r: r, codec: r.Codec(), txn: r.db.NewTransaction(false)}
}

// Codec is the codec the Reader decodes rows with.
func (rd *Reader) Codec() *Codec { return rd.codec }

// Get returns the row stored under the encoded primary key, or ok=false.
// The row does not alias badger memory.
func (rd *Reader) Get(key []byte) (row Row, ok bool, err error) {
	rd.key = rd.r.rowKey(rd.key[:0], key)
	item, err := rd.txn.Get(rd.key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("kvstore: get: %w", err)
	}
	v, err := item.ValueCopy(nil)
	if err != nil {
		return nil, false, fmt.Errorf("kvstore: get: %w", err)
	}
	if row, err = rd.codec.DecodeRow(nil, v); err != nil {
		return nil, false, fmt.Errorf("kvstore: get: %w", err)
	}
	return row, true, nil
}

// Close discards the read txn. Safe to call twice.
func (rd *Reader) Close() {
	if rd.txn != nil {
		rd.txn.Discard()
		rd.txn = nil
	}
}
