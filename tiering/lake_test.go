package tiering

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/fluss-node/fluss-node/logstore/record"
)

// TestLakeFileRoundTrip encodes sample batches of every column type as a
// lake file and reads it back with the Parquet reader an engine would use:
// the table's columns hold the same values, __offset runs from the first
// batch's base offset, __timestamp is each row's batch commit time.
func TestLakeFileRoundTrip(t *testing.T) {
	cols := record.SampleSchema().ArrowSchema()
	var batches []LakeBatch
	base := int64(40)
	for i, n := range []int{3, 1, 5} {
		rec := record.SampleRecord(n, int64(i))
		defer rec.Release()
		batches = append(batches, LakeBatch{Rec: rec, BaseOffset: base, CommitTs: 1764583200000 + int64(i)})
		base += int64(n)
	}
	data, err := EncodeLakeFile(cols, batches)
	if err != nil {
		t.Fatal(err)
	}
	rdr, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	// The reader adds Parquet field ids as metadata; names, types and
	// nullability are what must match.
	got, want := tbl.Schema(), LakeSchema(cols)
	if got.NumFields() != want.NumFields() {
		t.Fatalf("lake file schema\n%s\nwant\n%s", got, want)
	}
	for i, f := range want.Fields() {
		if g := got.Field(i); g.Name != f.Name || !arrow.TypeEqual(g.Type, f.Type) || g.Nullable != f.Nullable {
			t.Fatalf("lake file field %d is %s, want %s", i, g, f)
		}
	}
	if tbl.NumRows() != 9 {
		t.Fatalf("%d rows, want 9", tbl.NumRows())
	}
	tr := array.NewTableReader(tbl, 100)
	defer tr.Release()
	if !tr.Next() {
		t.Fatal("no record")
	}
	rec := tr.Record()
	row := 0
	for _, b := range batches {
		for k := range int(b.Rec.NumRows()) {
			for c := range cols.NumFields() {
				if !array.SliceEqual(rec.Column(c), int64(row), int64(row+1), b.Rec.Column(c), int64(k), int64(k+1)) {
					t.Fatalf("row %d column %s: %v, want %v", row, cols.Field(c).Name, rec.Column(c), b.Rec.Column(c))
				}
			}
			off := rec.Column(cols.NumFields()).(*array.Int64).Value(row)
			ts := rec.Column(cols.NumFields() + 1).(*array.Timestamp).Value(row)
			if off != b.BaseOffset+int64(k) || ts != arrow.Timestamp(b.CommitTs) {
				t.Fatalf("row %d: __offset %d, __timestamp %d; want %d, %d", row, off, ts, b.BaseOffset+int64(k), b.CommitTs)
			}
			row++
		}
	}
	// A batch of another schema is refused.
	other := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int32}}, nil)
	if _, err := EncodeLakeFile(other, batches[:1]); err == nil {
		t.Fatal("a batch of another schema was encoded")
	}
}

func TestLakeNamesAndEnd(t *testing.T) {
	store, err := NewDirStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := LakeBucketDir("db", "t", 7, "", 2)
	for _, r := range [][2]int64{{0, 10}, {10, 25}, {40, 50}, {20, 30}} {
		if _, err := PutLakeFile(store, dir, r[0], r[1], []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.Put(dir+"/notes.txt", bytes.NewReader([]byte("x")), 1); err != nil {
		t.Fatal(err)
	}
	files, err := ListLake(store, dir)
	if err != nil {
		t.Fatal(err)
	}
	var ranges [][2]int64
	for _, f := range files {
		ranges = append(ranges, [2]int64{f.FirstOffset, f.NextOffset})
	}
	if !slices.Equal(ranges, [][2]int64{{0, 10}, {10, 25}, {20, 30}, {40, 50}}) {
		t.Fatalf("listed %v", ranges)
	}
	if end := LakeEnd(files); end != 30 {
		t.Fatalf("LakeEnd = %d, want 30 (the gap before 40 ends the run)", end)
	}
	if d := LakeBucketDir("db", "t", 7, "2026-12-04", 0); d != "db/t/7/2026-12-04/bucket=0" {
		t.Fatal(d)
	}
	for _, bad := range []string{"1-2.parquet", "00000000000000000005-00000000000000000005.parquet", "x.parquet"} {
		if f, ok := parseLakeFileName(bad); ok {
			t.Fatalf("%q parsed as %+v", bad, f)
		}
	}
}

func FuzzParseLakeFileName(f *testing.F) {
	f.Add(baseName(lakeFileName("d", 3, 7)))
	f.Add("00000000000000000001-00000000000000000005.parquet")
	f.Fuzz(func(t *testing.T, name string) {
		lf, ok := parseLakeFileName(name)
		if !ok {
			return
		}
		if lf.NextOffset <= lf.FirstOffset || lf.FirstOffset < 0 || baseName(lakeFileName("d", lf.FirstOffset, lf.NextOffset)) != name {
			t.Fatalf("%q parsed as %+v", name, lf)
		}
	})
}

// lakeTestFile is a lake file of 9 rows at offsets [40, 49) in three
// batches, the last two sharing a commit timestamp.
func lakeTestFile(t testing.TB) (data []byte, f LakeFile, batches []LakeBatch) {
	base := int64(40)
	for i, n := range []int{3, 1, 5} {
		rec := record.SampleRecord(n, int64(i))
		t.Cleanup(rec.Release)
		batches = append(batches, LakeBatch{Rec: rec, BaseOffset: base, CommitTs: 1764583200000 + int64(min(i, 1))})
		base += int64(n)
	}
	data, err := EncodeLakeFile(record.SampleSchema().ArrowSchema(), batches)
	if err != nil {
		t.Fatal(err)
	}
	return data, LakeFile{Name: lakeFileName("d", 40, base), FirstOffset: 40, NextOffset: base}, batches
}

// TestReadLakeFile: a lake file reads back as the rows written, with their
// offsets and commit timestamps, in batches of one timestamp each; a file
// whose rows are not the offsets its name says is refused.
func TestReadLakeFile(t *testing.T) {
	data, f, written := lakeTestFile(t)
	cols, got, err := ReadLakeFile(data, f)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, b := range got {
			b.Rec.Release()
		}
	}()
	want := record.SampleSchema().ArrowSchema()
	if !cols.Equal(want) {
		t.Fatalf("columns\n%s\nwant\n%s", cols, want)
	}
	// Batches 1 and 2 share a timestamp, so they read back as one.
	if len(got) != 2 || got[0].BaseOffset != 40 || got[0].Rec.NumRows() != 3 || got[1].BaseOffset != 43 || got[1].Rec.NumRows() != 6 {
		t.Fatalf("read %d batches: %+v", len(got), got)
	}
	if got[0].CommitTs != written[0].CommitTs || got[1].CommitTs != written[1].CommitTs {
		t.Fatalf("commit timestamps %d, %d; want %d, %d", got[0].CommitTs, got[1].CommitTs, written[0].CommitTs, written[1].CommitTs)
	}
	row := 0
	for _, w := range written {
		for k := range int(w.Rec.NumRows()) {
			b, i := got[0], row
			if row >= 3 {
				b, i = got[1], row-3
			}
			for c := range want.NumFields() {
				if !array.SliceEqual(b.Rec.Column(c), int64(i), int64(i+1), w.Rec.Column(c), int64(k), int64(k+1)) {
					t.Fatalf("row %d column %s differs", row, want.Field(c).Name)
				}
			}
			row++
		}
	}
	for _, bad := range []LakeFile{
		{Name: "short", FirstOffset: 40, NextOffset: 48},   // fewer rows than the file has
		{Name: "shifted", FirstOffset: 41, NextOffset: 50}, // __offset values are not the name's
	} {
		if _, bs, err := ReadLakeFile(data, bad); err == nil {
			t.Fatalf("%s: read %d batches, want an error", bad.Name, len(bs))
		}
	}
	if _, _, err := ReadLakeFile(data[:len(data)/2], f); err == nil {
		t.Fatal("a truncated file was read")
	}
	newest, ok, err := LakeFileNewest(bytes.NewReader(data), int64(len(data)))
	if err != nil || !ok || newest != written[2].CommitTs {
		t.Fatalf("LakeFileNewest = %d, %v, %v; want %d", newest, ok, err, written[2].CommitTs)
	}
	if _, _, err := LakeFileNewest(bytes.NewReader(data[:len(data)-9]), int64(len(data)-9)); err == nil {
		t.Fatal("a truncated footer was read")
	}
}

// timedLakeFile is a lake file of lf's offsets with a TIME(3) column,
// stored widened, so the file stores its Arrow schema.
func timedLakeFile(t testing.TB, lf LakeFile) []byte {
	t.Helper()
	cols := arrow.NewSchema([]arrow.Field{{Name: "at", Type: arrow.FixedWidthTypes.Time32ms, Nullable: true}}, nil)
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, cols, strings.NewReader(`[{"at":"00:00:01"},{},{"at":"00:00:02"},{},{},{},{},{},{"at":"23:00:00"}]`))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	data, err := EncodeLakeFile(cols, []LakeBatch{{Rec: rec, BaseOffset: lf.FirstOffset, CommitTs: 7}})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestReadLakeFileChecksStoredSchema: a footer whose stored Arrow schema
// declares a message longer than itself is refused before arrow-go's IPC
// reader allocates that length (FuzzReadLakeFile found a 32 GiB one, which
// ran the process out of memory).
func TestReadLakeFileChecksStoredSchema(t *testing.T) {
	_, f, _ := lakeTestFile(t)
	data := timedLakeFile(t, f)
	_, bs, err := ReadLakeFile(data, f)
	if err != nil || len(bs) != 1 {
		t.Fatalf("the undamaged file: %d batches, %v", len(bs), err)
	}
	bs[0].Rec.Release()
	md, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	stored := md.MetaData().KeyValueMetadata().FindValue("ARROW:schema")
	md.Close()
	if stored == nil {
		t.Fatal("the lake file stores no Arrow schema")
	}
	msg, err := base64.StdEncoding.DecodeString(*stored)
	if err != nil || len(msg) < 8 {
		t.Fatalf("stored schema %q: %v", *stored, err)
	}
	binary.LittleEndian.PutUint32(msg[4:], 0x7ffffff0) // metadata length: 2 GiB
	bad := base64.StdEncoding.EncodeToString(msg)
	if len(bad) != len(*stored) || bytes.Count(data, []byte(*stored)) != 1 {
		t.Fatal("cannot swap the stored schema in place")
	}
	damaged := bytes.Replace(data, []byte(*stored), []byte(bad), 1)
	if _, bs, err := ReadLakeFile(damaged, f); err == nil || !strings.Contains(err.Error(), "stored Arrow schema") {
		t.Fatalf("read %d batches, err %v; want the stored Arrow schema refused", len(bs), err)
	}
}

func TestLakeEndFrom(t *testing.T) {
	files := []LakeFile{{FirstOffset: 0, NextOffset: 10}, {FirstOffset: 30, NextOffset: 40}, {FirstOffset: 35, NextOffset: 50}, {FirstOffset: 60, NextOffset: 70}}
	for _, c := range []struct{ from, want int64 }{{0, 10}, {5, 10}, {10, 10}, {20, 20}, {30, 50}, {45, 50}, {50, 50}, {65, 70}, {80, 80}} {
		if got := LakeEndFrom(files, c.from); got != c.want {
			t.Errorf("LakeEndFrom(%d) = %d, want %d", c.from, got, c.want)
		}
	}
}

// FuzzReadLakeFile: whatever the bytes, LakeFileNewest returns, and
// ReadLakeFile returns an error or batches of its columns that hold exactly
// the file's offsets.
func FuzzReadLakeFile(f *testing.F) {
	data, lf, _ := lakeTestFile(f)
	f.Add(data)
	f.Add(timedLakeFile(f, lf))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _, _ = LakeFileNewest(bytes.NewReader(data), int64(len(data))) // must not panic
		cols, batches, err := ReadLakeFile(data, lf)
		if err != nil {
			return
		}
		next := lf.FirstOffset
		for _, b := range batches {
			if !b.Rec.Schema().Equal(cols) || b.BaseOffset != next || b.Rec.NumRows() == 0 {
				t.Fatalf("batch at %d (want %d) of %d rows, schema %s", b.BaseOffset, next, b.Rec.NumRows(), b.Rec.Schema())
			}
			next += b.Rec.NumRows()
			b.Rec.Release()
		}
		if next != lf.NextOffset {
			t.Fatalf("batches end at %d, want %d", next, lf.NextOffset)
		}
	})
}

// BenchmarkReadLakeFile decodes a lake file of 64 batches of 2,000 sample
// rows (10 columns), as a union read does for each file it opens.
func BenchmarkReadLakeFile(b *testing.B) {
	var batches []LakeBatch
	for i := range 64 {
		rec := record.SampleRecord(2000, int64(i))
		defer rec.Release()
		batches = append(batches, LakeBatch{Rec: rec, BaseOffset: int64(i) * 2000, CommitTs: 1764583200000 + int64(i)})
	}
	data, err := EncodeLakeFile(record.SampleSchema().ArrowSchema(), batches)
	if err != nil {
		b.Fatal(err)
	}
	f := LakeFile{Name: "bench", FirstOffset: 0, NextOffset: 64 * 2000}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		_, got, err := ReadLakeFile(data, f)
		if err != nil {
			b.Fatal(err)
		}
		for _, lb := range got {
			lb.Rec.Release()
		}
	}
	b.ReportMetric(float64(f.NextOffset)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// TestLakeFileTimeMillis: a TIME(0-3) column (time32[ms]) is stored as
// microseconds, the unit Iceberg and engines read, and ReadLakeFile gives
// it back as milliseconds, nulls and all; a file written before that, with
// milliseconds stored, reads the same.
func TestLakeFileTimeMillis(t *testing.T) {
	cols := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "at", Type: arrow.FixedWidthTypes.Time32ms, Nullable: true},
	}, nil)
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, cols, strings.NewReader(`[{"id":1,"at":"23:59:59.999"},{"id":2},{"id":3,"at":"00:00:00.001"}]`))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	f := LakeFile{Name: "d/" + lakeFileName("", 0, 3)[1:], FirstOffset: 0, NextOffset: 3}
	check := func(data []byte) {
		t.Helper()
		got, batches, err := ReadLakeFile(data, f)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			for _, b := range batches {
				b.Rec.Release()
			}
		}()
		if !got.Equal(cols) || len(batches) != 1 || !array.RecordEqual(batches[0].Rec, rec) {
			t.Fatalf("read back %s %v, want %s %v", got, batches, cols, rec)
		}
	}
	data, err := EncodeLakeFile(cols, []LakeBatch{{Rec: rec, BaseOffset: 0, CommitTs: 1}})
	if err != nil {
		t.Fatal(err)
	}
	rdr, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if lt := rdr.MetaData().Schema.Column(1).LogicalType().String(); !strings.Contains(lt, "microseconds") {
		t.Fatalf("TIME(3) stored as %s, want microseconds", lt)
	}
	check(data)

	// As written before: milliseconds in the file.
	old := arrow.NewSchema(append(slices.Clone(cols.Fields()), LakeSchema(arrow.NewSchema(nil, nil)).Fields()...), nil)
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(old, &buf, parquet.NewWriterProperties(), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	offs, _, _ := array.FromJSON(memory.DefaultAllocator, arrow.PrimitiveTypes.Int64, strings.NewReader(`[0,1,2]`))
	ts, _, _ := array.FromJSON(memory.DefaultAllocator, &arrow.TimestampType{Unit: arrow.Millisecond}, strings.NewReader(`[1,1,1]`))
	oldRec := array.NewRecord(old, append(slices.Clone(rec.Columns()), offs, ts), 3)
	if err := w.Write(oldRec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	check(buf.Bytes())
}
