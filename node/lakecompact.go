package node

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/fluss-node/fluss-node/raftmeta"
	"github.com/fluss-node/fluss-node/tiering"
)

// Lake compaction. Every lake pass writes at least one file, so a table
// that takes few rows per table.datalake.freshness gathers many small
// files (480 a day per bucket at the default 3 minutes), which every
// engine reading the lake, and every listing, then pays for. After each
// pass the bucket leader merges the small files at the end of the
// bucket's lake: a run of adjacent files (each starting where the one
// before ends, of one schema version) becomes one file of their offsets,
// up to lakeFileBytes. The merged files, and files that another file
// covers (left by a deposed leader's pass), are then obsolete, and
// settleLake deletes them: at once for a table without Iceberg metadata;
// for one with, it first commits the bucket's files to the Iceberg table
// and deletes an obsolete file only when no snapshot kept holds it. Nothing
// is deleted that a stored file does not hold, so a reader sees every
// offset at any moment, at worst twice while the two overlap (the union
// read takes each offset once); a reader holding a listing that names a
// deleted file lists again (fetchLeader).

// lakeSmallFile is the size below which a lake file is merged with its
// neighbours: files at least this big were written whole or compacted
// already, so compaction looks at the files after the last of them.
const lakeSmallFile = lakeFileBytes / 2

// compactLake merges the small files at the end of bucket id's lake; it
// returns how many files it wrote and the files now obsolete (merged or
// covered), for settleLake.
func (n *Node) compactLake(id raftmeta.BucketID, t *raftmeta.Table) (written int, obsolete []tiering.LakeFile, err error) {
	dir, err := n.lakeDir(id, t)
	if err != nil {
		return 0, nil, err
	}
	files, err := tiering.ListLake(n.lake, dir)
	if err != nil {
		return 0, nil, err
	}
	files, obsolete = coveredLakeFiles(files)
	// The small files at the end, with their sizes.
	var tail []sizedLakeFile
	for i := len(files) - 1; i >= 0; i-- {
		size, err := n.lakeFileSize(files[i])
		if err != nil {
			return 0, obsolete, err
		}
		if size >= lakeSmallFile {
			break
		}
		tail = append([]sizedLakeFile{{files[i], size}}, tail...)
	}
	for i := 0; i < len(tail); {
		j, total := i+1, tail[i].size
		for j < len(tail) && tail[j].FirstOffset == tail[j-1].NextOffset && total+tail[j].size <= lakeFileBytes {
			total += tail[j].size
			j++
		}
		if j-i < 2 {
			i = j
			continue
		}
		merged, err := n.mergeLakeFiles(dir, tail[i:j])
		if err != nil {
			return written, obsolete, err
		}
		if merged > 0 {
			written++
			for _, f := range tail[i : i+merged] {
				obsolete = append(obsolete, f.LakeFile)
			}
		}
		// A schema version change may have ended the merge early: the
		// next run starts at the first file left.
		i += max(merged, 1)
	}
	return written, obsolete, nil
}

type sizedLakeFile struct {
	tiering.LakeFile
	size int64
}

// coveredLakeFiles splits files (sorted by first offset, then next
// offset: tiering.ListLake) into those whose offsets another file holds
// and the others.
func coveredLakeFiles(files []tiering.LakeFile) (kept, covered []tiering.LakeFile) {
	reach := int64(-1) // the furthest an earlier file reaches
	for i, f := range files {
		// An earlier file starts no later; a next one that starts at the
		// same offset ends later.
		if reach >= f.NextOffset || i+1 < len(files) && files[i+1].FirstOffset == f.FirstOffset {
			covered = append(covered, f)
		} else {
			kept = append(kept, f)
		}
		reach = max(reach, f.NextOffset)
	}
	return kept, covered
}

// lakeFileSize is the stored size of a lake file.
func (n *Node) lakeFileSize(f tiering.LakeFile) (int64, error) {
	o, err := n.lake.Open(f.Name)
	if err != nil {
		return 0, fmt.Errorf("open lake file: %w", err)
	}
	defer o.Close()
	return o.Size(), nil
}

// mergeLakeFiles writes the rows of run (adjacent files) as one file. Only the leading files that share the
// first one's columns are merged (a schema version change ends the run);
// it returns how many were, 0 when fewer than two.
func (n *Node) mergeLakeFiles(dir string, run []sizedLakeFile) (int, error) {
	var cols *arrow.Schema
	var batches []tiering.LakeBatch
	defer func() {
		for _, b := range batches {
			b.Rec.Release()
		}
	}()
	took := 0
	for _, f := range run {
		data, err := n.readLakeObject(f.LakeFile)
		if err != nil {
			return 0, err
		}
		c, bs, err := tiering.ReadLakeFile(data, f.LakeFile)
		if err != nil {
			return 0, err
		}
		if cols != nil && !sameColumns(c, cols) {
			for _, b := range bs {
				b.Rec.Release()
			}
			break
		}
		cols = c
		batches = append(batches, bs...)
		took++
	}
	if took < 2 {
		return 0, nil
	}
	first, next := run[0].FirstOffset, run[took-1].NextOffset
	data, err := tiering.EncodeLakeFile(cols, batches)
	if err != nil {
		return 0, err
	}
	if _, err := tiering.PutLakeFile(n.lake, dir, first, next, data); err != nil {
		return 0, err
	}
	return took, nil
}

// readLakeObject reads a whole lake file.
func (n *Node) readLakeObject(f tiering.LakeFile) ([]byte, error) {
	o, err := n.lake.Open(f.Name)
	if err != nil {
		return nil, fmt.Errorf("open lake file: %w", err)
	}
	defer o.Close()
	data := make([]byte, o.Size())
	if _, err := o.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read lake file %s: %w", f.Name, err)
	}
	return data, nil
}

// settleLake deletes the obsolete files of bucket id's lake (compactLake)
// and returns how many. A table with Iceberg metadata first has the
// bucket's other files committed as its files in the Iceberg table
// (tiering.IcebergLake.SyncBucket), which takes the obsolete ones out of
// its current snapshot; such a file is deleted only once every snapshot
// that held it is past the snapshot retention (the expiry of those
// snapshots deletes most of them first). Should the commit fail, nothing
// is deleted and the next pass tries again.
func (n *Node) settleLake(id raftmeta.BucketID, t *raftmeta.Table, obsolete []tiering.LakeFile) (deleted int, err error) {
	dir, err := n.lakeDir(id, t)
	if err != nil {
		return 0, err
	}
	now := time.Now()
	if ice := n.icebergFor(t); ice != nil && !n.icebergRefused(t.ID) {
		// A cluster setting: with a retention of its own, a bucket leader
		// would delete files the snapshots that others keep still name.
		retention := n.clusterConfig().LakeSnapshotRetention
		files, err := tiering.ListLake(n.lake, dir)
		if err != nil {
			return 0, err
		}
		files = slices.DeleteFunc(files, func(f tiering.LakeFile) bool {
			return slices.ContainsFunc(obsolete, func(o tiering.LakeFile) bool { return o.Name == f.Name })
		})
		// A bucket whose files and schema versions are those of its last
		// commit here is skipped: an idle table costs a listing per pass.
		h := fnv.New64a()
		fmt.Fprintln(h, len(t.Schemas))
		for _, f := range files {
			fmt.Fprintln(h, f.Name)
		}
		sum := h.Sum64()
		var res tiering.IcebergSync
		if !n.settling.synced(dir, sum) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err = ice.SyncBucket(ctx, icebergTableOf(t, retention), dir, files)
		}
		switch {
		case errors.Is(err, tiering.ErrIcebergType):
			n.refuseIceberg(t.ID, err)
		case err != nil:
			n.settling.setSynced(dir, 0)
			return 0, err
		default:
			n.settling.setSynced(dir, sum)
			if res.Committed {
				n.tiered.icebergCommits.Add(1)
			}
			// Every obsolete file is out of the current snapshot now: the
			// snapshots that held it are older than now.
			keep := retention + min(retention, time.Minute) // and a margin for clock skew between nodes
			obsolete = n.settling.due(dir, obsolete, now, keep)
		}
	}
	for _, f := range obsolete {
		if err := n.lake.Delete(f.Name); err != nil {
			return deleted, fmt.Errorf("delete obsolete lake file %s: %w", f.Name, err)
		}
		deleted++
	}
	return deleted, nil
}

// icebergFor returns the Iceberg lake when table t's lake format is
// "iceberg": its table.datalake.format, or, for a table from before that
// property was set, this node's [tiering] lake_format.
func (n *Node) icebergFor(t *raftmeta.Table) *tiering.IcebergLake {
	format := t.Properties[raftmeta.PropLakeFormat]
	if format == "" {
		format = n.cfg.Tiering.LakeFormat
	}
	if !strings.EqualFold(format, "iceberg") {
		return nil
	}
	return n.iceberg
}

// stampLakeFormat runs on the metadata leader for a CreateTable (cur nil)
// or an AlterTable of a table with properties cur: when set turns the
// table's lake on, names no lake format and the table has none, it
// returns set with table.datalake.format = this node's [tiering]
// lake_format. The format is then the table's for good, whatever other
// nodes are configured with (a node would otherwise delete the files
// compaction replaced at once that an Iceberg snapshot still holds).
func (n *Node) stampLakeFormat(cur, set map[string]string) map[string]string {
	if !strings.EqualFold(set[raftmeta.PropLakeEnabled], "true") || set[raftmeta.PropLakeFormat] != "" || cur[raftmeta.PropLakeFormat] != "" {
		return set
	}
	out := maps.Clone(set)
	out[raftmeta.PropLakeFormat] = n.cfg.Tiering.LakeFormat
	return out
}

// lakeFormatOnAlter runs on the metadata leader for an AlterTable of t
// that sets set: a lake format the request names needs featureLakeFormat;
// one the request would get (stampLakeFormat) is left out while an older
// node is alive, and the table's lake then goes by each node's
// lake_format until the format is set.
func (n *Node) lakeFormatOnAlter(t *raftmeta.Table, set map[string]string) (map[string]string, error) {
	if _, ok := set[raftmeta.PropLakeFormat]; ok {
		return set, n.requireFeature(featureLakeFormat, "setting "+raftmeta.PropLakeFormat+" of an existing table")
	}
	if n.clusterFeatureLevel() < featureLakeFormat {
		return set, nil
	}
	return n.stampLakeFormat(t.Properties, set), nil
}

// icebergTableOf is what table t's Iceberg metadata is made from, its
// replaced snapshots kept for retention.
func icebergTableOf(t *raftmeta.Table, retention time.Duration) tiering.IcebergTable {
	it := tiering.IcebergTable{Database: t.Database, Name: t.Name, ID: t.ID, PartitionKeys: t.PartitionKeys, SnapshotRetention: retention}
	for _, s := range t.Schemas {
		it.Columns = append(it.Columns, lakeColumnsOf(t, s))
	}
	return it
}

// icebergRefused reports whether table id has no Iceberg metadata because
// of a column type (tiering.ErrIcebergType).
func (n *Node) icebergRefused(id int64) bool {
	n.settling.mu.Lock()
	defer n.settling.mu.Unlock()
	return n.settling.refused[id]
}

// refuseIceberg notes, and logs once, that table id has no Iceberg metadata.
func (n *Node) refuseIceberg(id int64, err error) {
	n.settling.mu.Lock()
	defer n.settling.mu.Unlock()
	if n.settling.refused == nil {
		n.settling.refused = map[int64]bool{}
	}
	n.settling.refused[id] = true
	n.logger.Warn("lake table without Iceberg metadata: its Parquet files only", "err", err)
}

// lakeSettling is what settleLake keeps between passes, in memory:
// restarts and leader changes start it afresh, which only defers deletion
// or repeats a commit's work.
type lakeSettling struct {
	mu      sync.Mutex
	since   map[string]time.Time // when this node first saw each obsolete file out of the current Iceberg snapshot
	refused map[int64]bool       // tables without Iceberg metadata (icebergRefused)
	commits map[string]uint64    // by bucket directory: a hash of what its last commit here made its files
}

// synced reports whether bucket directory dir's last commit here was of
// the files and schema versions whose hash is sum.
func (g *lakeSettling) synced(dir string, sum uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return sum != 0 && g.commits[dir] == sum
}

// setSynced records sum (0: none) as the hash of dir's last commit here.
func (g *lakeSettling) setSynced(dir string, sum uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.commits == nil {
		g.commits = map[string]uint64{}
	}
	g.commits[dir] = sum
}

// due returns the files of obsolete (all of bucket directory dir) first
// seen at least keep before now, and forgets the files of dir no longer
// obsolete (deleted, or by snapshot expiry).
func (g *lakeSettling) due(dir string, obsolete []tiering.LakeFile, now time.Time, keep time.Duration) []tiering.LakeFile {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.since == nil {
		g.since = map[string]time.Time{}
	}
	seen := map[string]bool{}
	var due []tiering.LakeFile
	for _, f := range obsolete {
		seen[f.Name] = true
		first, ok := g.since[f.Name]
		if !ok {
			g.since[f.Name] = now
			continue
		}
		if now.Sub(first) >= keep {
			due = append(due, f)
		}
	}
	for name := range g.since {
		if strings.HasPrefix(name, dir+"/") && !seen[name] {
			delete(g.since, name)
		}
	}
	return due
}
