package tiering

import (
	"bytes"
	"cmp"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// Lake tiering writes a log table's committed rows as Parquet files that
// any engine reads (DuckDB, Spark, Trino, pyarrow), one directory per
// bucket: <db>/<table>/<table id>/[<partition>/]bucket=<n>/<first>-<next>.parquet
// (the id keeps a dropped table's files apart from those of a new table
// of the same name, whose offsets start at 0 again),
// holding the rows of offsets [first, next) with two system columns after
// the table's: __offset (BIGINT) and __timestamp (the commit timestamp,
// TIMESTAMP(3)). As with the remote log, the names are the manifest: the
// lake end of a bucket (its tiered offset) is where the gap-free run of
// files from its first ends.

// Names of the system columns of lake files.
const (
	LakeOffsetColumn    = "__offset"
	LakeTimestampColumn = "__timestamp"
)

// LakeBucketDir is a bucket's lake directory; partition is "" for a table
// without partitions.
func LakeBucketDir(db, table string, tableID int64, partition string, bucket int32) string {
	if partition == "" {
		return fmt.Sprintf("%s/%s/%d/bucket=%d", db, table, tableID, bucket)
	}
	return fmt.Sprintf("%s/%s/%d/%s/bucket=%d", db, table, tableID, partition, bucket)
}

// LakeFile is one Parquet file of a bucket's lake directory.
type LakeFile struct {
	Name        string
	FirstOffset int64
	NextOffset  int64
}

func lakeFileName(dir string, first, next int64) string {
	return fmt.Sprintf("%s/%020d-%020d.parquet", dir, first, next)
}

// parseLakeFileName reads a base name made by lakeFileName (canonical
// form only).
func parseLakeFileName(base string) (LakeFile, bool) {
	stem, ok := strings.CutSuffix(base, ".parquet")
	if !ok {
		return LakeFile{}, false
	}
	a, b, ok := strings.Cut(stem, "-")
	if !ok {
		return LakeFile{}, false
	}
	first, err1 := strconv.ParseInt(a, 10, 64)
	next, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil || first < 0 || next <= first || lakeFileName("", first, next) != "/"+base {
		return LakeFile{}, false
	}
	return LakeFile{Name: base, FirstOffset: first, NextOffset: next}, true
}

// ListLake lists a bucket's lake files by offset.
func ListLake(store Store, dir string) ([]LakeFile, error) {
	names, err := store.List(dir)
	if err != nil {
		return nil, err
	}
	var out []LakeFile
	for _, n := range names {
		if f, ok := parseLakeFileName(path.Base(n)); ok {
			f.Name = n
			out = append(out, f)
		}
	}
	slices.SortFunc(out, func(a, b LakeFile) int {
		return cmp.Or(cmp.Compare(a.FirstOffset, b.FirstOffset), cmp.Compare(a.NextOffset, b.NextOffset))
	})
	return out, nil
}

// LakeEnd is the tiered offset of a bucket: the end of the gap-free run of
// files that starts at its first file (0 when there is none).
func LakeEnd(files []LakeFile) int64 {
	if len(files) == 0 {
		return 0
	}
	end := files[0].NextOffset
	for _, f := range files[1:] {
		if f.FirstOffset > end {
			break
		}
		end = max(end, f.NextOffset)
	}
	return end
}

// LakeBatch is a stored record batch to tier: its rows, decoded with the
// schema of the file being written, and where they sit in the log.
type LakeBatch struct {
	Rec        arrow.Record
	BaseOffset int64
	CommitTs   int64 // milliseconds since the epoch
}

// LakeSchema is the schema of a lake file of a table whose columns are
// cols: the table's columns, then __offset and __timestamp.
func LakeSchema(cols *arrow.Schema) *arrow.Schema {
	fields := append(slices.Clone(cols.Fields()),
		arrow.Field{Name: LakeOffsetColumn, Type: arrow.PrimitiveTypes.Int64},
		arrow.Field{Name: LakeTimestampColumn, Type: &arrow.TimestampType{Unit: arrow.Millisecond}})
	return arrow.NewSchema(fields, nil)
}

// EncodeLakeFile writes batches, whose records have schema cols and whose
// offsets run without a gap, as one ZSTD-compressed Parquet file.
func EncodeLakeFile(cols *arrow.Schema, batches []LakeBatch) ([]byte, error) {
	schema := LakeSchema(cols)
	var buf bytes.Buffer
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd), parquet.WithStats(true))
	w, err := pqarrow.NewFileWriter(schema, &buf, props, pqarrow.DefaultWriterProps())
	if err != nil {
		return nil, fmt.Errorf("tiering: lake file: %w", err)
	}
	mem := memory.DefaultAllocator
	for i, b := range batches {
		if !b.Rec.Schema().Equal(cols) {
			w.Close()
			return nil, fmt.Errorf("tiering: lake file: batch %d has schema %s, the file %s", i, b.Rec.Schema(), cols)
		}
		n := int(b.Rec.NumRows())
		offs := array.NewInt64Builder(mem)
		ts := array.NewTimestampBuilder(mem, &arrow.TimestampType{Unit: arrow.Millisecond})
		for k := range n {
			offs.Append(b.BaseOffset + int64(k))
			ts.Append(arrow.Timestamp(b.CommitTs))
		}
		o, t := offs.NewArray(), ts.NewArray()
		offs.Release()
		ts.Release()
		rec := array.NewRecord(schema, append(slices.Clone(b.Rec.Columns()), o, t), int64(n))
		err := w.Write(rec)
		rec.Release()
		o.Release()
		t.Release()
		if err != nil {
			w.Close()
			return nil, fmt.Errorf("tiering: lake file: %w", err)
		}
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("tiering: lake file: %w", err)
	}
	return buf.Bytes(), nil
}

// PutLakeFile stores the encoded file of offsets [first, next) in dir.
func PutLakeFile(store Store, dir string, first, next int64, data []byte) (string, error) {
	name := lakeFileName(dir, first, next)
	return name, store.Put(name, bytes.NewReader(data), int64(len(data)))
}
