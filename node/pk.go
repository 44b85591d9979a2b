package node

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"time"

	"github.com/fluss-node/fluss-node/kvstore"
	"github.com/fluss-node/fluss-node/logstore/record"
	"github.com/fluss-node/fluss-node/node/replica"
	"github.com/fluss-node/fluss-node/raftmeta"
	"github.com/fluss-node/fluss-node/rpc"
)

// Primary-key tables: the node's one badger store (<data_dir>/kv, DESIGN
// §11), opened with the first PK replica, and the data-path calls of PK
// buckets, served on the leader or forwarded once like Append and Fetch.

// Node-to-node calls of PK buckets. They reuse bucketReq/bucketResp:
//
//	bucket.pkwrite  Batches = [header, row...]: header = uvarint flags (bit 0:
//	                delete) | uvarint n | n × uvarint target column [| uvarint
//	                schema id]; each row is a kvstore row value of that schema
//	                version. Without the id (a table whose schema never
//	                changed; earlier binaries) the receiver's current one.
//	                WriterID, Seq as Append. Answer: BaseOffset, Count.
//	bucket.lookup   Batches = encoded keys. Answer: Batches = row values, an
//	                empty one where the key has no row (a row value is never empty).
//	bucket.prefix   Batches = [encoded key prefix], MaxBytes = row limit (0: none).
//	                Answer: Batches = row values.
const (
	callBucketPKWrite = "bucket.pkwrite"
	callBucketLookup  = "bucket.lookup"
	callBucketPrefix  = "bucket.prefix"
)

// kvStore returns the node's badger store, opening it on first use.
func (n *Node) kvStore() (*kvstore.Store, error) {
	n.kvMu.Lock()
	defer n.kvMu.Unlock()
	if n.kv != nil {
		return n.kv, nil
	}
	if n.kvClosed {
		return nil, fmt.Errorf("%w: node is closing", replica.ErrClosed)
	}
	st, err := kvstore.Open(filepath.Join(n.cfg.DataDir, "kv"), kvstore.Options{
		MemTableSize:   n.cfg.KV.MemtableBytes,
		BlockCacheSize: n.cfg.KV.BlockCacheBytes,
		IndexCacheSize: n.cfg.KV.IndexCacheBytes,
	})
	if err != nil {
		return nil, err
	}
	n.kv = st
	return st, nil
}

// closeKV closes the badger store (after every replica is closed).
func (n *Node) closeKV() error {
	n.kvMu.Lock()
	defer n.kvMu.Unlock()
	n.kvClosed = true
	if n.kv == nil {
		return nil
	}
	err := n.kv.Close()
	n.kv = nil
	return err
}

// kvPrefix is a bucket replica's key prefix in the node's badger store,
// unique per bucket because the catalog allocates table and partition ids
// densely from 1 and never reuses them. An unpartitioned table's bucket:
// table id (32 bits), 0 (16), bucket (16), top bit clear. A partition's
// bucket (partition ids count up across all tables, one per partition
// ever created, so they get more room): top bit set, table id (23 bits),
// partition id (28), bucket (12; bucket.num is at most 4096).
func kvPrefix(b raftmeta.BucketID) (uint64, error) {
	if b.PartitionID == raftmeta.NoPartition {
		if b.TableID < 0 || b.TableID >= 1<<31 || b.Bucket < 0 || b.Bucket >= 1<<16 {
			return 0, fmt.Errorf("%v does not fit a KV prefix (table < 2^31, bucket < 2^16)", b)
		}
		return uint64(b.TableID)<<32 | uint64(b.Bucket), nil
	}
	if b.TableID < 0 || b.TableID >= 1<<23 || b.PartitionID < 0 || b.PartitionID >= 1<<28 || b.Bucket < 0 || b.Bucket >= 1<<12 {
		return 0, fmt.Errorf("%v of a partition does not fit a KV prefix (table < 2^23, partition < 2^28, bucket < 2^12)", b)
	}
	return 1<<63 | uint64(b.TableID)<<40 | uint64(b.PartitionID)<<12 | uint64(b.Bucket), nil
}

// pkCodec is the key/row codec of a PK table's current schema.
func pkCodec(t *raftmeta.Table) (*kvstore.Codec, error) {
	return kvstore.NewCodec(t.Schema(), t.BucketKeys)
}

// pkConfig builds the PK part of a replica's config (nil for log tables).
func (n *Node) pkConfig(b raftmeta.BucketID) (*replica.PKConfig, error) {
	t, err := n.meta.TableByID(b.TableID)
	if err != nil {
		return nil, err
	}
	if !t.HasPrimaryKey() {
		return nil, nil
	}
	codec, err := pkCodec(t)
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", t.FullName(), err)
	}
	merger, err := kvstore.NewMerger(t.Schema(), t.Properties)
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", t.FullName(), err)
	}
	comp, level, err := t.LogCompression()
	if err != nil {
		return nil, err
	}
	prefix, err := kvPrefix(b)
	if err != nil {
		return nil, err
	}
	st, err := n.kvStore()
	if err != nil {
		return nil, err
	}
	versions := func(id int32) (*replica.PKVersion, error) { return n.pkVersion(b.TableID, id) }
	return &replica.PKConfig{KV: st.Replica(prefix, codec), Merger: merger, Schema: t.Schema(), Versions: versions,
		Compression: comp, ZstdLevel: level}, nil
}

// pkVersion is schema version id of PK table tableID as the catalog holds
// it (0: the latest): replica.ErrSchemaUnknown (wrapped) while it does not,
// or no longer holds the table (a dropped table's replicas wait until they
// close).
func (n *Node) pkVersion(tableID int64, id int32) (*replica.PKVersion, error) {
	t, err := n.meta.TableByID(tableID)
	if err != nil {
		return nil, fmt.Errorf("%w: table %d: %v", replica.ErrSchemaUnknown, tableID, err)
	}
	s := t.Schema()
	if id != 0 {
		s = t.SchemaByID(id)
	}
	if s == nil {
		return nil, fmt.Errorf("%w: table %s has schema versions up to %d, not %d", replica.ErrSchemaUnknown, t.FullName(), t.Schema().ID, id)
	}
	// Built once per catalog version of the table (every forwarded write
	// asks, on both ends).
	return pkVersions.GetErr(pkVersionKey{t, s}, func() (*replica.PKVersion, error) {
		codec, err := kvstore.NewCodec(s, t.BucketKeys)
		if err != nil {
			return nil, fmt.Errorf("table %s schema %d: %w", t.FullName(), s.ID, err)
		}
		merger, err := kvstore.NewMerger(s, t.Properties)
		if err != nil {
			return nil, fmt.Errorf("table %s schema %d: %w", t.FullName(), s.ID, err)
		}
		return &replica.PKVersion{Schema: s, Codec: codec, Merger: merger}, nil
	})
}

// pkVersions caches pkVersion by catalog table (immutable: its bucket keys
// and properties) and schema version.
var pkVersions record.Memo[pkVersionKey, *replica.PKVersion]

type pkVersionKey struct {
	t *raftmeta.Table
	s *record.Schema
}

// upgradeSchema makes the latest schema version of a PK replica's table in
// the catalog its current one (a no-op for log tables), so that its merges
// read rows of that version before any write of it arrives.
func (n *Node) upgradeSchema(r *replica.Replica, b raftmeta.BucketID) {
	id := r.SchemaID()
	if id < 0 {
		return
	}
	t, err := n.meta.TableByID(b.TableID)
	if err != nil || t.Schema().ID <= id {
		return
	}
	if err := r.UpgradeSchema(t.Schema().ID); err != nil {
		n.logger.Warn("schema version of a bucket replica", "table", t.FullName(), "bucket", b.Bucket, "schema", t.Schema().ID, "err", err)
	}
}

// dropKV deletes a removed replica's KV state (a no-op for log tables and
// on nodes that never opened the store).
func (n *Node) dropKV(b raftmeta.BucketID) error {
	n.kvMu.Lock()
	st := n.kv
	n.kvMu.Unlock()
	prefix, err := kvPrefix(b)
	if st == nil || err != nil {
		return nil
	}
	return st.Replica(prefix, nil).Drop()
}

// Write merges a PK write on the bucket leader: here, or forwarded once.
func (n *Node) Write(ctx context.Context, b raftmeta.BucketID, w *rpc.PKWrite, writerID int64, seq int32) (rpc.AppendResult, error) {
	var res rpc.AppendResult
	rw := &replica.PKWrite{Rows: w.Rows, TargetCols: w.TargetCols, Delete: w.Delete, SchemaID: w.SchemaID}
	q := &bucketReq{Bucket: b, WriterID: writerID, Seq: seq}
	if r := n.replica(b); r == nil || !r.IsLeader() {
		// Forwarding needs the rows encoded.
		batches, err := n.encodePKWrite(b, w)
		if err != nil {
			return res, err
		}
		q.Batches = batches
	}
	err := n.route(ctx, b, q, callBucketPKWrite, func(r *replica.Replica) error {
		base, count, err := r.Write(ctx, rw, writerID, seq)
		if err != nil {
			return replicaError(err)
		}
		res = rpc.AppendResult{BaseOffset: base, Count: count}
		return nil
	}, func(p *bucketResp) {
		res = rpc.AppendResult{BaseOffset: p.BaseOffset, Count: p.Count}
	}, false)
	return res, err
}

// LeadsLocally reports whether this node's replica of b leads its group.
func (n *Node) LeadsLocally(b raftmeta.BucketID) bool {
	r := n.replica(b)
	return r != nil && r.IsLeader()
}

// Lookup reads rows by key on the bucket leader: here, or forwarded once.
func (n *Node) Lookup(ctx context.Context, b raftmeta.BucketID, keys [][]byte, maxBytes int) ([][]byte, error) {
	var out [][]byte
	q := &bucketReq{Bucket: b, Batches: keys, MaxBytes: int64(maxBytes)}
	err := n.route(ctx, b, q, callBucketLookup, func(r *replica.Replica) error {
		vals, err := r.Lookup(ctx, keys, maxBytes)
		if err != nil {
			return replicaError(err)
		}
		out = vals
		return nil
	}, func(p *bucketResp) {
		out = make([][]byte, len(p.Batches))
		for i, v := range p.Batches {
			if len(v) > 0 {
				out[i] = v
			}
		}
	}, true)
	if err == nil && len(out) != len(keys) {
		return nil, fmt.Errorf("lookup of %d keys answered %d rows", len(keys), len(out))
	}
	return out, err
}

// PrefixScan reads rows by key prefix on the bucket leader: here, or
// forwarded once.
func (n *Node) PrefixScan(ctx context.Context, b raftmeta.BucketID, prefix []byte, limit, maxBytes int) ([][]byte, error) {
	var out [][]byte
	q := &bucketReq{Bucket: b, Batches: [][]byte{prefix}, MaxBytes: int64(limit), Offset: int64(maxBytes)}
	err := n.route(ctx, b, q, callBucketPrefix, func(r *replica.Replica) error {
		vals, err := r.PrefixScan(ctx, prefix, limit, maxBytes)
		if err != nil {
			return replicaError(err)
		}
		out = vals
		return nil
	}, func(p *bucketResp) { out = p.Batches }, true)
	return out, err
}

// encodePKWrite encodes a PK write for bucket.pkwrite.
func (n *Node) encodePKWrite(b raftmeta.BucketID, w *rpc.PKWrite) ([][]byte, error) {
	t, err := n.meta.TableByID(b.TableID)
	if err != nil {
		return nil, err
	}
	v, err := n.pkVersion(b.TableID, w.SchemaID)
	if err != nil {
		return nil, err
	}
	codec := v.Codec
	flags := uint64(0)
	if w.Delete {
		flags = 1
	}
	hdr := appendUvarint(nil, flags)
	hdr = appendUvarint(hdr, uint64(len(w.TargetCols)))
	for _, c := range w.TargetCols {
		hdr = appendUvarint(hdr, uint64(c))
	}
	if w.SchemaID != 0 && w.SchemaID != t.Schemas[0].ID {
		// Only after AddColumns, which waits for every node to read it
		// (featurePKColumns).
		hdr = appendUvarint(hdr, uint64(w.SchemaID))
	}
	out := make([][]byte, 0, 1+len(w.Rows))
	out = append(out, hdr)
	for _, row := range w.Rows {
		v, err := codec.AppendRow(nil, row)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", raftmeta.ErrInvalid, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// decodePKWrite decodes bucket.pkwrite batches with the codec of their
// schema version, waiting (until ctx ends) for this node's catalog to learn
// a version the sender's had. The rows are copies (they outlive the
// transport's buffer).
func (n *Node) decodePKWrite(ctx context.Context, b raftmeta.BucketID, batches [][]byte) (*replica.PKWrite, error) {
	return decodePKWriteWith(func(id int32) (*kvstore.Codec, error) {
		for {
			v, err := n.pkVersion(b.TableID, id)
			if !errors.Is(err, replica.ErrSchemaUnknown) {
				if err != nil {
					return nil, err
				}
				return v.Codec, nil
			}
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("%w: %w", rpc.ErrCatalogBehind, err)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}, batches)
}

// decodePKWriteWith decodes bucket.pkwrite batches with the codec codecOf
// returns for their schema version (0: none given, the current one). It
// never panics on malformed input.
func decodePKWriteWith(codecOf func(schemaID int32) (*kvstore.Codec, error), batches [][]byte) (*replica.PKWrite, error) {
	if len(batches) < 2 {
		return nil, fmt.Errorf("%w: PK write without rows", ErrBadMessage)
	}
	r := &reader{b: batches[0]}
	w := &replica.PKWrite{Delete: r.uvarint("flags") == 1}
	if k := r.count("target columns", 1); k > 0 {
		w.TargetCols = make([]int, k)
		for i := range w.TargetCols {
			w.TargetCols[i] = int(r.uvarint("target column"))
		}
	}
	if len(r.b) > 0 && r.err == nil {
		id := r.uvarint("schema id")
		if id > math.MaxInt32 {
			return nil, fmt.Errorf("%w: schema id %d", ErrBadMessage, id)
		}
		w.SchemaID = int32(id)
	}
	if err := r.done(); err != nil {
		return nil, err
	}
	codec, err := codecOf(w.SchemaID)
	if err != nil {
		return nil, err
	}
	for i, v := range batches[1:] {
		row, err := codec.DecodeRow(nil, append([]byte(nil), v...))
		if err != nil {
			return nil, fmt.Errorf("%w: row %d: %w", ErrBadMessage, i, err)
		}
		w.Rows = append(w.Rows, row)
	}
	return w, nil
}

// servePK answers a forwarded PK call on the local leading replica r.
func (n *Node) servePK(ctx context.Context, call string, r *replica.Replica, q *bucketReq, p *bucketResp) error {
	switch call {
	case callBucketPKWrite:
		w, err := n.decodePKWrite(ctx, q.Bucket, q.Batches)
		if err != nil {
			return err
		}
		p.BaseOffset, p.Count, err = r.Write(ctx, w, q.WriterID, q.Seq)
		return err
	case callBucketLookup:
		vals, err := r.Lookup(ctx, q.Batches, int(q.MaxBytes))
		if err != nil {
			return err
		}
		p.Batches = make([][]byte, len(vals))
		for i, v := range vals {
			p.Batches[i] = v
			if v == nil {
				p.Batches[i] = []byte{}
			}
		}
		return nil
	case callBucketPrefix:
		if len(q.Batches) != 1 {
			return fmt.Errorf("%w: prefix lookup needs one prefix", ErrBadMessage)
		}
		var err error
		p.Batches, err = r.PrefixScan(ctx, q.Batches[0], int(q.MaxBytes), int(q.Offset))
		return err
	}
	return fmt.Errorf("%w: unknown call %q", ErrBadMessage, call)
}

// pkErrorSentinel maps the PK replica errors onto rpc sentinels.
func pkErrorSentinel(err error) error {
	switch {
	case errors.Is(err, replica.ErrNotPK),
		errors.Is(err, kvstore.ErrDeleteDisabled), errors.Is(err, kvstore.ErrUnsupported):
		return rpc.ErrWrongTableKind
	case errors.Is(err, replica.ErrRejected):
		return raftmeta.ErrInvalid
	case errors.Is(err, replica.ErrSchemaUnknown), errors.Is(err, kvstore.ErrNewerRow):
		return rpc.ErrCatalogBehind
	}
	return nil
}
