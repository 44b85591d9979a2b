package tiering

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog/hadoop"
	"github.com/apache/iceberg-go/table"

	"github.com/fluss-node/fluss-node/logstore/record"
)

// icebergRows reads table db.name of the Hadoop catalog at root with
// iceberg-go's own scan, as an engine would, and returns its rows as
// JSON objects ordered by id, and its schema.
func icebergRows(t *testing.T, root, db, name string, filter iceberg.BooleanExpression) ([]map[string]any, *iceberg.Schema) {
	t.Helper()
	cat, err := hadoop.NewCatalog("check", root, iceberg.Properties{})
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := cat.LoadTable(context.Background(), table.Identifier{db, name})
	if err != nil {
		t.Fatal(err)
	}
	var opts []table.ScanOption
	if filter != nil {
		opts = append(opts, table.WithRowFilter(filter))
	}
	at, err := tbl.Scan(opts...).ToArrowTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer at.Release()
	var rows []map[string]any
	tr := array.NewTableReader(at, 1<<20)
	defer tr.Release()
	for tr.Next() {
		js, err := tr.RecordBatch().MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var part []map[string]any
		if err := json.Unmarshal(js, &part); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, part...)
	}
	slices.SortFunc(rows, func(a, b map[string]any) int { return cmp.Compare(a["id"].(float64), b["id"].(float64)) })
	return rows, tbl.Schema()
}

// newIcebergLake returns a lake directory, its store and its Iceberg
// metadata keeper.
func newIcebergLake(t *testing.T) (root string, store Store, lake *IcebergLake) {
	t.Helper()
	root = t.TempDir()
	store, err := NewDirStore(root)
	if err != nil {
		t.Fatal(err)
	}
	if lake, err = OpenIcebergLake(root); err != nil {
		t.Fatal(err)
	}
	return root, store, lake
}

// putLakeJSON stores the rows (a JSON array of objects of columns cols)
// as the lake file of offsets [first, first+len(rows)) in dir.
func putLakeJSON(t *testing.T, store Store, dir string, cols *arrow.Schema, first int64, rows string) LakeFile {
	t.Helper()
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, cols, strings.NewReader(rows))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	data, err := EncodeLakeFile(cols, []LakeBatch{{Rec: rec, BaseOffset: first, CommitTs: 1764583200000 + first}})
	if err != nil {
		t.Fatal(err)
	}
	next := first + rec.NumRows()
	name, err := PutLakeFile(store, dir, first, next, data)
	if err != nil {
		t.Fatal(err)
	}
	return LakeFile{Name: name, FirstOffset: first, NextOffset: next}
}

func ids(rows []map[string]any) []string {
	var out []string
	for _, r := range rows {
		out = append(out, fmt.Sprint(r["id"], "@", r[LakeOffsetColumn]))
	}
	return out
}

// TestIcebergSyncBucket: the lake files of each bucket become the data
// files of an Iceberg table that iceberg-go reads back row for row; a
// schema version's new column joins the Iceberg schema (before the system
// columns); files
// compaction replaced leave the table in one snapshot and stay on disk
// until the snapshots that hold them expire; and a table of the same name
// but a new id gets a new Iceberg table, the old one's metadata set aside.
func TestIcebergSyncBucket(t *testing.T) {
	root, store, lake := newIcebergLake(t)
	ctx := context.Background()
	v1 := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "at", Type: arrow.FixedWidthTypes.Time64us, Nullable: true},
		{Name: "at_ms", Type: arrow.FixedWidthTypes.Time32ms, Nullable: true}, // TIME(3): stored as microseconds
		{Name: "amount", Type: &arrow.Decimal128Type{Precision: 10, Scale: 2}, Nullable: true},
	}, nil)
	tbl := IcebergTable{Database: "db", Name: "t", ID: 7, Columns: []*arrow.Schema{v1}, SnapshotRetention: time.Hour}
	b0, b1 := LakeBucketDir("db", "t", 7, "", 0), LakeBucketDir("db", "t", 7, "", 1)
	f0 := putLakeJSON(t, store, b0, v1, 0, `[{"id":1,"s":"a","at":"10:00:00.000001","at_ms":"10:00:00.123","amount":"1.50"},{"id":2},{"id":3,"s":"c"}]`)
	f1 := putLakeJSON(t, store, b0, v1, 3, `[{"id":4,"s":"d"},{"id":5,"s":"e"}]`)
	g0 := putLakeJSON(t, store, b1, v1, 0, `[{"id":10,"s":"x"},{"id":11,"s":"y"}]`)
	sync := func(tbl IcebergTable, dir string, files ...LakeFile) IcebergSync {
		t.Helper()
		res, err := lake.SyncBucket(ctx, tbl, dir, files)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := sync(tbl, b0, f0, f1); res.Added != 2 || res.Removed != 0 || !res.Committed {
		t.Fatalf("first sync of bucket 0: %+v", res)
	}
	if res := sync(tbl, b1, g0); res.Added != 1 || !res.Committed {
		t.Fatalf("first sync of bucket 1: %+v", res)
	}
	if res := sync(tbl, b1, g0); res.Committed {
		t.Fatalf("a sync without changes committed: %+v", res)
	}
	rows, schema := icebergRows(t, root, "db", "t", nil)
	if got, want := ids(rows), []string{"1@0", "2@1", "3@2", "4@3", "5@4", "10@0", "11@1"}; !slices.Equal(got, want) {
		t.Fatalf("Iceberg rows %v, want %v", got, want)
	}
	if r := rows[0]; r["s"] != "a" || r["amount"] != "1.5" || r["at"] != "10:00:00.000001" || r["at_ms"] != "10:00:00.123" || r[LakeTimestampColumn] == nil {
		t.Fatalf("row %v", r)
	}
	for _, c := range []string{"at", "at_ms"} {
		if f, ok := schema.FindFieldByName(c); !ok || f.Type != iceberg.PrimitiveTypes.Time {
			t.Fatalf("Iceberg schema %s", schema)
		}
	}

	// A schema version adds a column.
	v2 := arrow.NewSchema(append(slices.Clone(v1.Fields()), arrow.Field{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true}), nil)
	tbl.Columns = append(tbl.Columns, v2)
	f2 := putLakeJSON(t, store, b0, v2, 5, `[{"id":6,"note":"new"},{"id":7}]`)
	if res := sync(tbl, b0, f0, f1, f2); res.Added != 1 {
		t.Fatalf("sync after a schema change: %+v", res)
	}
	rows, schema = icebergRows(t, root, "db", "t", nil)
	var names []string
	for _, f := range schema.Fields() {
		names = append(names, f.Name)
	}
	if want := []string{"id", "s", "at", "at_ms", "amount", "note", LakeOffsetColumn, LakeTimestampColumn}; !slices.Equal(names, want) {
		t.Fatalf("Iceberg columns %v, want %v", names, want)
	}
	if len(rows) != 9 || rows[5]["note"] != "new" || rows[0]["note"] != nil {
		t.Fatalf("rows after the schema change: %v", rows)
	}

	// Compaction merges f0 and f1: one snapshot swaps them for the merged file.
	merged := putLakeJSON(t, store, b0, v1, 0, `[{"id":1,"s":"a","at":"10:00:00.000001","at_ms":"10:00:00.123","amount":"1.50"},{"id":2},{"id":3,"s":"c"},{"id":4,"s":"d"},{"id":5,"s":"e"}]`)
	if res := sync(tbl, b0, merged, f2); res.Added != 1 || res.Removed != 2 {
		t.Fatalf("sync after compaction: %+v", res)
	}
	if got, _ := icebergRows(t, root, "db", "t", nil); !slices.Equal(ids(got), ids(rows)) {
		t.Fatalf("rows after compaction %v, want %v", ids(got), ids(rows))
	}
	for _, f := range []LakeFile{f0, f1} {
		if _, err := os.Stat(filepath.Join(root, f.Name)); err != nil {
			t.Fatalf("a replaced file is gone while a snapshot holds it: %v", err)
		}
	}
	// Past the retention only the current snapshot is kept, and the files
	// only older snapshots held are deleted with them.
	tbl.SnapshotRetention = time.Millisecond
	time.Sleep(10 * time.Millisecond)
	if res := sync(tbl, b0, merged, f2); res.Committed || !res.Expired {
		t.Fatalf("sync past the retention: %+v", res)
	}
	for _, f := range []LakeFile{f0, f1} {
		if _, err := os.Stat(filepath.Join(root, f.Name)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("replaced file %s after its snapshots expired: %v", f.Name, err)
		}
	}
	if got, _ := icebergRows(t, root, "db", "t", nil); !slices.Equal(ids(got), ids(rows)) {
		t.Fatalf("rows after expiry %v, want %v", ids(got), ids(rows))
	}

	// A new table of the same name.
	nb := LakeBucketDir("db", "t", 8, "", 0)
	h0 := putLakeJSON(t, store, nb, v1, 0, `[{"id":100}]`)
	if res := sync(IcebergTable{Database: "db", Name: "t", ID: 8, Columns: []*arrow.Schema{v1}, SnapshotRetention: time.Hour}, nb, h0); res.Added != 1 {
		t.Fatalf("sync of the new table: %+v", res)
	}
	if got, _ := icebergRows(t, root, "db", "t", nil); !slices.Equal(ids(got), []string{"100@0"}) {
		t.Fatalf("the new table's rows: %v", ids(got))
	}
	if _, err := os.Stat(filepath.Join(root, "db", "t", "7", "metadata", "version-hint.text")); err != nil {
		t.Fatalf("the old table's metadata: %v", err)
	}
	// The old table cannot take it back.
	if _, err := lake.SyncBucket(ctx, tbl, b0, []LakeFile{merged, f2}); err == nil || !strings.Contains(err.Error(), "another table") {
		t.Fatalf("sync of the older table over the newer: %v", err)
	}
}

// TestIcebergPartitioned: a partitioned table's Iceberg table is
// partitioned by identity on its partition columns, with each file's
// partition value read from its statistics, so a filter on the partition
// column prunes files.
func TestIcebergPartitioned(t *testing.T) {
	root, store, lake := newIcebergLake(t)
	cols := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "dt", Type: arrow.BinaryTypes.String},
	}, nil)
	tbl := IcebergTable{Database: "db", Name: "p", ID: 3, Columns: []*arrow.Schema{cols}, PartitionKeys: []string{"dt"}, SnapshotRetention: time.Hour}
	for i, dt := range []string{"2026-12-04", "2026-12-05"} {
		dir := LakeBucketDir("db", "p", 3, dt, 0)
		f := putLakeJSON(t, store, dir, cols, 0, fmt.Sprintf(`[{"id":%d,"dt":%q},{"id":%d,"dt":%q}]`, 2*i, dt, 2*i+1, dt))
		if _, err := lake.SyncBucket(context.Background(), tbl, dir, []LakeFile{f}); err != nil {
			t.Fatal(err)
		}
	}
	all, _ := icebergRows(t, root, "db", "p", nil)
	if len(all) != 4 {
		t.Fatalf("%d rows, want 4", len(all))
	}
	cat, err := hadoop.NewCatalog("check", root, iceberg.Properties{})
	if err != nil {
		t.Fatal(err)
	}
	it, err := cat.LoadTable(context.Background(), table.Identifier{"db", "p"})
	if err != nil {
		t.Fatal(err)
	}
	if spec := it.Spec(); spec.NumFields() != 1 || spec.Field(0).Name != "dt" {
		t.Fatalf("partition spec %v", spec)
	}
	tasks, err := it.Scan(table.WithRowFilter(iceberg.EqualTo(iceberg.Reference("dt"), "2026-12-05"))).PlanFiles(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 1 || !strings.Contains(tasks[0].File.FilePath(), "2026-12-05") {
		t.Fatalf("a filter on the partition column plans %d files, want the one of its partition", len(tasks))
	}
	rows, _ := icebergRows(t, root, "db", "p", iceberg.EqualTo(iceberg.Reference("dt"), "2026-12-05"))
	if got := ids(rows); !slices.Equal(got, []string{"2@0", "3@1"}) {
		t.Fatalf("rows of partition 2026-12-05: %v", got)
	}
}

// TestIcebergRefusesUnreadableTypes: a table with a column that Iceberg v2
// cannot read as the lake files store it (nanoseconds) gets no Iceberg
// table.
func TestIcebergRefusesUnreadableTypes(t *testing.T) {
	root, _, lake := newIcebergLake(t)
	for _, dt := range []arrow.DataType{arrow.FixedWidthTypes.Time64ns, &arrow.TimestampType{Unit: arrow.Nanosecond}} {
		cols := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "c", Type: dt}}, nil)
		_, err := lake.SyncBucket(context.Background(), IcebergTable{Database: "db", Name: "x", ID: 1, Columns: []*arrow.Schema{cols}}, LakeBucketDir("db", "x", 1, "", 0), nil)
		if !errors.Is(err, ErrIcebergType) || !strings.Contains(err.Error(), "column c") {
			t.Fatalf("%s: %v", dt, err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "db", "x")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an Iceberg table was made: %v", err)
	}
}

// TestIcebergSyncSequence: two buckets take turns, each adding a file per
// pass and merging its files every third pass, with a snapshot retention
// so short that every sync expires the snapshots before it. After every
// sync the table reads exactly the rows of both buckets' current files,
// and committed files merged away are deleted by the expiry, once.
func TestIcebergSyncSequence(t *testing.T) {
	root, store, lake := newIcebergLake(t)
	cols := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	tbl := IcebergTable{Database: "db", Name: "t", ID: 1, Columns: []*arrow.Schema{cols}, SnapshotRetention: time.Millisecond}
	rowsOf := func(b int32, first, next int64) string {
		var rows []string
		for o := first; o < next; o++ {
			rows = append(rows, fmt.Sprintf(`{"id":%d}`, int64(b)*1000+o))
		}
		return "[" + strings.Join(rows, ",") + "]"
	}
	current := map[int32][]LakeFile{}
	var replaced []LakeFile
	for step := range 24 {
		b := int32(step % 2)
		dir := LakeBucketDir("db", "t", 1, "", b)
		files := current[b]
		next := int64(0)
		if len(files) > 0 {
			next = files[len(files)-1].NextOffset
		}
		files = append(files, putLakeJSON(t, store, dir, cols, next, rowsOf(b, next, next+2)))
		if len(files) == 3 {
			replaced = append(replaced, files[:2]...) // the third was never committed: not Iceberg's to delete
			files = []LakeFile{putLakeJSON(t, store, dir, cols, files[0].FirstOffset, rowsOf(b, files[0].FirstOffset, files[2].NextOffset))}
		}
		current[b] = files
		time.Sleep(2 * time.Millisecond)
		if _, err := lake.SyncBucket(context.Background(), tbl, dir, files); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		var want []string
		for _, b := range []int32{0, 1} {
			for _, f := range current[b] {
				for o := f.FirstOffset; o < f.NextOffset; o++ {
					want = append(want, fmt.Sprintf("%d@%d", int64(b)*1000+o, o))
				}
			}
		}
		rows, _ := icebergRows(t, root, "db", "t", nil)
		if got := ids(rows); !slices.Equal(got, want) {
			t.Fatalf("step %d: rows %v, want %v", step, got, want)
		}
	}
	time.Sleep(2 * time.Millisecond)
	for _, b := range []int32{0, 1} {
		if _, err := lake.SyncBucket(context.Background(), tbl, LakeBucketDir("db", "t", 1, "", b), current[b]); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range replaced {
		if _, err := os.Stat(filepath.Join(root, f.Name)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("replaced file %s is still there: %v", f.Name, err)
		}
	}
}

// TestIcebergConcurrentBuckets: the leaders of four buckets, on four
// nodes (an IcebergLake each, one lake directory), commit at the same
// time; commits that lose the race are tried again, and no bucket's files
// are lost to another's commit.
func TestIcebergConcurrentBuckets(t *testing.T) {
	root := t.TempDir()
	store, err := NewDirStore(root)
	if err != nil {
		t.Fatal(err)
	}
	cols := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	tbl := IcebergTable{Database: "db", Name: "t", ID: 1, Columns: []*arrow.Schema{cols}, SnapshotRetention: time.Hour}
	const buckets, passes = 4, 6
	errs := make(chan error, buckets)
	for b := range int32(buckets) {
		lake, err := OpenIcebergLake(root)
		if err != nil {
			t.Fatal(err)
		}
		dir := LakeBucketDir("db", "t", 1, "", b)
		var files []LakeFile
		for o := range int64(passes) {
			files = append(files, putLakeJSON(t, store, dir, cols, o, fmt.Sprintf(`[{"id":%d}]`, int64(b)*1000+o)))
		}
		go func() {
			for i := range passes {
				if _, err := lake.SyncBucket(context.Background(), tbl, dir, files[:i+1]); err != nil {
					errs <- fmt.Errorf("bucket %d pass %d: %w", b, i, err)
					return
				}
			}
			errs <- nil
		}()
	}
	for range buckets {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	var want []string
	for b := range int64(buckets) {
		for o := range int64(passes) {
			want = append(want, fmt.Sprintf("%d@%d", b*1000+o, o))
		}
	}
	if rows, _ := icebergRows(t, root, "db", "t", nil); !slices.Equal(ids(rows), want) {
		t.Fatalf("rows %v, want %v", ids(rows), want)
	}
}

// BenchmarkIcebergSyncBucket: one lake pass's commit of a bucket that
// gained a file (1,000 rows), in a table of 16 buckets whose files add up
// as the benchmark runs: load the table, plan its files, describe the new
// file from its footer, commit (manifest, manifest list, metadata file).
func BenchmarkIcebergSyncBucket(b *testing.B) {
	root := b.TempDir()
	store, err := NewDirStore(root)
	if err != nil {
		b.Fatal(err)
	}
	lake, err := OpenIcebergLake(root)
	if err != nil {
		b.Fatal(err)
	}
	cols := record.SampleSchema().ArrowSchema()
	tbl := IcebergTable{Database: "db", Name: "t", ID: 1, Columns: []*arrow.Schema{cols}, SnapshotRetention: time.Hour}
	files := map[int32][]LakeFile{}
	put := func(bucket int32) {
		dir := LakeBucketDir("db", "t", 1, "", bucket)
		first := int64(0)
		if fs := files[bucket]; len(fs) > 0 {
			first = fs[len(fs)-1].NextOffset
		}
		rec := record.SampleRecord(1000, first)
		defer rec.Release()
		data, err := EncodeLakeFile(cols, []LakeBatch{{Rec: rec, BaseOffset: first, CommitTs: 1764583200000}})
		if err != nil {
			b.Fatal(err)
		}
		name, err := PutLakeFile(store, dir, first, first+1000, data)
		if err != nil {
			b.Fatal(err)
		}
		files[bucket] = append(files[bucket], LakeFile{Name: name, FirstOffset: first, NextOffset: first + 1000})
	}
	sync := func(bucket int32) {
		if _, err := lake.SyncBucket(context.Background(), tbl, LakeBucketDir("db", "t", 1, "", bucket), files[bucket]); err != nil {
			b.Fatal(err)
		}
	}
	for bucket := range int32(16) {
		put(bucket)
		sync(bucket)
	}
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		put(int32(i % 16))
		b.StartTimer()
		sync(int32(i % 16))
	}
}
