package node

import (
	"errors"
	"fmt"
	"io"

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
// up to lakeFileBytes, and the merged files are deleted once it is stored.
// Files that another file covers (left by a deposed leader's pass) are
// deleted too. Nothing is deleted that a stored file does not hold, so a
// reader sees every offset at any moment, at worst twice while the two
// overlap; a reader holding a listing that names a deleted file lists
// again (fetchLeader).

// lakeSmallFile is the size below which a lake file is merged with its
// neighbours: files at least this big were written whole or compacted
// already, so compaction looks at the files after the last of them.
const lakeSmallFile = lakeFileBytes / 2

// compactLake merges the small files at the end of bucket id's lake and
// deletes covered files; it returns how many files it wrote and deleted.
func (n *Node) compactLake(id raftmeta.BucketID, t *raftmeta.Table) (written, deleted int, err error) {
	dir, err := n.lakeDir(id, t)
	if err != nil {
		return 0, 0, err
	}
	files, err := tiering.ListLake(n.lake, dir)
	if err != nil {
		return 0, 0, err
	}
	files, deleted, err = n.deleteCoveredLakeFiles(files)
	if err != nil {
		return 0, deleted, err
	}
	// The small files at the end, with their sizes.
	var tail []sizedLakeFile
	for i := len(files) - 1; i >= 0; i-- {
		size, err := n.lakeFileSize(files[i])
		if err != nil {
			return 0, deleted, err
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
			return written, deleted, err
		}
		if merged > 0 {
			written++
			deleted += merged
		}
		// A schema version change may have ended the merge early: the
		// next run starts at the first file left.
		i += max(merged, 1)
	}
	return written, deleted, nil
}

type sizedLakeFile struct {
	tiering.LakeFile
	size int64
}

// deleteCoveredLakeFiles deletes the files (sorted by first offset, then
// next offset: tiering.ListLake) whose offsets another file holds, and
// returns the others.
func (n *Node) deleteCoveredLakeFiles(files []tiering.LakeFile) (kept []tiering.LakeFile, deleted int, err error) {
	reach := int64(-1) // the furthest an earlier file reaches
	for i, f := range files {
		// An earlier file starts no later; a next one that starts at the
		// same offset ends later.
		covered := reach >= f.NextOffset || i+1 < len(files) && files[i+1].FirstOffset == f.FirstOffset
		reach = max(reach, f.NextOffset)
		if !covered {
			kept = append(kept, f)
			continue
		}
		if err := n.lake.Delete(f.Name); err != nil {
			return nil, deleted, fmt.Errorf("delete covered lake file %s: %w", f.Name, err)
		}
		deleted++
	}
	return kept, deleted, nil
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

// mergeLakeFiles writes the rows of run (adjacent files) as one file and
// then deletes the files of run. Only the leading files that share the
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
	for _, f := range run[:took] {
		if err := n.lake.Delete(f.Name); err != nil {
			return 0, fmt.Errorf("delete merged lake file %s: %w", f.Name, err)
		}
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
