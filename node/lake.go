package node

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/fluss-node/fluss-node/kvstore"
	"github.com/fluss-node/fluss-node/logstore/record"
	"github.com/fluss-node/fluss-node/node/replica"
	"github.com/fluss-node/fluss-node/raftmeta"
	"github.com/fluss-node/fluss-node/tiering"
)

// defaultLakeFreshness is table.datalake.freshness when a table does not
// set it (Fluss's default).
const defaultLakeFreshness = 3 * time.Minute

// lakeFileBytes bounds the stored batches one lake file is made of. The
// file's rows are held decoded while it is written (several times the
// stored bytes, which are compressed), so it stays moderate.
const lakeFileBytes = 8 << 20

// lakeEnabled reports whether t tiers to the lake.
func lakeEnabled(t *raftmeta.Table) bool {
	return strings.EqualFold(t.Properties["table.datalake.enabled"], "true")
}

// lakeProgress is where each bucket's lake ended after this node's last
// pass of it as leader, for the fluss_lake_lag_records gauge.
type lakeProgress struct {
	mu   sync.Mutex
	ends map[raftmeta.BucketID]int64
}

func (p *lakeProgress) set(id raftmeta.BucketID, end int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ends == nil {
		p.ends = map[raftmeta.BucketID]int64{}
	}
	p.ends[id] = end
}

// lakeLag is the committed records of the buckets this node leads that
// their last lake pass here left out of the lake (buckets never passed here
// count none).
func (n *Node) lakeLag() int64 {
	n.lakeEnds.mu.Lock()
	ends := maps.Clone(n.lakeEnds.ends)
	n.lakeEnds.mu.Unlock()
	var lag int64
	for id, r := range n.openReplicas() {
		if end, ok := ends[id]; ok && r.IsLeader() {
			lag += max(0, r.HighWatermark()-end)
		}
	}
	return lag
}

// lakeLoop writes the committed rows of tables with
// table.datalake.enabled to the lake (a primary-key table's changelog), for
// the buckets this node leads, every table.datalake.freshness.
func (n *Node) lakeLoop() {
	last := map[raftmeta.BucketID]time.Time{} // owned by the loop's goroutine
	n.everyReplicaEvery(cmp.Or(n.lakeCheckEvery, time.Second), func(id raftmeta.BucketID, r *replica.Replica) {
		tbl, err := n.meta.TableByID(id.TableID)
		if err != nil || !lakeEnabled(tbl) || !r.IsLeader() {
			return
		}
		fresh := defaultLakeFreshness
		if d, err := raftmeta.ParseDuration(tbl.Properties["table.datalake.freshness"]); err == nil {
			fresh = d
		}
		if time.Since(last[id]) < fresh {
			return
		}
		last[id] = time.Now()
		files, rows, err := n.tierToLake(id, tbl, r)
		if err != nil {
			n.tiered.errors.Add(1)
			n.logger.Warn("lake tiering", "table", tbl.FullName(), "bucket", id, "err", err)
		}
		if files > 0 {
			n.tiered.lakeFiles.Add(int64(files))
			n.logger.Info("tiered to the lake", "table", tbl.FullName(), "partition", id.PartitionID, "bucket", id.Bucket,
				"files", files, "rows", rows)
		}
		written, obsolete, err := n.compactLake(id, tbl)
		if err != nil {
			n.tiered.errors.Add(1)
			n.logger.Warn("lake compaction", "table", tbl.FullName(), "bucket", id, "err", err)
		}
		n.tiered.lakeFiles.Add(int64(written))
		deleted, err := n.settleLake(id, tbl, obsolete)
		if err != nil {
			n.tiered.errors.Add(1)
			n.logger.Warn("lake files", "table", tbl.FullName(), "bucket", id, "err", err)
		}
		n.tiered.lakeMerged.Add(int64(deleted))
		if written+deleted > 0 {
			n.logger.Info("compacted the lake", "table", tbl.FullName(), "partition", id.PartitionID, "bucket", id.Bucket,
				"written", written, "deleted", deleted)
		}
	})
}

// lakeColumnsOf is the columns of the stored batches of table t's schema
// version s, which its lake files hold (before __offset and __timestamp):
// a log table's columns, or a primary-key table's changelog columns (its
// columns, then _change_type).
func lakeColumnsOf(t *raftmeta.Table, s *record.Schema) *arrow.Schema {
	if t.HasPrimaryKey() {
		return kvstore.ChangelogArrowSchema(s)
	}
	return s.ArrowSchema()
}

// lakeDir is the lake directory of bucket id of table t.
func (n *Node) lakeDir(id raftmeta.BucketID, t *raftmeta.Table) (string, error) {
	partition := ""
	if id.PartitionID != raftmeta.NoPartition {
		parts, err := n.meta.Partitions(id.TableID)
		if err != nil {
			return "", err
		}
		i := slices.IndexFunc(parts, func(p *raftmeta.Partition) bool { return p.ID == id.PartitionID })
		if i < 0 {
			return "", fmt.Errorf("partition %d of table %s is gone", id.PartitionID, t.FullName())
		}
		partition = parts[i].Name
	}
	return tiering.LakeBucketDir(t.Database, t.Name, t.ID, partition, id.Bucket), nil
}

// tierToLake writes the bucket's committed rows after its lake end (or,
// if the log no longer reaches back to the lake end, after the files that
// continue from its log start) as lake files: one per schema version met
// and per lakeFileBytes of stored batches. It returns the files and rows
// written, and records where the lake ends (lakeEnds).
func (n *Node) tierToLake(id raftmeta.BucketID, t *raftmeta.Table, r *replica.Replica) (files, rows int, err error) {
	dir, err := n.lakeDir(id, t)
	if err != nil {
		return 0, 0, err
	}
	have, err := tiering.ListLake(n.lake, dir)
	if err != nil {
		return 0, 0, err
	}
	from := tiering.LakeEnd(have)
	if start := r.LogStartOffset(); from < start {
		// The log dropped rows before they reached the lake: the lake
		// continues from the log start, after the files that already do.
		from = tiering.LakeEndFrom(have, start)
	}
	defer func() { n.lakeEnds.set(id, from) }() // from: the end of what is in the lake
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for from < r.HighWatermark() {
		stored, _, _, err := r.FetchLocal(ctx, from, lakeFileBytes, 0)
		if err != nil {
			return files, rows, err
		}
		if len(stored) == 0 {
			break
		}
		var pending []tiering.LakeBatch
		var cols *arrow.Schema
		first, next := from, from
		flush := func() error {
			defer func() {
				for _, b := range pending {
					b.Rec.Release()
				}
				pending = pending[:0]
			}()
			if len(pending) == 0 {
				return nil
			}
			data, err := tiering.EncodeLakeFile(cols, pending)
			if err != nil {
				return err
			}
			if _, err := tiering.PutLakeFile(n.lake, dir, first, next, data); err != nil {
				return err
			}
			files++
			rows += int(next - first)
			first = next
			return nil
		}
		var schemaID int32 = -1
		for _, b := range stored {
			bt, _, err := record.ParseBatch(b)
			if err != nil {
				_ = flush() // the rows before it are good; the next pass retries from there
				return files, rows, err
			}
			if bt.SchemaID != schemaID {
				if err := flush(); err != nil {
					return files, rows, err
				}
				s := t.SchemaByID(bt.SchemaID)
				if s == nil {
					return files, rows, fmt.Errorf("batch at offset %d has schema version %d, which table %s lacks", bt.BaseOffset, bt.SchemaID, t.FullName())
				}
				schemaID, cols = bt.SchemaID, lakeColumnsOf(t, s)
			}
			rec, err := record.DecodeBody(cols, bt.Body, nil)
			if err != nil {
				_ = flush()
				return files, rows, err
			}
			base := bt.BaseOffset
			if base < next { // the fetch's first batch may start before from
				cut := next - base
				sliced := rec.NewSlice(cut, rec.NumRows())
				rec.Release()
				rec, base = sliced, next
			}
			pending = append(pending, tiering.LakeBatch{Rec: rec, BaseOffset: base, CommitTs: bt.CommitTimestamp})
			next = base + rec.NumRows()
		}
		if err := flush(); err != nil {
			return files, rows, err
		}
		from = next
	}
	return files, rows, nil
}
