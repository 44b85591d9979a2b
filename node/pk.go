package node

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/fluss-node/fluss-node/kvstore"
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
//	                delete) | uvarint n | n × uvarint target column; each row is
//	                a kvstore row value of the table's current schema.
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
	return &replica.PKConfig{KV: st.Replica(prefix, codec), Merger: merger, Schema: t.Schema(), Compression: comp, ZstdLevel: level}, nil
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
	rw := &replica.PKWrite{Rows: w.Rows, TargetCols: w.TargetCols, Delete: w.Delete}
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

// codecOf is the KV codec of the table of bucket b.
func (n *Node) codecOf(b raftmeta.BucketID) (*kvstore.Codec, error) {
	t, err := n.meta.TableByID(b.TableID)
	if err != nil {
		return nil, err
	}
	return pkCodec(t)
}

// encodePKWrite encodes a PK write for bucket.pkwrite.
func (n *Node) encodePKWrite(b raftmeta.BucketID, w *rpc.PKWrite) ([][]byte, error) {
	codec, err := n.codecOf(b)
	if err != nil {
		return nil, err
	}
	flags := uint64(0)
	if w.Delete {
		flags = 1
	}
	hdr := appendUvarint(nil, flags)
	hdr = appendUvarint(hdr, uint64(len(w.TargetCols)))
	for _, c := range w.TargetCols {
		hdr = appendUvarint(hdr, uint64(c))
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

// decodePKWrite decodes bucket.pkwrite batches with the table's codec. The
// rows are copies (they outlive the transport's buffer).
func (n *Node) decodePKWrite(b raftmeta.BucketID, batches [][]byte) (*replica.PKWrite, error) {
	codec, err := n.codecOf(b)
	if err != nil {
		return nil, err
	}
	return decodePKWriteWith(codec, batches)
}

// decodePKWriteWith decodes bucket.pkwrite batches with codec. It never
// panics on malformed input.
func decodePKWriteWith(codec *kvstore.Codec, batches [][]byte) (*replica.PKWrite, error) {
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
	if err := r.done(); err != nil {
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
		w, err := n.decodePKWrite(q.Bucket, q.Batches)
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
	}
	return nil
}
