package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"connectrpc.com/connect"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/fluss-node/fluss-node/kvstore"
	"github.com/fluss-node/fluss-node/logstore/record"
	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/raftmeta"
)

// Primary-key tables: Upsert, Delete, Lookup, PrefixLookup and LimitScan.
// Every input is decoded and validated (types, NOT NULL, key columns)
// before anything is sent to a bucket: a bad row fails the whole request
// with nothing written. Rows are bucketed by the table's bucket key with
// the same hash as log tables (record.BucketOf).

// pkCodecs caches per catalog table (tables are immutable) its KV codec and
// the writer of whole rows, which every Lookup without a projection uses.
var pkCodecs record.Memo[*raftmeta.Table, *pkCached]

type pkCached struct {
	codec *kvstore.Codec
	all   *rowWriter
}

func pkCachedOf(t *raftmeta.Table) (*pkCached, error) {
	return pkCodecs.GetErr(t, func() (*pkCached, error) {
		codec, err := kvstore.NewCodec(t.Schema(), t.BucketKeys)
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", t.FullName(), err)
		}
		return &pkCached{codec: codec, all: projectRows(t, codec, nil)}, nil
	})
}

// columnIndexes resolves column names of t (what names them: "targetColumns",
// "columns") to schema indexes, in the given order, without duplicates.
func columnIndexes(t *raftmeta.Table, names []string, what string) ([]int, error) {
	sch := t.Schema()
	out := make([]int, 0, len(names))
	for _, n := range names {
		i := sch.Index(n)
		if i < 0 {
			return nil, fmt.Errorf("%w: unknown column %q in %s; table %s has: %s", ErrInvalidRequest, n, what, t.FullName(), columnList(sch))
		}
		if !slices.Contains(out, i) {
			out = append(out, i)
		}
	}
	return out, nil
}

// keyIndexes returns the schema indexes of the named columns (known to exist).
func keyIndexes(s *record.Schema, names []string) []int {
	out := make([]int, len(names))
	for i, n := range names {
		out[i] = s.Index(n)
	}
	return out
}

// bucketRows is the part of a PK request for one bucket.
type bucketRows struct {
	part   *raftmeta.Partition // nil for an unpartitioned table
	bucket int32
	rows   []kvstore.Row
}

// splitRows converts rec to rows and groups them by bucket of partition
// part, keeping the request order within each bucket.
func splitRows(t *raftmeta.Table, part *raftmeta.Partition, rec arrow.Record) ([]bucketRows, error) {
	sch := t.Schema()
	rows, err := kvstore.RowsFromRecord(nil, sch, rec)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	if t.BucketCount <= 1 {
		return []bucketRows{{part: part, bucket: 0, rows: rows}}, nil
	}
	keys := keyIndexes(sch, t.BucketKeys)
	byBucket := map[int32]*bucketRows{}
	var order []int32
	for i, r := range rows {
		b := record.BucketOf(rec, i, keys, t.BucketCount)
		p := byBucket[b]
		if p == nil {
			p = &bucketRows{part: part, bucket: b}
			byBucket[b] = p
			order = append(order, b)
		}
		p.rows = append(p.rows, r)
	}
	slices.Sort(order)
	out := make([]bucketRows, len(order))
	for i, b := range order {
		out[i] = *byBucket[b]
	}
	return out, nil
}

// Upsert inserts or updates rows of a primary-key table through its merge
// engine. With targetColumns it is a partial update: only those columns
// (which must include the primary key) change.
func (s *service) Upsert(ctx context.Context, req *connect.Request[flussv1.UpsertRequest]) (*connect.Response[flussv1.UpsertResponse], error) {
	m := req.Msg
	t, err := s.pkTable(ctx, m.GetTable(), "Upsert")
	if err != nil {
		return nil, err
	}
	if len(m.GetRows()) == 0 {
		return nil, fmt.Errorf("%w: Upsert needs rows (a JSON array of objects)", ErrInvalidRequest)
	}
	sch := t.Schema()
	var target []int
	var rec arrow.Record
	if len(m.GetTargetColumns()) > 0 {
		if target, err = columnIndexes(t, m.GetTargetColumns(), "targetColumns"); err != nil {
			return nil, err
		}
		for _, k := range sch.PrimaryKey {
			if !slices.Contains(target, sch.Index(k)) {
				return nil, fmt.Errorf("%w: targetColumns of a partial update must include every primary-key column; %q is missing", ErrInvalidRequest, k)
			}
		}
		slices.Sort(target)
		rec, err = record.DecodeJSONRowsPartial(sch, m.GetRows(), target, memory.DefaultAllocator)
	} else {
		rec, err = record.DecodeJSONRows(sch, m.GetRows(), memory.DefaultAllocator)
	}
	if err != nil {
		return nil, fmt.Errorf("rows for %s: %w", t.FullName(), err)
	}
	defer rec.Release()
	results, err := s.writePK(ctx, t, rec, &PKWrite{TargetCols: target}, m.GetWriterId(), m.GetBatchSequence(), createMissing)
	if err != nil {
		return nil, err
	}
	s.m.wrote(t, int(rec.NumRows()), len(m.GetRows()))
	return connect.NewResponse(&flussv1.UpsertResponse{Results: results}), nil
}

// Delete deletes rows of a primary-key table by key: each key object holds
// the primary-key columns.
func (s *service) Delete(ctx context.Context, req *connect.Request[flussv1.DeleteRequest]) (*connect.Response[flussv1.DeleteResponse], error) {
	m := req.Msg
	t, err := s.pkTable(ctx, m.GetTable(), "Delete")
	if err != nil {
		return nil, err
	}
	rec, err := s.decodeKeys(t, m.GetKeys(), t.Schema().PrimaryKey, "Delete", "keys")
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	results, err := s.writePK(ctx, t, rec, &PKWrite{Delete: true}, m.GetWriterId(), m.GetBatchSequence(), keepMissing)
	if err != nil {
		return nil, err
	}
	s.m.wrote(t, int(rec.NumRows()), len(m.GetKeys()))
	return connect.NewResponse(&flussv1.DeleteResponse{Results: results}), nil
}

// decodeKeys decodes key objects holding exactly the named columns.
func (s *service) decodeKeys(t *raftmeta.Table, keys []byte, cols []string, op, field string) (arrow.Record, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: %s needs %s (a JSON array of objects with the columns %v)", ErrInvalidRequest, op, field, cols)
	}
	rec, err := record.DecodeJSONRowsPartial(t.Schema(), keys, keyIndexes(t.Schema(), cols), memory.DefaultAllocator)
	if err != nil {
		return nil, fmt.Errorf("%s of %s (objects with the columns %v): %w", field, t.FullName(), cols, err)
	}
	if err := s.checkRows(rec.NumRows()); err != nil {
		rec.Release()
		return nil, err
	}
	return rec, nil
}

// pkParts groups the rows of rec by partition (see partitionRows; rows of
// a partition that does not exist are left out with keepMissing) and
// bucket.
func (s *service) pkParts(ctx context.Context, t *raftmeta.Table, rec arrow.Record, missing onMissing) ([]bucketRows, error) {
	if len(t.PartitionKeys) == 0 {
		return splitRows(t, nil, rec)
	}
	groups, err := s.partitionRows(ctx, t, rec, missing)
	if err != nil {
		return nil, err
	}
	var out []bucketRows
	for _, g := range groups {
		if g.part == nil {
			continue
		}
		sub, err := takeAll(rec, g.rows)
		if err != nil {
			return nil, err
		}
		parts, err := splitRows(t, g.part, sub)
		sub.Release()
		if err != nil {
			return nil, err
		}
		out = append(out, parts...)
	}
	return out, nil
}

// writePK sends each bucket's rows of rec as one PK write, concurrently.
func (s *service) writePK(ctx context.Context, t *raftmeta.Table, rec arrow.Record, w *PKWrite, writerID int64, seq int32, missing onMissing) ([]*flussv1.WriteResult, error) {
	if err := s.checkRows(rec.NumRows()); err != nil {
		return nil, err
	}
	parts, err := s.pkParts(ctx, t, rec, missing)
	if err != nil {
		return nil, err
	}
	results := make([]*flussv1.WriteResult, len(parts))
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Go(func() {
			pw := &PKWrite{Rows: p.rows, TargetCols: w.TargetCols, Delete: w.Delete, SchemaID: t.Schema().ID}
			res, err := s.b.Write(ctx, bucketOf(t, p.part, p.bucket), pw, writerID, seq)
			if err != nil {
				errs[i] = fmt.Errorf("write to %s: %w", where(t, p.part, p.bucket), err)
				return
			}
			results[i] = &flussv1.WriteResult{Partition: partitionName(p.part), Bucket: p.bucket,
				Count: int32(len(p.rows)), ChangelogRecords: res.Count}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return results, nil
}

// rowWriter renders stored row values as JSON objects with the requested
// columns, in the form the log read path writes (record.AppendJSONValue).
type rowWriter struct {
	t     *raftmeta.Table
	codec *kvstore.Codec
	cols  []int    // output columns (schema indexes); all when none were asked
	keys  [][]byte // `"name":` per output column
	// keysLen is the bytes of keys with a separator each.
	keysLen int
}

// newRowWriter returns the writer of columns of t (all when none are named;
// that one is cached).
func newRowWriter(t *raftmeta.Table, columns []string) (*rowWriter, error) {
	c, err := pkCachedOf(t)
	if err != nil {
		return nil, err
	}
	if len(columns) == 0 {
		return c.all, nil
	}
	cols, err := columnIndexes(t, columns, "columns")
	if err != nil {
		return nil, err
	}
	return projectRows(t, c.codec, cols), nil
}

// projectRows makes the writer of the columns cols of t (nil: all).
func projectRows(t *raftmeta.Table, codec *kvstore.Codec, cols []int) *rowWriter {
	w := &rowWriter{t: t, codec: codec, cols: cols}
	sch := t.Schema()
	if cols == nil {
		for i := range sch.Columns {
			w.cols = append(w.cols, i)
		}
	}
	for _, c := range w.cols {
		k, _ := json.Marshal(sch.Columns[c].Name)
		w.keys = append(w.keys, append(k, ':'))
		w.keysLen += len(k) + 2 // with the comma and a brace
	}
	return w
}

// openArray returns a buffer holding '[' with room for the JSON array of
// vals, so that rendering it does not grow the buffer: a stored value
// renders in about twice its bytes, plus the column names.
func (w *rowWriter) openArray(vals [][]byte) []byte {
	n := 2
	for _, v := range vals {
		n += 2*len(v) + w.keysLen + 8
	}
	return append(make([]byte, 0, n), '[')
}

// appendObjects appends one JSON value per value of vals to dst as members
// of an open array (comma-separated): the row object, or null where the
// value is nil. Safe for concurrent use.
func (w *rowWriter) appendObjects(dst []byte, vals [][]byte, first bool) ([]byte, error) {
	sch := w.t.Schema()
	var row kvstore.Row
	for _, v := range vals {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		if v == nil {
			dst = append(dst, "null"...)
			continue
		}
		var err error
		if row, err = w.codec.DecodeRow(row, v); err != nil {
			if errors.Is(err, kvstore.ErrNewerRow) {
				// Written through a node whose catalog already had a later
				// AlterTable than this one's.
				return nil, fmt.Errorf("%w: a row of %s: %v; retry", ErrCatalogBehind, w.t.FullName(), err)
			}
			return nil, fmt.Errorf("stored row of %s: %w", w.t.FullName(), err)
		}
		dst = append(dst, '{')
		for k, c := range w.cols {
			if k > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, w.keys[k]...)
			if x := row[c]; x.Null {
				dst = append(dst, "null"...)
			} else {
				dst = record.AppendJSONValue(dst, sch.Columns[c].Type, x.I, x.Hi, x.F, x.B)
			}
		}
		dst = append(dst, '}')
	}
	return dst, nil
}

// Lookup returns the current row of each key, in key order (null where the
// key has no row). Keys of one bucket go to its leader in one call.
func (s *service) Lookup(ctx context.Context, req *connect.Request[flussv1.LookupRequest]) (*connect.Response[flussv1.LookupResponse], error) {
	m := req.Msg
	t, err := s.pkTable(ctx, m.GetTable(), "Lookup")
	if err != nil {
		return nil, err
	}
	w, err := newRowWriter(t, m.GetColumns())
	if err != nil {
		return nil, err
	}
	rec, err := s.decodeKeys(t, m.GetKeys(), t.Schema().PrimaryKey, "Lookup", "keys")
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	n := int(rec.NumRows())
	encoded := make([][]byte, n)
	var buf []byte // one buffer for all keys, each a full slice of it
	for i := range n {
		start := len(buf)
		if buf, err = w.codec.AppendRecordKey(buf, rec, i); err != nil {
			return nil, fmt.Errorf("%w: key %d: %w", ErrInvalidRequest, i, err)
		}
		encoded[i] = buf[start:len(buf):len(buf)]
	}
	byBucket, err := s.keyBuckets(ctx, t, rec, t.BucketKeys)
	if err != nil {
		return nil, err
	}
	vals := make([][]byte, n)
	// One budget of max_fetch_bytes stored row bytes for the whole answer.
	var left atomic.Int64
	left.Store(int64(s.lim.MaxFetchBytes))
	overBudget := func() error {
		return fmt.Errorf("%w: the rows of these keys hold more than max_fetch_bytes (%d bytes); ask for fewer keys per request", ErrResourceExhausted, s.lim.MaxFetchBytes)
	}
	err = s.perBucket(byBucket, func(b raftmeta.BucketID, idx []int) error {
		keys := make([][]byte, len(idx))
		for j, i := range idx {
			keys[j] = encoded[i]
		}
		budget := left.Load()
		if budget <= 0 {
			return overBudget()
		}
		got, err := s.b.Lookup(ctx, b, keys, int(budget))
		if errors.Is(err, ErrResourceExhausted) {
			return overBudget()
		}
		if err != nil {
			return fmt.Errorf("lookup in %s: %w", s.bucketName(ctx, t, b), err)
		}
		if left.Add(-int64(valueBytes(got))) < 0 {
			return overBudget()
		}
		for j, i := range idx {
			vals[i] = got[j]
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out, err := w.appendObjects(w.openArray(vals), vals, true)
	if err != nil {
		return nil, err
	}
	s.m.lookedUp(t, n)
	return connect.NewResponse(&flussv1.LookupResponse{Rows: append(out, ']')}), nil
}

// valueBytes is the total length of vals.
func valueBytes(vals [][]byte) int {
	n := 0
	for _, v := range vals {
		n += len(v)
	}
	return n
}

// keyBuckets groups the rows of rec (keys or prefixes of t) by the bucket
// that holds them, hashing the columns keys. Rows of a partitioned table go
// to the partition their partition-key columns name; rows of a partition
// that does not exist are in no group (nothing is stored for them).
func (s *service) keyBuckets(ctx context.Context, t *raftmeta.Table, rec arrow.Record, keys []string) (map[raftmeta.BucketID][]int, error) {
	cols := keyIndexes(t.Schema(), keys)
	out := map[raftmeta.BucketID][]int{}
	add := func(p *raftmeta.Partition, i int) {
		b := int32(0)
		if t.BucketCount > 1 {
			b = record.BucketOf(rec, i, cols, t.BucketCount)
		}
		id := bucketOf(t, p, b)
		out[id] = append(out[id], i)
	}
	if len(t.PartitionKeys) == 0 {
		for i := range int(rec.NumRows()) {
			add(nil, i)
		}
		return out, nil
	}
	groups, err := s.partitionRows(ctx, t, rec, keepMissing)
	if err != nil {
		return nil, err
	}
	for _, g := range groups {
		if g.part == nil {
			continue
		}
		for _, i := range g.rows {
			add(g.part, i)
		}
	}
	return out, nil
}

// bucketName names bucket b of t for an error message.
func (s *service) bucketName(ctx context.Context, t *raftmeta.Table, b raftmeta.BucketID) string {
	if b.PartitionID == raftmeta.NoPartition {
		return where(t, nil, b.Bucket)
	}
	if ps, err := s.b.Partitions(ctx, t.ID); err == nil {
		for _, p := range ps {
			if p.ID == b.PartitionID {
				return where(t, p, b.Bucket)
			}
		}
	}
	return fmt.Sprintf("%s partition id %d bucket %d", t.FullName(), b.PartitionID, b.Bucket)
}

// perBucket runs fn for every bucket of parts and returns the first error.
// Buckets led elsewhere run concurrently (each waits on a forwarded call);
// buckets led here run one after the other on this goroutine: they are
// short CPU work, cheaper done in turn than each on a fresh goroutine whose
// stack must grow to the KV store's depth.
func (s *service) perBucket(parts map[raftmeta.BucketID][]int, fn func(b raftmeta.BucketID, idx []int) error) error {
	if len(parts) == 1 { // the common 1-key lookup
		for b, idx := range parts {
			return fn(b, idx)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(parts))
	var here []raftmeta.BucketID
	for b, idx := range parts {
		if s.b.LeadsLocally(b) {
			here = append(here, b)
			continue
		}
		wg.Go(func() { errs <- fn(b, idx) })
	}
	for _, b := range here {
		errs <- fn(b, parts[b])
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// PrefixLookup returns, per prefix (an object with the bucket-key
// columns), every row whose key starts with it. All rows of one prefix
// live in one bucket, adjacent in the KV store: one seek each. The prefixes
// of a bucket are scanned in turn (buckets led elsewhere concurrently, as
// Lookup), and a request whose prefixes match more than
// max_rows_per_request rows in all is refused (resource_exhausted) rather
// than answered in part.
func (s *service) PrefixLookup(ctx context.Context, req *connect.Request[flussv1.PrefixLookupRequest]) (*connect.Response[flussv1.PrefixLookupResponse], error) {
	m := req.Msg
	t, err := s.pkTable(ctx, m.GetTable(), "PrefixLookup")
	if err != nil {
		return nil, err
	}
	sch := t.Schema()
	if len(t.BucketKeys)+len(t.PartitionKeys) >= len(sch.PrimaryKey) {
		return nil, fmt.Errorf("%w: PrefixLookup needs a bucket key that is a strict prefix of the primary key (without partition keys); %s has bucket key %v and primary key %v (use Lookup)", ErrWrongTableKind, t.FullName(), t.BucketKeys, sch.PrimaryKey)
	}
	w, err := newRowWriter(t, m.GetColumns())
	if err != nil {
		return nil, err
	}
	// A partitioned table's prefixes also name their partition.
	cols := append(slices.Clip(t.BucketKeys), t.PartitionKeys...)
	rec, err := s.decodeKeys(t, m.GetPrefixes(), cols, "PrefixLookup", "prefixes")
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	prefixes := make([][]byte, rec.NumRows())
	for i := range prefixes {
		if prefixes[i], err = w.codec.AppendRecordBucketKey(nil, rec, i); err != nil {
			return nil, fmt.Errorf("%w: prefix %d: %w", ErrInvalidRequest, i, err)
		}
	}
	byBucket, err := s.keyBuckets(ctx, t, rec, t.BucketKeys)
	if err != nil {
		return nil, err
	}
	// One budget of max_rows_per_request rows for the whole answer; a scan
	// asks for one row more than is left, to tell "exactly the rest" from
	// "over".
	// Likewise one budget of max_fetch_bytes stored row bytes, the scan
	// stopping after the row that goes past it.
	var left, bytesLeft atomic.Int64
	left.Store(int64(s.lim.MaxRowsPerRequest))
	bytesLeft.Store(int64(s.lim.MaxFetchBytes))
	results := make([]*flussv1.PrefixLookupResult, len(prefixes))
	err = s.perBucket(byBucket, func(b raftmeta.BucketID, idx []int) error {
		for _, i := range idx {
			budget := left.Load()
			got, err := s.b.PrefixScan(ctx, b, prefixes[i], int(max(budget, 0))+1, int(max(bytesLeft.Load(), 1)))
			if err != nil {
				return fmt.Errorf("prefix lookup in %s: %w", s.bucketName(ctx, t, b), err)
			}
			if left.Add(-int64(len(got))) < 0 {
				return fmt.Errorf("%w: the prefixes match more than max_rows_per_request (%d) rows; ask for fewer prefixes per request", ErrResourceExhausted, s.lim.MaxRowsPerRequest)
			}
			if bytesLeft.Add(-int64(valueBytes(got))) < 0 {
				return fmt.Errorf("%w: the rows of these prefixes hold more than max_fetch_bytes (%d bytes); ask for fewer prefixes per request", ErrResourceExhausted, s.lim.MaxFetchBytes)
			}
			out, err := w.appendObjects(w.openArray(got), got, true)
			if err != nil {
				return err
			}
			results[i] = &flussv1.PrefixLookupResult{Rows: append(out, ']')}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i, r := range results {
		if r == nil { // its partition does not exist
			results[i] = &flussv1.PrefixLookupResult{Rows: []byte("[]")}
		}
	}
	s.m.lookedUp(t, len(prefixes))
	return connect.NewResponse(&flussv1.PrefixLookupResponse{Results: results}), nil
}

// LimitScan returns up to limit rows: for a primary-key table its current
// rows in key order, bucket by bucket; for a log table the latest rows of
// each bucket (at most limit in all).
func (s *service) LimitScan(ctx context.Context, req *connect.Request[flussv1.LimitScanRequest]) (*connect.Response[flussv1.LimitScanResponse], error) {
	m := req.Msg
	t, _, err := s.table(ctx, m.GetTable())
	if err != nil {
		return nil, err
	}
	p, err := s.namedPartition(ctx, t, m.GetPartition())
	if err != nil {
		return nil, err
	}
	limit := int(m.GetLimit())
	if limit <= 0 {
		return nil, fmt.Errorf("%w: limit %d must be at least 1", ErrInvalidRequest, m.GetLimit())
	}
	if limit > s.lim.MaxRowsPerRequest {
		return nil, fmt.Errorf("%w: limit %d is over max_rows_per_request (%d)", ErrResourceExhausted, limit, s.lim.MaxRowsPerRequest)
	}
	var bs []int32
	if m.Bucket != nil {
		bs, err = buckets(t, []int32{m.GetBucket()})
	} else {
		bs, err = buckets(t, nil)
	}
	if err != nil {
		return nil, err
	}
	if !t.HasPrimaryKey() {
		rows, err := s.latestRows(ctx, t, p, bs, limit)
		if err != nil {
			return nil, err
		}
		return connect.NewResponse(&flussv1.LimitScanResponse{Rows: rows}), nil
	}
	w, err := newRowWriter(t, nil)
	if err != nil {
		return nil, err
	}
	// At most max_fetch_bytes stored row bytes (but at least one row), as
	// Fetch's maxBytes: the answer may hold fewer than limit rows.
	out := []byte{'['}
	n, size := 0, 0
	for _, b := range bs {
		if n >= limit || size >= s.lim.MaxFetchBytes {
			break
		}
		vals, err := s.b.PrefixScan(ctx, bucketOf(t, p, b), nil, limit-n, s.lim.MaxFetchBytes-size)
		if err != nil {
			return nil, fmt.Errorf("limit scan of %s: %w", where(t, p, b), err)
		}
		for i, v := range vals {
			if size+len(v) > s.lim.MaxFetchBytes && n+i > 0 {
				vals = vals[:i]
				size = s.lim.MaxFetchBytes // full
				break
			}
			size += len(v)
		}
		if len(vals) == 0 {
			continue
		}
		if out, err = w.appendObjects(out, vals, n == 0); err != nil {
			return nil, err
		}
		n += len(vals)
	}
	return connect.NewResponse(&flussv1.LimitScanResponse{Rows: append(out, ']')}), nil
}

// latestRows reads the last rows of each bucket of a log table, at most
// limit in all (the earlier buckets first).
func (s *service) latestRows(ctx context.Context, t *raftmeta.Table, p *raftmeta.Partition, bs []int32, limit int) ([]byte, error) {
	plan, err := newReadPlan(t, viewLog, nil, "", flussv1.Format_JSON)
	if err != nil {
		return nil, err
	}
	maxBytes, _ := s.fetchLimits(0, 0)
	out := []byte{'['}
	n := 0
	for _, b := range bs {
		if n >= limit {
			break
		}
		bid := bucketOf(t, p, b)
		hw, err := s.b.ListOffset(ctx, bid, OffsetLatest, 0)
		if err != nil {
			return nil, fmt.Errorf("limit scan of %s: %w", where(t, p, b), err)
		}
		start, err := s.b.ListOffset(ctx, bid, OffsetEarliest, 0)
		if err != nil {
			return nil, fmt.Errorf("limit scan of %s: %w", where(t, p, b), err)
		}
		off := max(start, hw-int64(limit-n))
		for off < hw && n < limit {
			res, err := s.b.Fetch(ctx, bid, off, maxBytes, 0)
			if err != nil {
				return nil, fmt.Errorf("limit scan of %s: %w", where(t, p, b), err)
			}
			o, err := plan.convert(res.Batches, off, limit-n, maxBytes)
			if err != nil {
				return nil, err
			}
			if o.records > 0 {
				rows := o.rows[1 : len(o.rows)-1]
				if n > 0 {
					out = append(out, ',')
				}
				out = append(out, rows...)
				n += o.records
			}
			if o.nextOffset == off || len(out) >= maxBytes {
				break
			}
			off = o.nextOffset
		}
		if len(out) >= maxBytes {
			break // as much as one Fetch answers: enough
		}
	}
	return append(out, ']'), nil
}
