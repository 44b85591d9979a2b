package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/fluss-node/fluss-node/logstore/record"
	"github.com/fluss-node/fluss-node/node/replica"
	"github.com/fluss-node/fluss-node/raftmeta"
	"github.com/fluss-node/fluss-node/rpc"
	"github.com/fluss-node/fluss-node/tiering"
)

// The union read (DESIGN §9): a log table with table.datalake.enabled
// whose log no longer holds its oldest records (table.log.ttl) serves them
// from its lake files, so one Fetch or Scan from EARLIEST reads the lake up
// to the log start and the log after it. A lake row has the offset it had
// in the log (__offset), so the two meet with no gap and no overlap. The
// lake is used only while its files run without a gap from its first
// offset to the log start; otherwise reads start at the log, as without a
// lake.

// lakeListingFor is how long a bucket's lake listing is trusted. Files are
// only added (every table.datalake.freshness), and a stale listing only
// misses the newest, which the log still holds.
const lakeListingFor = 5 * time.Second

// lakeCachedFiles is how many decoded lake files a node keeps for union
// reads: a reader continues in the file it read last.
const lakeCachedFiles = 4

// lakeReads is what union reads keep of the lake.
type lakeReads struct {
	mu    sync.Mutex
	lists map[raftmeta.BucketID]lakeListing
	files []*lakeDecoded // most recently used first

	filesRead, batchesRead atomic.Int64 // for /metrics
}

type lakeListing struct {
	files []tiering.LakeFile
	at    time.Time
}

// lakeDecoded is one lake file as stored batches (record.AppendBatch
// format, offsets and commit timestamps stamped), in offset order.
type lakeDecoded struct {
	name    string
	next    []int64  // the offset after each batch
	batches [][]byte // not modified once cached
}

// lakeTable returns bucket id's table when reads of it may use the lake:
// a table with table.datalake.enabled on a node with a lake.
func (n *Node) lakeTable(id raftmeta.BucketID) *raftmeta.Table {
	if n.lake == nil {
		return nil
	}
	t, err := n.meta.TableByID(id.TableID)
	if err != nil || !lakeEnabled(t) {
		return nil
	}
	return t
}

// lakeRun returns the bucket's lake files and where they start, when they
// run without a gap from there to logStart and so extend the log
// backwards; ok is false when the lake adds nothing before logStart. With
// recheck, a cached listing that falls short of logStart is listed again
// (a read below the log start, which only the lake can serve; other
// callers take the cached answer rather than list the lake on every call
// while it has a gap).
func (n *Node) lakeRun(id raftmeta.BucketID, t *raftmeta.Table, logStart int64, recheck bool) (files []tiering.LakeFile, start int64, ok bool, err error) {
	files, err = n.lakeList(id, t, false)
	if err != nil {
		return nil, 0, false, err
	}
	if recheck && len(files) > 0 && files[0].FirstOffset < logStart && tiering.LakeEnd(files) < logStart {
		// The files may have reached the log since they were listed.
		if files, err = n.lakeList(id, t, true); err != nil {
			return nil, 0, false, err
		}
	}
	if len(files) == 0 || files[0].FirstOffset >= logStart || tiering.LakeEnd(files) < logStart {
		return nil, 0, false, nil
	}
	return files, files[0].FirstOffset, true, nil
}

// retentionBound is the first offset retention must keep on replica r of
// bucket id: for a lake table, the end of the lake files that run from the
// log start (rows the lake does not hold yet stay in the log, so that they
// are not lost to it); math.MaxInt64 for other tables and on a node
// without a lake. ok is false when the lake could not be listed: delete
// nothing this time.
func (n *Node) retentionBound(id raftmeta.BucketID, r *replica.Replica) (keepFrom int64, ok bool) {
	t := n.lakeTable(id)
	if t == nil {
		return math.MaxInt64, true
	}
	files, err := n.lakeList(id, t, true)
	if err == nil {
		return tiering.LakeEndFrom(files, r.LogStartOffset()), true
	}
	n.tiered.errors.Add(1)
	n.logger.Warn("retention: list the lake", "table", t.FullName(), "bucket", id, "err", err)
	return 0, false
}

// lakeList lists bucket id's lake files, from the cache (without working
// out the bucket's directory: this runs on every Fetch of a lake table)
// unless it is older than lakeListingFor or fresh is set.
func (n *Node) lakeList(id raftmeta.BucketID, t *raftmeta.Table, fresh bool) ([]tiering.LakeFile, error) {
	lr := &n.lakeReads
	lr.mu.Lock()
	l, ok := lr.lists[id]
	lr.mu.Unlock()
	if ok && !fresh && time.Since(l.at) < lakeListingFor {
		return l.files, nil
	}
	dir, err := n.lakeDir(id, t)
	if err != nil {
		return nil, err
	}
	files, err := tiering.ListLake(n.lake, dir)
	if err != nil {
		return nil, err
	}
	lr.mu.Lock()
	if lr.lists == nil {
		lr.lists = map[raftmeta.BucketID]lakeListing{}
	}
	lr.lists[id] = lakeListing{files: files, at: time.Now()}
	lr.mu.Unlock()
	return files, nil
}

// fetchLeader is Fetch on the bucket's leading replica r with the union
// read: the log start it reports is the lake's start when the lake extends
// the log backwards, and offsets between the two are read from the lake.
func (n *Node) fetchLeader(ctx context.Context, id raftmeta.BucketID, r *replica.Replica, offset int64, maxBytes int, maxWait time.Duration) (batches [][]byte, hw, start int64, err error) {
	batches, hw, start, err = r.Fetch(ctx, offset, maxBytes, maxWait)
	below := errors.Is(err, replica.ErrOffsetOutOfRange) && offset < start
	if err != nil && !below {
		return batches, hw, start, err
	}
	t := n.lakeTable(id)
	if t == nil {
		return batches, hw, start, err
	}
	files, lakeStart, ok, lerr := n.lakeRun(id, t, start, below)
	switch {
	case lerr != nil && below:
		return nil, hw, start, fmt.Errorf("%v: offset %d is before the log start %d, and the lake could not be listed: %w", id, offset, start, lerr)
	case lerr != nil || !ok:
		return batches, hw, start, err // the log's answer
	case !below:
		return batches, hw, lakeStart, nil
	case offset < lakeStart:
		return nil, hw, lakeStart, fmt.Errorf("%w: the lake and the log hold offsets [%d, %d)", replica.ErrOffsetOutOfRange, lakeStart, hw)
	}
	if maxBytes <= 0 {
		maxBytes = 1 << 20 // as the log's Fetch
	}
	batches, err = n.readLake(t, files, offset, maxBytes)
	if errors.Is(err, fs.ErrNotExist) {
		// Compaction merged the file away since the listing was cached.
		if _, lerr = n.lakeList(id, t, true); lerr == nil {
			if files, _, ok, lerr = n.lakeRun(id, t, start, false); lerr == nil && ok {
				batches, err = n.readLake(t, files, offset, maxBytes)
			}
		}
	}
	return batches, hw, lakeStart, err
}

// listOffsetLeader answers ListOffset on the bucket's leading replica r,
// once it serves reads, with the union read: EARLIEST is the lake's start
// when the lake extends the log backwards, and a timestamp before the
// log's first record is looked up in the lake.
func (n *Node) listOffsetLeader(id raftmeta.BucketID, r *replica.Replica, spec rpc.OffsetSpec, tsMs int64) (int64, error) {
	off, err := listOffsetLocal(r, spec, tsMs)
	if err != nil || spec == rpc.OffsetLatest {
		return off, err
	}
	start := r.LogStartOffset()
	if spec != rpc.OffsetEarliest && off > start {
		return off, nil // the log holds the answer
	}
	t := n.lakeTable(id)
	if t == nil {
		return off, nil
	}
	files, lakeStart, ok, err := n.lakeRun(id, t, start, false)
	if err != nil || !ok {
		return off, nil // the log's answer
	}
	if spec == rpc.OffsetEarliest {
		return lakeStart, nil
	}
	return n.lakeOffsetForTimestamp(t, files, start, tsMs, off)
}

// lakeOffsetForTimestamp is the first offset below logStart in the lake
// files whose commit timestamp is >= tsMs, or otherwise (the log's answer).
// Files whose footer says they are all older are not read.
func (n *Node) lakeOffsetForTimestamp(t *raftmeta.Table, files []tiering.LakeFile, logStart, tsMs, otherwise int64) (int64, error) {
	for _, f := range files {
		if f.FirstOffset >= logStart {
			break
		}
		if newest, ok, err := n.lakeFileNewest(f); err != nil {
			return 0, err
		} else if ok && newest < tsMs {
			continue
		}
		d, err := n.lakeFile(t, f)
		if err != nil {
			return 0, err
		}
		for i, b := range d.batches {
			h, _, err := record.CheckBatch(b)
			if err != nil {
				return 0, err
			}
			if h.CommitTimestamp >= tsMs {
				return h.BaseOffset, nil
			}
			if d.next[i] >= logStart {
				return otherwise, nil
			}
		}
	}
	return otherwise, nil
}

// lakeFileNewest reads the newest commit timestamp of lake file f from its
// footer (tiering.LakeFileNewest).
func (n *Node) lakeFileNewest(f tiering.LakeFile) (int64, bool, error) {
	o, err := n.lake.Open(f.Name)
	if err != nil {
		return 0, false, fmt.Errorf("open lake file: %w", err)
	}
	defer o.Close()
	return tiering.LakeFileNewest(o, o.Size())
}

// readLake returns the stored batches of the lake file holding offset,
// from the batch that holds it on, about maxBytes (at least one batch).
func (n *Node) readLake(t *raftmeta.Table, files []tiering.LakeFile, offset int64, maxBytes int) ([][]byte, error) {
	i := slices.IndexFunc(files, func(f tiering.LakeFile) bool { return f.FirstOffset <= offset && offset < f.NextOffset })
	if i < 0 {
		return nil, fmt.Errorf("table %s: no lake file holds offset %d", t.FullName(), offset)
	}
	d, err := n.lakeFile(t, files[i])
	if err != nil {
		return nil, err
	}
	k, _ := slices.BinarySearch(d.next, offset+1)
	var out [][]byte
	size := 0
	for _, b := range d.batches[k:] {
		if len(out) > 0 && size+len(b) > maxBytes {
			break
		}
		out = append(out, b)
		size += len(b)
	}
	n.lakeReads.batchesRead.Add(int64(len(out)))
	return out, nil
}

// lakeFile returns lake file f decoded as stored batches, from the cache
// or read now.
func (n *Node) lakeFile(t *raftmeta.Table, f tiering.LakeFile) (*lakeDecoded, error) {
	lr := &n.lakeReads
	if d := lr.cached(f.Name, nil); d != nil {
		return d, nil
	}
	d, err := n.decodeLakeFile(t, f)
	if err != nil {
		return nil, err
	}
	lr.filesRead.Add(1)
	return lr.cached(f.Name, d), nil
}

// cached returns the cached decoding of the lake file name, most recently
// used from now on. If there is none it caches add (when not nil) and
// returns it, evicting the least recently used beyond lakeCachedFiles.
func (lr *lakeReads) cached(name string, add *lakeDecoded) *lakeDecoded {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	if i := slices.IndexFunc(lr.files, func(d *lakeDecoded) bool { return d.name == name }); i >= 0 {
		d := lr.files[i]
		copy(lr.files[1:i+1], lr.files[:i])
		lr.files[0] = d
		return d // another read decoded it meanwhile, or add is nil
	}
	if add != nil {
		lr.files = slices.Insert(lr.files, 0, add)
		lr.files = lr.files[:min(len(lr.files), lakeCachedFiles)]
	}
	return add
}

// decodeLakeFile reads lake file f and encodes its rows as stored batches
// of the table's schema version with the file's columns (a primary-key
// table's as changelog batches), compressed as the table's log is.
func (n *Node) decodeLakeFile(t *raftmeta.Table, f tiering.LakeFile) (*lakeDecoded, error) {
	data, err := n.readLakeObject(f)
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", t.FullName(), err)
	}
	cols, lbs, err := tiering.ReadLakeFile(data, f)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, b := range lbs {
			b.Rec.Release()
		}
	}()
	// A lake file holds the rows of one schema version; versions only add
	// columns, so the columns name it.
	i := slices.IndexFunc(t.Schemas, func(s *record.Schema) bool { return sameColumns(lakeColumnsOf(t, s), cols) })
	if i < 0 {
		return nil, fmt.Errorf("table %s: lake file %s has columns %s, which no schema version of the table has", t.FullName(), f.Name, cols)
	}
	sch := t.Schemas[i]
	comp, level, err := t.LogCompression()
	if err != nil {
		return nil, err
	}
	var attrs uint16
	if t.HasPrimaryKey() {
		attrs = record.AttrChangeType // a changelog: _change_type is its last column
	}
	d := &lakeDecoded{name: f.Name}
	for _, b := range lbs {
		h := record.BatchHeader{
			Attributes:      attrs,
			BaseOffset:      b.BaseOffset,
			RecordCount:     int32(b.Rec.NumRows()),
			CommitTimestamp: b.CommitTs,
			SchemaID:        sch.ID,
		}
		// The table's fields, whose metadata says which columns the log
		// stores dictionary-encoded, so that these batches are stored as
		// the log's are.
		rec := array.NewRecordBatch(lakeColumnsOf(t, sch), b.Rec.Columns(), b.Rec.NumRows())
		stored, err := record.AppendRecordBatch(nil, h, rec, comp, level)
		rec.Release()
		if err != nil {
			return nil, fmt.Errorf("table %s: lake file %s: %w", t.FullName(), f.Name, err)
		}
		d.batches = append(d.batches, stored)
		d.next = append(d.next, b.BaseOffset+b.Rec.NumRows())
	}
	return d, nil
}

// sameColumns reports whether a and b have the same column names, types
// and nullability, in order.
func sameColumns(a, b *arrow.Schema) bool {
	return slices.EqualFunc(a.Fields(), b.Fields(), func(x, y arrow.Field) bool {
		return x.Name == y.Name && x.Nullable == y.Nullable && arrow.TypeEqual(x.Type, y.Type)
	})
}
