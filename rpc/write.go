package rpc

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"connectrpc.com/connect"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/fluss-node/fluss-node/logstore/record"
	"github.com/fluss-node/fluss-node/logstore/record/arrowipc"
	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/raftmeta"
)

// tableCompression returns the table's log compression (default ZSTD level
// 3, as Fluss).
func tableCompression(t *raftmeta.Table) (record.Compression, int, error) {
	c, level, err := t.LogCompression()
	if err != nil {
		return 0, 0, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	return c, level, nil
}

// logTable resolves a table that must be a log table for op.
func (s *service) logTable(ctx context.Context, name, op string) (*raftmeta.Table, error) {
	t, ref, err := s.table(ctx, name)
	if err != nil {
		return nil, err
	}
	if ref.Virtual != "" {
		return nil, fmt.Errorf("%w: %s on %q: $%s is a read-only view (Fetch, Scan)", ErrWrongTableKind, op, name, ref.Virtual)
	}
	if t.HasPrimaryKey() {
		return nil, fmt.Errorf("%w: %s is for log tables; %q is a primary-key table (use Upsert/Delete, Lookup)", ErrWrongTableKind, op, t.FullName())
	}
	return t, nil
}

// pkTable resolves a table that must be a primary-key table for op.
func (s *service) pkTable(ctx context.Context, name, op string) (*raftmeta.Table, error) {
	t, ref, err := s.table(ctx, name)
	if err != nil {
		return nil, err
	}
	if ref.Virtual != "" {
		return nil, fmt.Errorf("%w: %s on %q: $%s is a read-only view (Fetch, Scan); use %s", ErrWrongTableKind, op, name, ref.Virtual, ref.full())
	}
	if !t.HasPrimaryKey() {
		return nil, fmt.Errorf("%w: %s is for primary-key tables; %q is a log table (use Append, Fetch or Scan)", ErrWrongTableKind, op, t.FullName())
	}
	return t, nil
}

// bucketBatches is what one Append stores in one bucket.
type bucketBatches struct {
	part    *raftmeta.Partition // nil for an unpartitioned table
	bucket  int32
	batches [][]byte
	count   int64
}

// Append stores rows (JSON) or an Arrow IPC stream in a log table. Every
// input is decoded, validated and encoded before anything is stored: a bad
// row or batch fails the whole request with nothing written. When the rows
// go to several buckets, the buckets are written concurrently; if one fails
// the request fails, and a retry with the same (writerId, batchSequence)
// stores only what is missing.
func (s *service) Append(ctx context.Context, req *connect.Request[flussv1.AppendRequest]) (*connect.Response[flussv1.AppendResponse], error) {
	m := req.Msg
	t, err := s.logTable(ctx, m.GetTable(), "Append")
	if err != nil {
		return nil, err
	}
	if m.Bucket != nil {
		if err := checkBucket(t, m.GetBucket()); err != nil {
			return nil, err
		}
	}
	var parts []bucketBatches
	switch {
	case len(m.GetRows()) > 0 && len(m.GetArrow()) > 0:
		return nil, fmt.Errorf("%w: send either rows or arrow, not both", ErrInvalidRequest)
	case len(t.PartitionKeys) > 0:
		parts, err = s.preparePartitioned(ctx, t, m)
	case m.GetPartition() != "":
		_, err = s.namedPartition(ctx, t, m.GetPartition())
	case len(m.GetRows()) > 0:
		parts, err = s.prepareJSON(t, m)
	case len(m.GetArrow()) > 0:
		parts, err = s.prepareArrow(t, m)
	default:
		return nil, fmt.Errorf("%w: Append needs rows (a JSON array of objects) or arrow (an Arrow IPC stream)", ErrInvalidRequest)
	}
	if err != nil {
		return nil, err
	}
	results, err := s.store(ctx, t, parts, m.GetWriterId(), m.GetBatchSequence())
	if err != nil {
		return nil, err
	}
	rows := 0
	for _, r := range results {
		rows += int(r.Count)
	}
	s.m.wrote(t, rows, len(m.GetRows())+len(m.GetArrow()))
	return connect.NewResponse(&flussv1.AppendResponse{Results: results}), nil
}

// store proposes every bucket's batches, concurrently when several.
func (s *service) store(ctx context.Context, t *raftmeta.Table, parts []bucketBatches, writerID int64, seq int32) ([]*flussv1.AppendResult, error) {
	results := make([]*flussv1.AppendResult, len(parts))
	errs := make([]error, len(parts))
	one := func(i int) {
		p := parts[i]
		r, err := s.b.Append(ctx, bucketOf(t, p.part, p.bucket), p.batches, writerID, seq)
		if err != nil {
			errs[i] = fmt.Errorf("append to %s: %w", where(t, p.part, p.bucket), err)
			return
		}
		results[i] = &flussv1.AppendResult{Partition: partitionName(p.part), Bucket: p.bucket, BaseOffset: r.BaseOffset, Count: r.Count}
	}
	if len(parts) == 1 {
		one(0)
	} else {
		var wg sync.WaitGroup
		for i := range parts {
			wg.Go(func() { one(i) })
		}
		wg.Wait()
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return results, nil
}

// oneBucket returns the bucket that all of a request's rows go to: the
// requested one, bucket 0 of a one-bucket table, or for a table without
// bucket keys one picked by the server. ok is false when the rows are split
// by bucket key (splitByBucketKey).
//
// An idempotent request (writer id set) without a bucket goes to the bucket
// its (writer id, batch sequence) hashes to, so that a retry lands where
// the first attempt is remembered and is not stored twice (buckets dedupe
// on their own); other requests rotate over the buckets.
func (s *service) oneBucket(t *raftmeta.Table, m *flussv1.AppendRequest) (b int32, ok bool) {
	switch {
	case m.Bucket != nil:
		return m.GetBucket(), true
	case t.BucketCount <= 1:
		return 0, true
	case len(t.BucketKeys) == 0 && m.GetWriterId() != 0:
		return int32(writerBucketHash(m.GetWriterId(), m.GetBatchSequence()) % uint64(t.BucketCount)), true
	case len(t.BucketKeys) == 0:
		return int32(s.rr.Add(1) % uint32(t.BucketCount)), true
	}
	return 0, false
}

// writerBucketHash mixes a writer id and batch sequence (splitmix64's
// finalizer), so that one writer's consecutive requests spread over the
// buckets.
func writerBucketHash(writerID int64, seq int32) uint64 {
	x := uint64(writerID)*0x9e3779b97f4a7c15 + uint64(uint32(seq))
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// splitByBucketKey splits rec by the table's bucket key, for a request
// oneBucket has no single bucket for. The returned records are owned by the
// caller.
func splitByBucketKey(t *raftmeta.Table, rec arrow.Record) (map[int32]arrow.Record, error) {
	sch := t.Schema()
	keys := make([]int, len(t.BucketKeys))
	for i, k := range t.BucketKeys {
		if keys[i] = sch.Index(k); keys[i] < 0 {
			return nil, fmt.Errorf("table %s: bucket key %q is not a column", t.FullName(), k)
		}
	}
	return splitByBucket(rec, keys, t.BucketCount)
}

func (s *service) checkRows(n int64) error {
	if n > int64(s.lim.MaxRowsPerRequest) {
		return fmt.Errorf("%w: %d rows in one request is over max_rows_per_request (%d); split the request", ErrResourceExhausted, n, s.lim.MaxRowsPerRequest)
	}
	return nil
}

func (s *service) checkBatch(t *raftmeta.Table, bucket int32, n int) error {
	if n > s.lim.MaxBatchBytes {
		return fmt.Errorf("%w: a batch of %d bytes for %s bucket %d is over max_batch_bytes (%d); send fewer rows per request", ErrResourceExhausted, n, t.FullName(), bucket, s.lim.MaxBatchBytes)
	}
	return nil
}

func (s *service) prepareJSON(t *raftmeta.Table, m *flussv1.AppendRequest) ([]bucketBatches, error) {
	sch := t.Schema()
	comp, level, err := tableCompression(t)
	if err != nil {
		return nil, err
	}
	rows, err := record.DecodeJSON(sch, m.GetRows())
	if err != nil {
		return nil, fmt.Errorf("rows for %s: %w", t.FullName(), err)
	}
	defer rows.Release()
	if err := s.checkRows(int64(rows.Len())); err != nil {
		return nil, err
	}
	if b, ok := s.oneBucket(t, m); ok {
		// All rows go to one bucket: no split, no map, and no record (the
		// batch is encoded from the decoded column buffers).
		if rows.Len() == 0 {
			return nil, nil
		}
		batch, err := encodeBatch(rows, sch.ID, comp, level, m.GetWriterId(), m.GetBatchSequence())
		if err != nil {
			return nil, err
		}
		if err := s.checkBatch(t, b, len(batch)); err != nil {
			return nil, err
		}
		return []bucketBatches{{bucket: b, batches: [][]byte{batch}, count: int64(rows.Len())}}, nil
	}
	rec := rows.Record(memory.DefaultAllocator)
	defer rec.Release()
	split, err := splitByBucketKey(t, rec)
	if err != nil {
		return nil, err
	}
	var out []bucketBatches
	err = encodeSplit(split, sch.ID, comp, level, m, func(b int32, batch []byte, n int64) error {
		if err := s.checkBatch(t, b, len(batch)); err != nil {
			return err
		}
		out = append(out, bucketBatches{bucket: b, batches: [][]byte{batch}, count: n})
		return nil
	})
	return out, err
}

// encodeSplit encodes each bucket's record of split as one batch, in
// bucket order, hands it to add, and releases the records.
func encodeSplit(split map[int32]arrow.Record, schemaID int32, comp record.Compression, level int, m *flussv1.AppendRequest, add func(b int32, batch []byte, n int64) error) error {
	defer releaseAll(split)
	for _, b := range sortedBuckets(split) {
		part := split[b]
		if part.NumRows() == 0 {
			continue
		}
		batch, err := encodeBatch(recordSource{part}, schemaID, comp, level, m.GetWriterId(), m.GetBatchSequence())
		if err != nil {
			return err
		}
		if err := add(b, batch, part.NumRows()); err != nil {
			return err
		}
	}
	return nil
}

// smallBatchRows: batches with fewer rows are stored uncompressed.
// Compressing a handful of values saves a few bytes and costs a codec
// set-up per buffer, which dominated the CPU of 1-row appends.
const smallBatchRows = 32

// batchSource is what encodeBatch encodes: an Arrow record (recordSource)
// or JSON rows still in the decoder's column buffers (record.JSONRows).
type batchSource interface {
	Len() int
	SizeHint() int
	AppendBatch(dst []byte, h record.BatchHeader, c record.Compression, zstdLevel int) ([]byte, error)
}

type recordSource struct{ rec arrow.Record }

func (r recordSource) Len() int      { return int(r.rec.NumRows()) }
func (r recordSource) SizeHint() int { return record.BatchSizeHint(r.rec) }
func (r recordSource) AppendBatch(dst []byte, h record.BatchHeader, c record.Compression, zstdLevel int) ([]byte, error) {
	return record.AppendRecordBatch(dst, h, r.rec, c, zstdLevel)
}

func encodeBatch[S batchSource](src S, schemaID int32, comp record.Compression, level int, writerID int64, seq int32) ([]byte, error) {
	if src.Len() < smallBatchRows {
		comp = record.CompressionNone
	}
	h := record.BatchHeader{
		RecordCount:   int32(src.Len()),
		WriterID:      writerID,
		BatchSequence: seq,
		SchemaID:      schemaID,
	}
	// Header, stats and body in one buffer: a 1-row batch of a few
	// columns is well under 1 KiB.
	batch, err := src.AppendBatch(make([]byte, 0, src.SizeHint()), h, comp, level)
	if err != nil {
		return nil, fmt.Errorf("encode batch: %w", err)
	}
	if cap(batch) > 2*len(batch)+4096 {
		// Compressed well under the hint: do not keep the spare capacity.
		batch = bytes.Clone(batch)
	}
	return batch, nil
}

// prepareArrow checks a client's Arrow IPC stream against the table and
// keeps the client's record-batch messages as they are (DESIGN §7: no
// recompression). Every batch is decoded once to validate it (buffer
// bounds, NOT NULL) and to compute its stats. Without a bucket on a
// multi-bucket table with bucket keys, batches are split by key and
// re-encoded: clients should send per-bucket streams. So are batches whose
// dictionary-encoded columns differ from the table's (arrowSent).
func (s *service) prepareArrow(t *raftmeta.Table, m *flussv1.AppendRequest) ([]bucketBatches, error) {
	in, msgs, err := arrowInput(t, m.GetArrow())
	if err != nil {
		return nil, err
	}
	sch := in.sch
	var total int64
	fixed, whole := s.oneBucket(t, m)
	byBucket := map[int32]*bucketBatches{}
	add := func(b int32, batch []byte, n int64) error {
		if err := s.checkBatch(t, b, len(batch)); err != nil {
			return err
		}
		p := byBucket[b]
		if p == nil {
			p = &bucketBatches{bucket: b}
			byBucket[b] = p
		}
		p.batches = append(p.batches, batch)
		p.count += n
		return nil
	}
	comp, level, err := tableCompression(t)
	if err != nil {
		return nil, err
	}
	for i, msg := range msgs {
		rec, err := decodeArrowBatch(t, in, i, msg)
		if err != nil {
			return nil, err
		}
		err = func() error {
			defer rec.Release()
			n := rec.NumRows()
			if n == 0 {
				return nil
			}
			total += n
			if err := s.checkRows(total); err != nil {
				return err
			}
			if whole && in.sent != nil {
				// Dictionary-encoded columns on either side: store the
				// table's encoding, with the table's compression.
				batch, err := encodeBatch(recordSource{rec}, sch.ID, comp, level, m.GetWriterId(), m.GetBatchSequence())
				if err != nil {
					return err
				}
				return add(fixed, batch, n)
			}
			if whole {
				h := record.BatchHeader{
					RecordCount:   int32(n),
					WriterID:      m.GetWriterId(),
					BatchSequence: m.GetBatchSequence(),
					SchemaID:      sch.ID,
				}
				return add(fixed, record.AppendBatch(nil, h, record.ComputeStats(rec), msg), n)
			}
			parts, err := splitByBucketKey(t, rec)
			if err != nil {
				return err
			}
			return encodeSplit(parts, sch.ID, comp, level, m, add)
		}()
		if err != nil {
			return nil, err
		}
	}
	out := make([]bucketBatches, 0, len(byBucket))
	for _, p := range byBucket {
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b bucketBatches) int { return int(a.bucket - b.bucket) })
	return out, nil
}

// arrowInput splits a client's Arrow IPC stream and checks its schema
// against the table: it returns the table's schema version the stream
// matches (a writer that has not seen the latest AlterTable still writes;
// its batches name the version they match) and the record-batch messages.
func arrowInput(t *raftmeta.Table, stream []byte) (arrowSent, [][]byte, error) {
	schemaMsg, msgs, err := arrowipc.SplitStream(stream)
	if err != nil {
		return arrowSent{}, nil, fmt.Errorf("%w: arrow for %s: %w", ErrInvalidRequest, t.FullName(), err)
	}
	got, err := readSchemaMessage(schemaMsg)
	if err != nil {
		return arrowSent{}, nil, fmt.Errorf("%w: arrow for %s: schema message: %v", ErrInvalidRequest, t.FullName(), err)
	}
	sch := schemaVersionOf(t, got)
	if err := sameFields(sch, got); err != nil {
		return arrowSent{}, nil, fmt.Errorf("%w: arrow for %s: %v", ErrInvalidRequest, t.FullName(), err)
	}
	in := arrowSent{sch: sch}
	if (record.HasDictionaries(got) || record.StoredSchema(sch.ArrowSchema()) != sch.ArrowSchema()) && !storedForm(sch, got, schemaMsg) {
		in.sent = got
	}
	return in, msgs, nil
}

// arrowSent is the table schema version a client's stream matches, and,
// when either has dictionary-encoded columns and the stream does not
// encode them exactly as the table stores them, the stream's own Arrow
// schema: its batches are then decoded with it and stored re-encoded.
type arrowSent struct {
	sch  *record.Schema
	sent *arrow.Schema
}

// storedForm reports whether a client's schema (which sameFields
// accepted), decoded from schemaMsg, has the Arrow types of sch's stored
// batches, dictionary ids included, so that its batches can be stored as
// they are.
func storedForm(sch *record.Schema, got *arrow.Schema, schemaMsg []byte) bool {
	stored := record.StoredSchema(sch.ArrowSchema())
	for i := range stored.NumFields() {
		if !arrow.TypeEqual(got.Field(i).Type, stored.Field(i).Type) {
			return false
		}
	}
	mine, err := layoutOf(sch)
	if err != nil {
		return false
	}
	theirs, err := arrowipc.LayoutOf(schemaMsg)
	if err != nil {
		return false
	}
	for i := range stored.NumFields() {
		a, aok := mine.DictionaryID(i)
		b, bok := theirs.DictionaryID(i)
		if a != b || aok != bok {
			return false
		}
	}
	return true
}

// decodeArrowBatch decodes and validates (buffer bounds, NOT NULL) record
// batch i of a client's stream. The caller releases the record.
func decodeArrowBatch(t *raftmeta.Table, in arrowSent, i int, msg []byte) (arrow.Record, error) {
	sch := in.sch
	var rec arrow.Record
	var err error
	if in.sent != nil {
		rec, err = record.DecodeBodyAs(sch.ArrowSchema(), in.sent, msg, memory.DefaultAllocator)
	} else {
		// Possibly stored as sent: it must have the layout that
		// projected reads of it will need, not only be readable.
		var layout *arrowipc.Layout
		if layout, err = layoutOf(sch); err == nil {
			if err = arrowipc.CheckBody(msg, layout); err == nil {
				rec, err = record.DecodeBody(sch.ArrowSchema(), msg, memory.DefaultAllocator)
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%w: arrow for %s: record batch %d: %v", ErrInvalidRequest, t.FullName(), i, err)
	}
	if err := record.ValidateRecord(sch, rec); err != nil {
		rec.Release()
		return nil, fmt.Errorf("%w: arrow for %s: record batch %d: %v", ErrInvalidRequest, t.FullName(), i, err)
	}
	return rec, nil
}

// preparePartitioned is prepareJSON and prepareArrow for a partitioned
// table: rows go to the partition their partition-key values name
// (created when it does not exist, unless the request names a partition,
// which then must hold every row), then to buckets as in an unpartitioned
// table. Every batch is re-encoded.
func (s *service) preparePartitioned(ctx context.Context, t *raftmeta.Table, m *flussv1.AppendRequest) ([]bucketBatches, error) {
	var fixed *raftmeta.Partition
	missing := createMissing
	if m.GetPartition() != "" {
		p, err := s.namedPartition(ctx, t, m.GetPartition())
		if err != nil {
			return nil, err
		}
		fixed, missing = p, keepMissing
	}
	sch := t.Schema()
	var recs []arrow.Record
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	switch {
	case len(m.GetRows()) > 0:
		rows, err := record.DecodeJSON(sch, m.GetRows())
		if err != nil {
			return nil, fmt.Errorf("rows for %s: %w", t.FullName(), err)
		}
		recs = append(recs, rows.Record(memory.DefaultAllocator))
		rows.Release()
	case len(m.GetArrow()) > 0:
		in, msgs, err := arrowInput(t, m.GetArrow())
		if err != nil {
			return nil, err
		}
		sch = in.sch
		for i, msg := range msgs {
			rec, err := decodeArrowBatch(t, in, i, msg)
			if err != nil {
				return nil, err
			}
			recs = append(recs, rec)
		}
	default:
		return nil, fmt.Errorf("%w: Append needs rows (a JSON array of objects) or arrow (an Arrow IPC stream)", ErrInvalidRequest)
	}
	var total int64
	for _, rec := range recs {
		total += rec.NumRows()
	}
	if err := s.checkRows(total); err != nil {
		return nil, err
	}
	comp, level, err := tableCompression(t)
	if err != nil {
		return nil, err
	}
	byBucket := map[raftmeta.BucketID]*bucketBatches{}
	var order []raftmeta.BucketID
	for _, rec := range recs {
		groups, err := s.partitionRows(ctx, t, rec, missing)
		if err != nil {
			return nil, err
		}
		for _, g := range groups {
			if fixed != nil && g.name != fixed.Name {
				return nil, fmt.Errorf("%w: row %d belongs to partition %s of %s, not to %s, which the request names", ErrInvalidRequest, g.rows[0], g.name, t.FullName(), fixed.Name)
			}
			if fixed != nil {
				g.part = fixed
			}
			sub, err := takeAll(rec, g.rows)
			if err != nil {
				return nil, err
			}
			var split map[int32]arrow.Record
			if b, ok := s.oneBucket(t, m); ok {
				split = map[int32]arrow.Record{b: sub}
			} else {
				split, err = splitByBucketKey(t, sub)
				sub.Release()
				if err != nil {
					return nil, err
				}
			}
			err = encodeSplit(split, sch.ID, comp, level, m, func(b int32, batch []byte, n int64) error {
				if err := s.checkBatch(t, b, len(batch)); err != nil {
					return err
				}
				id := bucketOf(t, g.part, b)
				p := byBucket[id]
				if p == nil {
					p = &bucketBatches{part: g.part, bucket: b}
					byBucket[id] = p
					order = append(order, id)
				}
				p.batches = append(p.batches, batch)
				p.count += n
				return nil
			})
			if err != nil {
				return nil, err
			}
		}
	}
	out := make([]bucketBatches, len(order))
	for i, id := range order {
		out[i] = *byBucket[id]
	}
	return out, nil
}

// schemaVersionOf returns the table's schema version with as many columns
// as got (versions only append columns, so at most one has), or the latest
// when none has, for sameFields to explain the mismatch.
func schemaVersionOf(t *raftmeta.Table, got *arrow.Schema) *record.Schema {
	for i := len(t.Schemas) - 1; i >= 0; i-- {
		if len(t.Schemas[i].Columns) == got.NumFields() {
			return t.Schemas[i]
		}
	}
	return t.Schema()
}

// arrowSchemas caches parsed schema messages by their bytes: a writer sends
// the same schema message with every request, and parsing it was ~7 of the
// ~48 µs prepareArrow spent on a 1-row Arrow append. The messages are
// a client's bytes, so the cache is bounded in both entries and key size:
// at most 256 x 16 KiB.
var arrowSchemas = record.Memo[string, *arrow.Schema]{Max: 256}

const arrowSchemaCacheMax = 16 << 10

// readSchemaMessage decodes a client's encapsulated schema message with
// arrow-go, after arrowipc.LayoutOf has checked that every length arrow-go
// trusts lies inside it (arrow-go would allocate whatever a length says).
func readSchemaMessage(msg []byte) (*arrow.Schema, error) {
	parse := func() (s *arrow.Schema, err error) {
		if _, err := arrowipc.LayoutOf(msg); err != nil {
			return nil, err
		}
		defer func() {
			if p := recover(); p != nil {
				s, err = nil, fmt.Errorf("arrow-go could not read it: %v", p)
			}
		}()
		var buf bytes.Buffer
		buf.Write(msg)
		buf.Write(record.StreamSuffix)
		r, err := ipc.NewReader(&buf)
		if err != nil {
			return nil, err
		}
		defer r.Release()
		return r.Schema(), nil
	}
	if len(msg) > arrowSchemaCacheMax {
		return parse()
	}
	return arrowSchemas.GetErr(string(msg), parse)
}

// sameFields checks that an Arrow schema has the table's columns, in
// order, with the table's Arrow types. Nullability flags are not compared:
// NOT NULL is checked on the values.
func sameFields(s *record.Schema, got *arrow.Schema) error {
	if got.NumFields() != len(s.Columns) {
		return fmt.Errorf("stream has %d columns, the table has %d (%s)", got.NumFields(), len(s.Columns), columnList(s))
	}
	for i, c := range s.Columns {
		f := got.Field(i)
		if f.Name != c.Name {
			return fmt.Errorf("stream column %d is %q, the table's is %q (%s)", i, f.Name, c.Name, columnList(s))
		}
		want := c.Type.ArrowType()
		if dt, ok := f.Type.(*arrow.DictionaryType); ok && arrow.TypeEqual(dt.ValueType, want) {
			continue // decoded by DecodeBodyAs, which checks the indices
		}
		if !arrow.TypeEqual(f.Type, want) {
			return fmt.Errorf("column %q has Arrow type %s, the table's %s needs %s (or a dictionary of it)", c.Name, f.Type, c.Type, want)
		}
	}
	return nil
}

func columnList(s *record.Schema) string {
	var b strings.Builder
	for i, c := range s.Columns {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(c.Name)
		b.WriteByte(' ')
		b.WriteString(c.Type.String())
	}
	return b.String()
}

func sortedBuckets(m map[int32]arrow.Record) []int32 {
	out := make([]int32, 0, len(m))
	for b := range m {
		out = append(out, b)
	}
	slices.Sort(out)
	return out
}

func releaseAll(m map[int32]arrow.Record) {
	for _, r := range m {
		r.Release()
	}
}
