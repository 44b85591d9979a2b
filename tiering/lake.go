package tiering

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/fluss-node/fluss-node/logstore/record/arrowipc"
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
	a, b, ok := nameFields(base, "", ".parquet")
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
// cols: the table's columns (as stored: lakeStoredField), then __offset
// and __timestamp.
func LakeSchema(cols *arrow.Schema) *arrow.Schema {
	s, _ := lakeFileSchema(cols)
	return s
}

// lakeFileSchema is LakeSchema, and whether a column is stored in another
// type than its own.
func lakeFileSchema(cols *arrow.Schema) (*arrow.Schema, bool) {
	fields := make([]arrow.Field, 0, cols.NumFields()+2)
	widened := false
	for _, f := range cols.Fields() {
		f, w := lakeStoredField(f)
		fields = append(fields, f)
		widened = widened || w
	}
	fields = append(fields,
		arrow.Field{Name: LakeOffsetColumn, Type: arrow.PrimitiveTypes.Int64},
		arrow.Field{Name: LakeTimestampColumn, Type: &arrow.TimestampType{Unit: arrow.Millisecond}})
	return arrow.NewSchema(fields, nil), widened
}

// lakeTimeUnitKey is the field metadata of a TIME(0-3) column, which the
// log holds as milliseconds (Arrow time32[ms]) and lake files store as
// microseconds (time64[us], exact): the unit of Iceberg's time type and the
// one engines read. The metadata, kept in the file's Arrow schema, tells
// ReadLakeFile to read it back as milliseconds.
const lakeTimeUnitKey = "fluss.time-unit"

// lakeStoredField is field f as lake files store it, and whether that
// differs from f.
func lakeStoredField(f arrow.Field) (arrow.Field, bool) {
	if t, ok := f.Type.(*arrow.Time32Type); ok && t.Unit == arrow.Millisecond {
		return arrow.Field{Name: f.Name, Type: arrow.FixedWidthTypes.Time64us, Nullable: f.Nullable,
			Metadata: arrow.NewMetadata([]string{lakeTimeUnitKey}, []string{"ms"})}, true
	}
	return f, false
}

// widenTime returns the microseconds of a time32[ms] array.
func widenTime(mem memory.Allocator, a *array.Time32) arrow.Array {
	b := array.NewTime64Builder(mem, &arrow.Time64Type{Unit: arrow.Microsecond})
	defer b.Release()
	b.Reserve(a.Len())
	for i := range a.Len() {
		if a.IsNull(i) {
			b.AppendNull()
		} else {
			b.Append(arrow.Time64(a.Value(i)) * 1000)
		}
	}
	return b.NewArray()
}

// narrowTime returns the milliseconds of a time64[us] array (widenTime's
// inverse).
func narrowTime(mem memory.Allocator, a *array.Time64) arrow.Array {
	b := array.NewTime32Builder(mem, &arrow.Time32Type{Unit: arrow.Millisecond})
	defer b.Release()
	b.Reserve(a.Len())
	for i := range a.Len() {
		if a.IsNull(i) {
			b.AppendNull()
		} else {
			b.Append(arrow.Time32(a.Value(i) / 1000))
		}
	}
	return b.NewArray()
}

// EncodeLakeFile writes batches, whose records have schema cols and whose
// offsets run without a gap, as one ZSTD-compressed Parquet file.
func EncodeLakeFile(cols *arrow.Schema, batches []LakeBatch) ([]byte, error) {
	schema, widened := lakeFileSchema(cols)
	var buf bytes.Buffer
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd), parquet.WithStats(true))
	arrowProps := pqarrow.DefaultWriterProps()
	if widened {
		arrowProps = pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()) // keeps lakeTimeUnitKey
	}
	w, err := pqarrow.NewFileWriter(schema, &buf, props, arrowProps)
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
		columns := append(slices.Clone(b.Rec.Columns()), o, t)
		var made []arrow.Array
		for i, f := range cols.Fields() {
			if _, w := lakeStoredField(f); w {
				columns[i] = widenTime(mem, columns[i].(*array.Time32))
				made = append(made, columns[i])
			}
		}
		rec := array.NewRecord(schema, columns, int64(n))
		err := w.Write(rec)
		rec.Release()
		o.Release()
		t.Release()
		for _, a := range made {
			a.Release()
		}
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

// LakeEndFrom is the end of the gap-free run of files that covers offset
// from: from itself when no file holds it. A bucket whose log no longer
// reaches back to its lake end (LakeEnd) continues its lake from its log
// start, and this is where that continuation ends.
func LakeEndFrom(files []LakeFile, from int64) int64 {
	end := from
	for _, f := range files { // sorted by first offset
		if f.FirstOffset > end {
			break
		}
		end = max(end, f.NextOffset)
	}
	return end
}

// lakeBatchRows bounds the rows of one batch ReadLakeFile returns, so that
// a reader asking for a few bytes gets a few rows.
const lakeBatchRows = 4096

// ReadLakeFile decodes lake file f, whose bytes are data: its table
// columns (the file's schema without the system columns) and its rows as
// batches of those columns, one per run of rows with the same commit
// timestamp (at most lakeBatchRows each). The rows' __offset values must
// be exactly f's offsets, in order; anything else is an error, as is a
// file that is not a lake file. The records are the caller's to release.
func ReadLakeFile(data []byte, f LakeFile) (cols *arrow.Schema, batches []LakeBatch, err error) {
	defer func() {
		// arrow-go's Parquet reader may panic on malformed input.
		if p := recover(); p != nil {
			cols, err = nil, fmt.Errorf("tiering: lake file %s: unreadable: %v", f.Name, p)
			for _, b := range batches {
				b.Rec.Release()
			}
			batches = nil
		}
	}()
	fail := func(format string, args ...any) (*arrow.Schema, []LakeBatch, error) {
		for _, b := range batches {
			b.Rec.Release()
		}
		return nil, nil, fmt.Errorf("tiering: lake file %s: %s", f.Name, fmt.Sprintf(format, args...))
	}
	mem := &boundedAllocator{Allocator: memory.DefaultAllocator, left: lakeReadMemory}
	rdr, err := file.NewParquetReader(bytes.NewReader(data), file.WithReadProps(parquet.NewReaderProperties(mem)))
	if err != nil {
		return fail("%v", err)
	}
	defer rdr.Close()
	if got, want := rdr.NumRows(), f.NextOffset-f.FirstOffset; got != want {
		return fail("%d rows, its name says %d", got, want)
	}
	if err := checkLakeFooter(rdr.MetaData(), int64(len(data))); err != nil {
		return fail("%v", err)
	}
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, mem)
	if err != nil {
		return fail("%v", err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		return fail("%v", err)
	}
	defer tbl.Release()
	cols, narrow, err := lakeColumns(tbl.Schema())
	if err != nil {
		return fail("%v", err)
	}
	n := cols.NumFields()
	tr := array.NewTableReader(tbl, 1<<16)
	defer tr.Release()
	next := f.FirstOffset
	for tr.Next() {
		rec := tr.Record()
		offs, ok1 := rec.Column(n).(*array.Int64)
		ts, ok2 := rec.Column(n + 1).(*array.Timestamp)
		if !ok1 || !ok2 || offs.NullN() > 0 || ts.NullN() > 0 {
			return fail("null or mistyped system columns")
		}
		columns := slices.Clone(rec.Columns()[:n])
		for _, i := range narrow {
			tc, ok := columns[i].(*array.Time64)
			if !ok {
				return fail("column %s is %s", cols.Field(i).Name, columns[i].DataType())
			}
			columns[i] = narrowTime(mem, tc)
		}
		body := array.NewRecord(cols, columns, rec.NumRows())
		for _, i := range narrow {
			columns[i].Release() // body holds them
		}
		rows := int(rec.NumRows())
		for i := 0; i < rows; {
			j := i
			for j < rows && j-i < lakeBatchRows && ts.Value(j) == ts.Value(i) {
				if offs.Value(j) != next {
					body.Release()
					return fail("row %d has __offset %d, want %d", next-f.FirstOffset, offs.Value(j), next)
				}
				next++
				j++
			}
			batches = append(batches, LakeBatch{Rec: body.NewSlice(int64(i), int64(j)), BaseOffset: next - int64(j-i), CommitTs: int64(ts.Value(i))})
			i = j
		}
		body.Release()
	}
	if next != f.NextOffset {
		return fail("rows end at offset %d, its name says %d", next, f.NextOffset)
	}
	return cols, batches, nil
}

// lakeReadMemory bounds what ReadLakeFile allocates through arrow-go for
// one file (its pages and columns), so that a damaged size field fails the
// read instead of allocating gigabytes. A lake file is made of at most
// 8 MiB of stored batches (node.lakeFileBytes), whose rows decode to far
// less than this.
const lakeReadMemory = 1 << 30

// boundedAllocator is an arrow allocator that panics (ReadLakeFile
// recovers) once more than left bytes are outstanding.
type boundedAllocator struct {
	memory.Allocator
	mu   sync.Mutex
	left int
}

func (a *boundedAllocator) take(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if n > a.left {
		panic(fmt.Sprintf("the file needs more than %d bytes of memory to decode", lakeReadMemory))
	}
	a.left -= n
}

func (a *boundedAllocator) give(n int) {
	a.mu.Lock()
	a.left += n
	a.mu.Unlock()
}

func (a *boundedAllocator) Allocate(size int) []byte {
	a.take(size)
	return a.Allocator.Allocate(size)
}

func (a *boundedAllocator) Reallocate(size int, b []byte) []byte {
	a.take(size - len(b))
	return a.Allocator.Reallocate(size, b)
}

func (a *boundedAllocator) Free(b []byte) {
	a.give(len(b))
	a.Allocator.Free(b)
}

// checkLakeFooter checks what ReadLakeFile's reader trusts of a footer:
// every row group's row count, that every column chunk lies inside the
// file, and the Arrow schema stored in its key-value metadata.
func checkLakeFooter(md *metadata.FileMetaData, size int64) error {
	if err := checkStoredArrowSchema(md.KeyValueMetadata()); err != nil {
		return err
	}
	var rows int64
	for i := range md.NumRowGroups() {
		rg := md.RowGroup(i)
		if rg.NumRows() < 0 || rg.NumRows() > md.NumRows-rows {
			return fmt.Errorf("row group %d of %d rows in a file of %d", i, rg.NumRows(), md.NumRows)
		}
		rows += rg.NumRows()
		for c := range rg.NumColumns() {
			cc, err := rg.ColumnChunk(c)
			if err != nil {
				return err
			}
			start := cc.DataPageOffset()
			if d := cc.DictionaryPageOffset(); cc.HasDictionaryPage() && d > 0 && d < start {
				start = d
			}
			if start < 0 || cc.TotalCompressedSize() < 0 || cc.TotalCompressedSize() > size-start || cc.NumValues() < 0 {
				return fmt.Errorf("row group %d column %d: %d bytes at %d, %d values, in a file of %d bytes",
					i, c, cc.TotalCompressedSize(), start, cc.NumValues(), size)
			}
		}
	}
	if rows != md.NumRows {
		return fmt.Errorf("row groups of %d rows in a file of %d", rows, md.NumRows)
	}
	return nil
}

// checkStoredArrowSchema checks the "ARROW:schema" value of a footer's
// key-value metadata (an Arrow IPC schema message in base64, which the
// writer stores for the exact Arrow types) as arrowipc checks a client's
// schema message: pqarrow hands it to arrow-go's IPC reader, which
// allocates whatever length its frame declares (a damaged file asked for
// 32 GiB in FuzzReadLakeFile) and builds vectors of the lengths its
// flatbuffer declares. It is decoded the way pqarrow decodes it.
func checkStoredArrowSchema(kv metadata.KeyValueMetadata) error {
	v := kv.FindValue("ARROW:schema")
	if v == nil {
		return nil
	}
	var decoded []byte
	var err error
	if len(*v)%4 == 0 {
		decoded, err = base64.StdEncoding.DecodeString(*v)
	}
	if len(decoded) == 0 || err != nil {
		decoded, err = base64.RawStdEncoding.DecodeString(*v)
	}
	if err != nil {
		return fmt.Errorf("stored Arrow schema: %w", err)
	}
	schemaMsg, _, err := arrowipc.SplitStream(decoded)
	if err == nil {
		_, err = arrowipc.LayoutOf(schemaMsg)
	}
	if err != nil {
		return fmt.Errorf("stored Arrow schema: %w", err)
	}
	return nil
}

// lakeColumns checks that s is a lake file's schema (LakeSchema) and
// returns its table columns, without the metadata (Parquet field ids) the
// reader adds, and the indexes of those stored widened (lakeStoredField),
// which it returns with their own type.
func lakeColumns(s *arrow.Schema) (cols *arrow.Schema, narrow []int, err error) {
	n := s.NumFields() - 2
	if n < 1 {
		return nil, nil, fmt.Errorf("%d columns, not a lake file", s.NumFields())
	}
	want := LakeSchema(arrow.NewSchema(nil, nil)).Fields()
	fields := make([]arrow.Field, 0, n)
	for i, f := range s.Fields() {
		if i >= n {
			w := want[i-n]
			if f.Name != w.Name || !arrow.TypeEqual(f.Type, w.Type) {
				return nil, nil, fmt.Errorf("column %d is %s, want %s", i, f, w)
			}
			continue
		}
		if f.Name == LakeOffsetColumn || f.Name == LakeTimestampColumn {
			return nil, nil, fmt.Errorf("system column %s at %d", f.Name, i)
		}
		typ := f.Type
		if unit, _ := f.Metadata.GetValue(lakeTimeUnitKey); unit == "ms" && arrow.TypeEqual(typ, arrow.FixedWidthTypes.Time64us) {
			typ = arrow.FixedWidthTypes.Time32ms
			narrow = append(narrow, i)
		}
		fields = append(fields, arrow.Field{Name: f.Name, Type: typ, Nullable: f.Nullable})
	}
	return arrow.NewSchema(fields, nil), narrow, nil
}

// LakeFileNewest returns the newest commit timestamp (__timestamp) of the
// lake file r of size bytes from its footer statistics alone, without
// reading its rows; ok is false when the footer has none.
func LakeFileNewest(r io.ReaderAt, size int64) (newest int64, ok bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			newest, ok, err = 0, false, fmt.Errorf("tiering: lake file footer: unreadable: %v", p)
		}
	}()
	rdr, err := file.NewParquetReader(io.NewSectionReader(r, 0, size))
	if err != nil {
		return 0, false, fmt.Errorf("tiering: lake file footer: %w", err)
	}
	defer rdr.Close()
	md := rdr.MetaData()
	for i := range md.NumRowGroups() {
		rg := md.RowGroup(i)
		if rg.NumColumns() < 3 {
			return 0, false, fmt.Errorf("tiering: lake file footer: %d columns, not a lake file", rg.NumColumns())
		}
		col, err := rg.ColumnChunk(rg.NumColumns() - 1) // __timestamp is the last column
		if err != nil {
			return 0, false, fmt.Errorf("tiering: lake file footer: %w", err)
		}
		if set, err := col.StatsSet(); err != nil || !set {
			return 0, false, nil
		}
		st, err := col.Statistics()
		if err != nil {
			return 0, false, fmt.Errorf("tiering: lake file footer: %w", err)
		}
		ts, isInt := st.(*metadata.Int64Statistics)
		if !isInt || !ts.HasMinMax() {
			return 0, false, nil
		}
		if !ok || ts.Max() > newest {
			newest, ok = ts.Max(), true
		}
	}
	return newest, ok, nil
}
