package node

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog/hadoop"
	"github.com/apache/iceberg-go/table"

	"github.com/fluss-node/fluss-node/node/replica"
	"github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/raftmeta"
	"github.com/fluss-node/fluss-node/rpc"
	"github.com/fluss-node/fluss-node/rpc/client"
	"github.com/fluss-node/fluss-node/tiering"
)

// lakeRows reads every lake file of a bucket with the Parquet reader an
// engine would use and returns its rows as JSON objects (without the
// system columns) and their __offset values, in file order.
func lakeRows(t *testing.T, store tiering.Store, dir string) (rows []map[string]any, offsets []int64) {
	t.Helper()
	files, err := tiering.ListLake(store, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		o, err := store.Open(f.Name)
		if err != nil {
			t.Fatal(err)
		}
		data := make([]byte, o.Size())
		if _, err := o.ReadAt(data, 0); err != nil {
			t.Fatal(err)
		}
		o.Close()
		rdr, err := file.NewParquetReader(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		tbl, err := fr.ReadTable(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range tableRows(t, tbl) {
			offsets = append(offsets, int64(r[tiering.LakeOffsetColumn].(float64)))
			if r[tiering.LakeTimestampColumn] == nil {
				t.Fatalf("%s: a row without %s", f.Name, tiering.LakeTimestampColumn)
			}
			delete(r, tiering.LakeOffsetColumn)
			delete(r, tiering.LakeTimestampColumn)
			rows = append(rows, r)
		}
		tbl.Release()
	}
	return rows, offsets
}

// tableRows returns the rows of tbl as JSON objects.
func tableRows(t *testing.T, tbl arrow.Table) (rows []map[string]any) {
	t.Helper()
	tr := array.NewTableReader(tbl, 1<<20)
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
	return rows
}

// icebergRows reads table db.name of the Iceberg (Hadoop) catalog in lake
// with iceberg-go, as an engine would, and returns its rows as JSON
// objects, sorted by (id, __offset), and the current snapshot's data files.
func icebergRows(t *testing.T, lake, db, name string) (rows []map[string]any, files []string, err error) {
	t.Helper()
	ctx := context.Background()
	cat, err := hadoop.NewCatalog("check", lake, iceberg.Properties{})
	if err != nil {
		return nil, nil, err
	}
	tbl, err := cat.LoadTable(ctx, table.Identifier{db, name})
	if err != nil {
		return nil, nil, err
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, task := range tasks {
		files = append(files, task.File.FilePath())
	}
	at, err := tbl.Scan().ToArrowTable(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer at.Release()
	rows = tableRows(t, at)
	key := func(r map[string]any) [2]float64 {
		id, _ := r["id"].(float64)
		return [2]float64{id, r[tiering.LakeOffsetColumn].(float64)}
	}
	slices.SortFunc(rows, func(a, b map[string]any) int {
		ka, kb := key(a), key(b)
		return cmp.Or(cmp.Compare(ka[0], kb[0]), cmp.Compare(ka[1], kb[1]))
	})
	return rows, files, nil
}

// waitForIceberg waits until table db.name of the lake's Iceberg catalog
// holds want rows and, unless files < 0, that many files, and returns its
// rows (icebergRows). A read
// may fail meanwhile: the table may not be there yet, or, with a short
// snapshot retention, a file of the snapshot read may just have expired.
func waitForIceberg(t *testing.T, lake, db, name string, files, want int) []map[string]any {
	t.Helper()
	var rows []map[string]any
	var last error
	deadline := time.Now().Add(15 * time.Second)
	for {
		var got []string
		rows, got, last = icebergRows(t, lake, db, name)
		if last == nil && (files < 0 || len(got) == files) && len(rows) == want {
			return rows
		}
		if time.Now().After(deadline) {
			t.Fatalf("Iceberg table %s.%s: %d files and %d rows (%v), want %d and %d", db, name, len(got), len(rows), last, files, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestLakeTiering: a log table with table.datalake.enabled is written to
// the lake directory as Parquet, bucket by bucket, incrementally: every
// committed row once, with dense __offset values, the same values the log
// returns, the small files of its passes merged into one. The files are
// an Iceberg table's, which reads every row once, and the files merged
// away are deleted once its snapshots that held them expire. A node
// without a lake directory refuses such a table.
func TestLakeTiering(t *testing.T) {
	longCluster(t)
	lake := t.TempDir()
	cfg := testConfig(t.TempDir())
	cfg.Tiering.LakeDir = lake
	cfg.Tiering.LakeSnapshotRetention = Duration{300 * time.Millisecond}
	n := startNode(t, cfg)
	defer n.Close()
	ctx, c := withDB(t, n)
	no := false
	tableID, err := c.CreateTable(ctx, &flussv1.CreateTableRequest{
		Table: "db.events",
		Schema: &flussv1.Schema{Columns: []*flussv1.Column{
			{Name: "id", Type: "BIGINT", Nullable: &no},
			{Name: "s", Type: "STRING"},
			{Name: "amount", Type: "DECIMAL(10,2)"},
			{Name: "ts", Type: "TIMESTAMP(3)"},
		}},
		BucketCount: 2,
		Properties:  map[string]string{"table.datalake.enabled": "true", "table.datalake.freshness": "1s"},
	})
	if err != nil {
		t.Fatal(err)
	}
	store, err := tiering.NewDirStore(lake)
	if err != nil {
		t.Fatal(err)
	}
	write := func(from, to int) {
		for i := from; i < to; i += 50 {
			var rows []string
			for k := i; k < i+50; k++ {
				rows = append(rows, fmt.Sprintf(`{"id":%d,"s":"row %d","amount":"%d.25","ts":%d}`, k, k, k, 1764583200000+k))
			}
			for b := int32(0); b < 2; b++ {
				if _, err := c.AppendRequest(ctx, &flussv1.AppendRequest{Table: "db.events", Bucket: &b, Rows: []byte("[" + strings.Join(rows, ",") + "]")}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	check := func(rowsPerBucket int) {
		t.Helper()
		for b := int32(0); b < 2; b++ {
			dir := tiering.LakeBucketDir("db", "events", tableID, "", b)
			// Each pass compacts what the passes before wrote: the lake
			// settles as one file of every row.
			waitFor(t, 20*time.Second, func() bool {
				files, err := tiering.ListLake(store, dir)
				return err == nil && len(files) == 1 && tiering.LakeEnd(files) == int64(rowsPerBucket)
			})
			rows, offsets := lakeRows(t, store, dir)
			if len(rows) != rowsPerBucket {
				t.Fatalf("bucket %d: %d lake rows, want %d", b, len(rows), rowsPerBucket)
			}
			for i, off := range offsets {
				if off != int64(i) {
					t.Fatalf("bucket %d: lake row %d has __offset %d", b, i, off)
				}
			}
			resp, err := c.Fetch(ctx, &flussv1.FetchRequest{Table: "db.events", Bucket: b, Offset: 0, MaxBytes: 16 << 20})
			if err != nil {
				t.Fatal(err)
			}
			var logRows []map[string]any
			if err := json.Unmarshal(resp.Rows, &logRows); err != nil {
				t.Fatal(err)
			}
			for i, r := range rows {
				id, _ := r["id"].(float64)
				if int(id) != i || r["s"] != fmt.Sprintf("row %d", i) || r["amount"] != fmt.Sprintf("%d.25", i) {
					t.Fatalf("bucket %d: lake row %d is %v; the log has %v", b, i, r, logRows[i])
				}
			}
		}
	}
	checkIceberg := func(rowsPerBucket int) {
		t.Helper()
		// The settled lake's files become the Iceberg table's (a bucket's
		// file may be written a moment before its commit): each row of
		// both buckets once (ids 0..n-1 at offsets 0..n-1 in each bucket).
		for i, r := range waitForIceberg(t, lake, "db", "events", 2, 2*rowsPerBucket) {
			if k := i / 2; r["id"] != float64(k) || r[tiering.LakeOffsetColumn] != float64(k) || r["s"] != fmt.Sprintf("row %d", k) {
				t.Fatalf("Iceberg row %d is %v, want id and __offset %d", i, r, k)
			}
		}
	}
	write(0, 200)
	check(200)
	checkIceberg(200)
	write(200, 300)
	check(300) // the second pass starts where the first ended
	checkIceberg(300)
	if commits := metricValue(t, scrape(t, n), "fluss_lake_iceberg_commits_total"); commits < 4 {
		t.Fatalf("fluss_lake_iceberg_commits_total = %v, want a commit per bucket per pass that changed it", commits)
	}

	// A node without a lake directory refuses such a table.
	other := startNode(t, testConfig(t.TempDir()))
	defer other.Close()
	ctx2, c2 := withDB(t, other)
	_, err = c2.CreateTable(ctx2, &flussv1.CreateTableRequest{
		Table:      "db.lake",
		Schema:     &flussv1.Schema{Columns: []*flussv1.Column{{Name: "id", Type: "BIGINT"}}},
		Properties: map[string]string{"table.datalake.enabled": "true"},
	})
	if codeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "lake_dir") {
		t.Fatalf("CreateTable with datalake on a node without a lake: %v", err)
	}
	if _, err := c2.CreateTable(ctx2, &flussv1.CreateTableRequest{
		Table: "db.plain", Schema: &flussv1.Schema{Columns: []*flussv1.Column{{Name: "id", Type: "BIGINT"}}},
	}); err != nil {
		t.Fatal(err)
	}
	err = c2.SetTableProperties(ctx2, "db.plain", map[string]string{"table.datalake.enabled": "true"})
	if codeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "lake_dir") {
		t.Fatalf("AlterTable turning datalake on, on a node without a lake: %v", err)
	}
	if m, _ := filepath.Glob(filepath.Join(lake, "db", "events", fmt.Sprint(tableID), "bucket=*", "*.parquet")); len(m) != 2 {
		t.Fatalf("%d lake files, want 2 (two buckets, their passes' files merged)", len(m))
	}
	if merged := metricValue(t, scrape(t, n), "fluss_lake_files_compacted_total"); merged < 2 {
		t.Fatalf("fluss_lake_files_compacted_total = %v, want the first passes' files merged away", merged)
	}

}

// TestLakeEnabledByAlterTable: a table whose lake tiering AlterTable turns
// on later is tiered from its first row; it cannot be turned off again.
func TestLakeEnabledByAlterTable(t *testing.T) {
	n, ctx, c, _, store := startLakeNode(t, time.Hour, 100*time.Millisecond)
	tableID, err := c.CreateTable(ctx, &flussv1.CreateTableRequest{
		Table:      "db.late",
		Schema:     &flussv1.Schema{Columns: []*flussv1.Column{{Name: "id", Type: "BIGINT"}}},
		Properties: map[string]string{"table.datalake.freshness": "1s"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for i := range 100 {
		rows = append(rows, fmt.Sprintf(`{"id":%d}`, i))
	}
	if _, err := c.Append(ctx, "db.late", []byte("["+strings.Join(rows, ",")+"]")); err != nil {
		t.Fatal(err)
	}
	dir := tiering.LakeBucketDir("db", "late", tableID, "", 0)
	time.Sleep(300 * time.Millisecond) // three lake passes
	if files, err := tiering.ListLake(store, dir); err != nil || len(files) != 0 {
		t.Fatalf("lake files of a table without table.datalake.enabled: %v, %v", files, err)
	}
	if err := c.SetTableProperties(ctx, "db.late", map[string]string{"table.datalake.enabled": "true"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, func() bool {
		files, err := tiering.ListLake(store, dir)
		return err == nil && len(files) > 0 && files[0].FirstOffset == 0 && tiering.LakeEnd(files) == 100
	})
	if err := c.SetTableProperties(ctx, "db.late", nil, "table.datalake.enabled"); codeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("turning the lake off: %v, want invalid_argument", err)
	}
	if tb, _ := n.meta.TableByID(tableID); !lakeEnabled(tb) {
		t.Fatal("the lake was turned off")
	}
}

// startLakeNode starts a node with a lake directory, 1 MiB segments,
// retention passes every retentionEvery and the lake loop looking at the
// buckets every lakeEvery (and opts applied to its configuration), and a
// database "db" on it.
func startLakeNode(t *testing.T, retentionEvery, lakeEvery time.Duration, opts ...func(*Config)) (n *Node, ctx context.Context, c *client.Client, lake string, store tiering.Store) {
	t.Helper()
	lake = t.TempDir()
	cfg := testConfig(t.TempDir())
	cfg.Tiering.LakeDir = lake
	for _, o := range opts {
		o(&cfg)
	}
	cfg.Storage.SegmentBytes = 1 << 20
	cfg.Storage.RetentionCheckInterval = Duration{retentionEvery}
	n = startNodeWith(t, cfg, func(n *Node) { n.lakeCheckEvery = lakeEvery })
	t.Cleanup(func() { n.Close() })
	ctx, c = withDB(t, n)
	store, err := tiering.NewDirStore(lake)
	if err != nil {
		t.Fatal(err)
	}
	return n, ctx, c, lake, store
}

// bigTableBucket returns, for bucket 0 of db.t (createBigTable) on n: its
// id, table, replica, lake directory and a listing of its lake files.
func bigTableBucket(t *testing.T, n *Node, store tiering.Store, tableID int64) (raftmeta.BucketID, *raftmeta.Table, *replica.Replica, string, func() []tiering.LakeFile) {
	t.Helper()
	id := raftmeta.BucketID{TableID: tableID, PartitionID: raftmeta.NoPartition, Bucket: 0}
	tbl, err := n.meta.TableByID(tableID)
	if err != nil {
		t.Fatal(err)
	}
	dir := tiering.LakeBucketDir("db", "t", tableID, "", 0)
	return id, tbl, n.replica(id), dir, func() []tiering.LakeFile {
		files, err := tiering.ListLake(store, dir)
		if err != nil {
			t.Fatal(err)
		}
		return files
	}
}

// TestLakeUnionRead: once table.log.ttl has dropped the oldest segments of
// a lake table, reads still start at offset 0: ListOffsets EARLIEST and a
// timestamp before the first row answer the lake's start, Fetch below the
// log start serves the lake's rows, and a Scan from EARLIEST returns every
// row written exactly once, in order, the lake's and then the log's. A
// lake with a gap before the log start is not read, and the lake tiering
// after such a gap does not write the log's rows again.
func TestLakeUnionRead(t *testing.T) {
	longCluster(t)
	// Lake passes run by hand below (and so no compaction merges their
	// files), retention every 100 ms.
	n, ctx, c, lake, store := startLakeNode(t, 100*time.Millisecond, time.Hour)
	tableID := createBigTable(t, ctx, c, map[string]string{"table.log.ttl": "6s", "table.datalake.enabled": "true"})
	id, tbl, r, _, lakeFiles := bigTableBucket(t, n, store, tableID)
	want, next := outliveTheLog(t, ctx, c, n, tableID, r, rand.New(rand.NewPCG(3, 4)), nil)
	for _, spec := range []flussv1.ListOffsetsRequest_Spec{flussv1.ListOffsetsRequest_EARLIEST, flussv1.ListOffsetsRequest_TIMESTAMP} {
		offs, err := c.ListOffsets(ctx, "db.t", spec, 1)
		if err != nil || len(offs) != 1 || offs[0].Offset != 0 {
			t.Fatalf("%v = %v, %v; want 0 (the lake's start)", spec, offs, err)
		}
	}
	var scanned []json.RawMessage
	err := c.Scan(ctx, &flussv1.ScanRequest{Table: "db.t", From: flussv1.ScanRequest_EARLIEST}, func(m *flussv1.ScanResponse) error {
		var part []json.RawMessage
		if len(m.Rows) > 0 {
			if err := json.Unmarshal(m.Rows, &part); err != nil {
				return err
			}
		}
		scanned = append(scanned, part...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(scanned); string(got) != want {
		t.Fatalf("Scan from EARLIEST: %d rows, differing from the %d written", len(scanned), next)
	}
	if r.LogStartOffset() <= 2000 {
		t.Fatal("the log start went back")
	}
	body := scrape(t, n)
	if metricValue(t, body, "fluss_lake_files_read_total") < 2 || metricValue(t, body, "fluss_lake_batches_read_total") < 1 {
		t.Fatalf("lake reads not counted:\n%s", body)
	}

	files := lakeFiles()
	mid := slices.IndexFunc(files, func(f tiering.LakeFile) bool { return f.FirstOffset == 1000 })
	if len(files) != 3 || mid != 1 || files[mid].NextOffset != 2000 {
		t.Fatalf("lake files %+v, want [0, 1000), [1000, 2000) and [2000, 3000)", files)
	}
	// The commit timestamp of offset 1000 (the second phase's first row,
	// written after the first phase reached the lake) finds offset 1000.
	data, err := os.ReadFile(filepath.Join(lake, files[mid].Name))
	if err != nil {
		t.Fatal(err)
	}
	_, batches, err := tiering.ReadLakeFile(data, files[mid])
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range batches {
		b.Rec.Release()
	}
	offs, err := c.ListOffsets(ctx, "db.t", flussv1.ListOffsetsRequest_TIMESTAMP, batches[0].CommitTs)
	if err != nil || len(offs) != 1 || offs[0].Offset != 1000 {
		t.Fatalf("offset for the commit timestamp of offset 1000 = %v, %v; want 1000", offs, err)
	}

	// A gap: without that file the lake no longer reaches the log.
	if err := store.Delete(files[mid].Name); err != nil {
		t.Fatal(err)
	}
	n.lakeReads.mu.Lock()
	n.lakeReads.lists = nil // as if lakeListingFor had passed
	n.lakeReads.mu.Unlock()
	offs, err = c.ListOffsets(ctx, "db.t", flussv1.ListOffsetsRequest_EARLIEST, 0)
	if err != nil || len(offs) != 1 || offs[0].Offset != r.LogStartOffset() {
		t.Fatalf("EARLIEST with a gap in the lake = %v, %v; want the log start %d", offs, err, r.LogStartOffset())
	}
	for _, off := range []int64{0, 1000} {
		if _, err := c.Fetch(ctx, &flussv1.FetchRequest{Table: "db.t", Bucket: 0, Offset: off}); codeOf(err) != connect.CodeOutOfRange {
			t.Fatalf("fetch at %d with a gap in the lake: %v, want out_of_range", off, err)
		}
	}
	// A lake pass after the gap writes nothing: the file after it already
	// continues from the log start.
	if _, _, err := n.tierToLake(id, tbl, r); err != nil {
		t.Fatal(err)
	}
	if got := lakeFiles(); len(got) != len(files)-1 {
		t.Fatalf("lake files after the gap: %+v, want the %d left", got, len(files)-1)
	}
}

// TestLakeHoldsBackRetention: table.log.ttl deletes a lake table's log
// segments only once the lake holds their rows, so no row is lost to both;
// the rows that left the log are read from the lake.
func TestLakeHoldsBackRetention(t *testing.T) {
	longCluster(t)
	// Retention and lake passes run by hand below; without Iceberg
	// metadata obsolete files are deleted at once (TestLakeIceberg).
	n, ctx, c, _, store := startLakeNode(t, time.Hour, time.Hour, func(c *Config) { c.Tiering.LakeFormat = "parquet" })
	tableID := createBigTable(t, ctx, c, map[string]string{"table.log.ttl": "1s", "table.datalake.enabled": "true"})
	id := raftmeta.BucketID{TableID: tableID, PartitionID: raftmeta.NoPartition, Bucket: 0}
	tbl, err := n.meta.TableByID(tableID)
	if err != nil {
		t.Fatal(err)
	}
	r := n.replica(id)
	lakeEnd := func() int64 {
		files, err := tiering.ListLake(store, tiering.LakeBucketDir("db", "t", tableID, "", 0))
		if err != nil {
			t.Fatal(err)
		}
		return tiering.LakeEnd(files)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	next := appendBig(t, ctx, c, rng, 0, 10) // ~2 MiB: segments of rows below 1,000
	if _, _, err := n.tierToLake(id, tbl, r); err != nil {
		t.Fatal(err)
	}
	if e := lakeEnd(); e != 1000 {
		t.Fatalf("lake end %d, want 1000", e)
	}
	next = appendBig(t, ctx, c, rng, next, 20)
	want := readAll(t, ctx, c, "db.t", 1)
	if lag := metricValue(t, scrape(t, n), "fluss_lake_lag_records"); lag != float64(next-1000) {
		t.Fatalf("fluss_lake_lag_records = %v, want %d (the rows after the lake end)", lag, next-1000)
	}
	time.Sleep(1200 * time.Millisecond) // every closed segment is past the ttl
	n.enforceRetention(id, r)
	if s := r.LogStartOffset(); s == 0 || s > 1000 {
		t.Fatalf("retention moved the log start to %d; want past 0 and at most the lake end 1000", s)
	}
	if _, _, err := n.tierToLake(id, tbl, r); err != nil {
		t.Fatal(err)
	}
	if e := lakeEnd(); e != int64(next) {
		t.Fatalf("lake end %d, want %d", e, next)
	}
	if lag := metricValue(t, scrape(t, n), "fluss_lake_lag_records"); lag != 0 {
		t.Fatalf("fluss_lake_lag_records = %v with every row in the lake", lag)
	}
	n.enforceRetention(id, r)
	if s := r.LogStartOffset(); s <= 1000 {
		t.Fatalf("with every row in the lake, retention left the log start at %d", s)
	}
	if got := readAll(t, ctx, c, "db.t", 1); got != want {
		t.Fatal("rows read back from the lake and the log differ from the rows written")
	}
}

// TestLakePrimaryKeyTable: a primary-key table with table.datalake.enabled
// writes its changelog to the lake (its columns, _change_type, __offset,
// __timestamp), and once table.log.ttl has dropped the head of its log,
// $changelog and $binlog still read from offset 0, through the lake, the
// same rows as before. A column added midway splits the changelog into
// files of two schema versions, and the union read fills the new column of
// the earlier one with nulls, as the log did.
func TestLakePrimaryKeyTable(t *testing.T) {
	longCluster(t)
	// The lake pass runs by hand below (so no compaction runs as the files
	// are read), retention every 100 ms.
	n, ctx, c, _, store := startLakeNode(t, 100*time.Millisecond, time.Hour)
	no := false
	tableID, err := c.CreateTable(ctx, &flussv1.CreateTableRequest{
		Table: "db.pk",
		Schema: &flussv1.Schema{Columns: []*flussv1.Column{{Name: "id", Type: "BIGINT", Nullable: &no}, {Name: "s", Type: "STRING"}},
			PrimaryKey: []string{"id"}},
		BucketCount: 1,
		Properties: map[string]string{"table.log.arrow.compression.type": "NONE", "table.log.ttl": "6s",
			"table.datalake.enabled": "true", "table.datalake.freshness": "1s"},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Inserts of keys 0..1499, then updates of all of them (-U and +U),
	// then (with a column added) updates of keys 0..99, then deletes of
	// keys 0..49: ~9 MiB of changelog.
	pad := strings.Repeat("x", 2000)
	for k := 0; k < 3000; k += 100 {
		var rows []string
		for i := k; i < k+100; i++ {
			rows = append(rows, fmt.Sprintf(`{"id":%d,"s":"%d %s"}`, i%1500, i, pad))
		}
		if _, err := c.Upsert(ctx, "db.pk", []byte("["+strings.Join(rows, ",")+"]"), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.AddColumns(ctx, "db.pk", &flussv1.Column{Name: "n", Type: "BIGINT"}); err != nil {
		t.Fatal(err)
	}
	var v2 []string
	for i := range 100 {
		v2 = append(v2, fmt.Sprintf(`{"id":%d,"s":"v2","n":%d}`, i, i))
	}
	if _, err := c.Upsert(ctx, "db.pk", []byte("["+strings.Join(v2, ",")+"]"), nil); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for i := range 50 {
		keys = append(keys, fmt.Sprintf(`{"id":%d}`, i))
	}
	if _, err := c.Delete(ctx, "db.pk", []byte("["+strings.Join(keys, ",")+"]")); err != nil {
		t.Fatal(err)
	}
	const changes = 1500 + 2*1500 + 2*100 + 50
	changelog, binlog := readAll(t, ctx, c, "db.pk$changelog", 1), readAll(t, ctx, c, "db.pk$binlog", 1)

	id := raftmeta.BucketID{TableID: tableID, PartitionID: raftmeta.NoPartition, Bucket: 0}
	tbl, err := n.meta.TableByID(tableID)
	if err != nil {
		t.Fatal(err)
	}
	r := n.replica(id)
	if _, _, err := n.tierToLake(id, tbl, r); err != nil {
		t.Fatal(err)
	}
	dir := tiering.LakeBucketDir("db", "pk", tableID, "", 0)
	if files, err := tiering.ListLake(store, dir); err != nil || tiering.LakeEnd(files) != changes {
		t.Fatalf("lake files %+v, %v; want them to end at %d", files, err, changes)
	}
	rows, offsets := lakeRows(t, store, dir)
	kinds := map[float64]int{}
	for i, r := range rows {
		if offsets[i] != int64(i) {
			t.Fatalf("lake row %d has __offset %d", i, offsets[i])
		}
		kinds[r["_change_type"].(float64)]++
	}
	// kvstore.ChangeType: 0 +I, 1 -U, 2 +U, 3 -D.
	if kinds[0] != 1500 || kinds[1] != 1600 || kinds[2] != 1600 || kinds[3] != 50 {
		t.Fatalf("lake change types %v, want 1500 +I, 1600 -U and +U, and 50 -D", kinds)
	}

	waitFor(t, 30*time.Second, func() bool { return r.LogStartOffset() > 0 })
	if got := readAll(t, ctx, c, "db.pk$changelog", 1); got != changelog {
		t.Fatalf("$changelog through the lake differs from the log's (%d and %d bytes)", len(got), len(changelog))
	}
	if got := readAll(t, ctx, c, "db.pk$binlog", 1); got != binlog {
		t.Fatalf("$binlog through the lake differs from the log's (%d and %d bytes)", len(got), len(binlog))
	}
	if r.LogStartOffset() == 0 {
		t.Fatal("the log start went back")
	}
	// The table itself (its KV state) is untouched by all this.
	got, err := c.Lookup(ctx, "db.pk", []byte(`[{"id":49},{"id":50},{"id":100}]`), []string{"id", "n"})
	if err != nil || string(got) != `[null,{"id":50,"n":50},{"id":100,"n":null}]` {
		t.Fatalf("lookups after the union read: %s, %v", got, err)
	}
}

// TestClusterLakeUnionRead: three nodes share a lake directory. The leader
// of an RF 3 lake table writes its lake; every replica's retention drops
// the segments the lake holds; after the leader stops, the new one serves
// the union read (through any node) and continues the lake where the old
// one stopped.
func TestClusterLakeUnionRead(t *testing.T) {
	longCluster(t)
	lake := t.TempDir()
	nodes, _ := opsClusterWith(t, 3, func(c *Config) {
		c.Storage.SegmentBytes = 1 << 20
		c.Storage.RetentionCheckInterval = Duration{100 * time.Millisecond}
		c.Tiering.LakeDir = lake
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := retryClient(nodes[0])
	if err := c.CreateDatabase(ctx, "db", false); err != nil {
		t.Fatal(err)
	}
	tableID := createBigTable(t, ctx, c, map[string]string{"table.replication.factor": "3", "table.log.ttl": "4s",
		"table.datalake.enabled": "true", "table.datalake.freshness": "1s"})
	store, err := tiering.NewDirStore(lake)
	if err != nil {
		t.Fatal(err)
	}
	dir := tiering.LakeBucketDir("db", "t", tableID, "", 0)
	id := raftmeta.BucketID{TableID: tableID, PartitionID: raftmeta.NoPartition, Bucket: 0}
	// dropped: the lake ends at end and every alive replica's log starts
	// past 0.
	dropped := func(end int64, alive ...int) func() bool {
		return func() bool {
			files, err := tiering.ListLake(store, dir)
			if err != nil || tiering.LakeEnd(files) != end {
				return false
			}
			for _, i := range alive {
				if r := nodes[i].replica(id); r == nil || r.LogStartOffset() == 0 {
					return false
				}
			}
			return true
		}
	}
	rng := rand.New(rand.NewPCG(7, 8))
	next := appendBig(t, ctx, c, rng, 0, 30)
	want := readAll(t, ctx, c, "db.t", 1)
	waitFor(t, 40*time.Second, dropped(int64(next), 0, 1, 2))
	for i := range nodes {
		if got := readAll(t, ctx, retryClient(nodes[i]), "db.t", 1); got != want {
			t.Fatalf("through node %d: the union read differs from the rows written", i+1)
		}
	}

	_, alive := stopBucketLeader(t, ctx, c, nodes, "db.t")
	c = retryClient(nodes[alive[0]])
	offs, err := c.ListOffsets(ctx, "db.t", flussv1.ListOffsetsRequest_EARLIEST, 0)
	if err != nil || len(offs) != 1 || offs[0].Offset != 0 {
		t.Fatalf("EARLIEST after failover = %v, %v; want 0 (the lake's start)", offs, err)
	}
	next = appendBig(t, ctx, c, rng, next, 10)
	waitFor(t, 40*time.Second, dropped(int64(next), alive...))
	all := readAll(t, ctx, retryClient(nodes[alive[1]]), "db.t", 1)
	if n := strings.Count(all, `"id":`); !strings.HasPrefix(all, strings.TrimSuffix(want, "]")) || n != next {
		t.Fatalf("after failover: %d rows read back, want %d starting with the %d read before", n, next, strings.Count(want, `"id":`))
	}
	// The new leader went on committing to the same Iceberg table.
	for i, row := range waitForIceberg(t, lake, "db", "t", -1, next) {
		if row["id"] != float64(i) || row[tiering.LakeOffsetColumn] != float64(i) {
			t.Fatalf("Iceberg row %d: id %v at __offset %v", i, row["id"], row[tiering.LakeOffsetColumn])
		}
	}
}

func TestLakeReadsCache(t *testing.T) {
	var lr lakeReads
	if lr.cached("a", nil) != nil {
		t.Fatal("an empty cache has a")
	}
	a := &lakeDecoded{name: "a"}
	if lr.cached("a", a) != a || lr.cached("a", nil) != a {
		t.Fatal("a not cached")
	}
	if other := (&lakeDecoded{name: "a"}); lr.cached("a", other) != a {
		t.Fatal("a second decoding of a replaced the cached one")
	}
	for _, name := range []string{"b", "c", "d"} {
		lr.cached(name, &lakeDecoded{name: name})
	}
	lr.cached("a", nil) // a is the most recently used again
	lr.cached("e", &lakeDecoded{name: "e"})
	var names []string
	for _, d := range lr.files {
		names = append(names, d.name)
	}
	if !slices.Equal(names, []string{"e", "a", "d", "c"}) {
		t.Fatalf("cache holds %v, want [e a d c] (b least recently used)", names)
	}
}

// TestLakePartitionedTable: each partition's buckets have lake files of
// their own (under the partition's name), and once table.log.ttl has
// dropped their logs' heads, a Scan from EARLIEST over every partition
// still returns every row once, as does the (partitioned) Iceberg table.
func TestLakePartitionedTable(t *testing.T) {
	longCluster(t)
	n, ctx, c, lake, _ := startLakeNode(t, 100*time.Millisecond, time.Second)
	no := false
	tableID, err := c.CreateTable(ctx, &flussv1.CreateTableRequest{
		Table: "db.p",
		Schema: &flussv1.Schema{Columns: []*flussv1.Column{
			{Name: "dt", Type: "STRING", Nullable: &no}, {Name: "id", Type: "BIGINT", Nullable: &no}, {Name: "s", Type: "STRING"}}},
		PartitionKeys: []string{"dt"},
		BucketCount:   1,
		Properties: map[string]string{"table.log.arrow.compression.type": "NONE", "table.log.ttl": "4s",
			"table.datalake.enabled": "true", "table.datalake.freshness": "1s"},
	})
	if err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("y", 2000)
	const perPartition = 1500 // ~3 MiB: three segments or so
	for k := 0; k < perPartition; k += 100 {
		var rows []string
		for i := k; i < k+100; i++ {
			for _, dt := range []string{"a", "b"} {
				rows = append(rows, fmt.Sprintf(`{"dt":%q,"id":%d,"s":%q}`, dt, i, pad))
			}
		}
		if _, err := c.Append(ctx, "db.p", []byte("["+strings.Join(rows, ",")+"]")); err != nil {
			t.Fatal(err)
		}
	}
	key := func(r map[string]any) string { return fmt.Sprintf("%v/%v", r["dt"], r["id"]) }
	keys := func(rows []map[string]any) []string {
		out := make([]string, len(rows))
		for i, r := range rows {
			out[i] = key(r)
		}
		slices.Sort(out)
		return out
	}
	want := keys(scanAll(t, ctx, c, "db.p"))
	if len(want) != 2*perPartition {
		t.Fatalf("scanned %d rows before the TTL, want %d", len(want), 2*perPartition)
	}
	waitFor(t, 30*time.Second, func() bool {
		dropped := 0
		for id, r := range n.openReplicas() {
			if id.TableID == tableID && r.LogStartOffset() > 0 {
				dropped++
			}
		}
		return dropped == 2
	})
	for _, dt := range []string{"a", "b"} {
		if m, _ := filepath.Glob(filepath.Join(lake, "db", "p", fmt.Sprint(tableID), dt, "bucket=0", "*.parquet")); len(m) == 0 {
			t.Fatalf("no lake files of partition %s", dt)
		}
	}
	if got := keys(scanAll(t, ctx, c, "db.p")); !slices.Equal(got, want) {
		t.Fatalf("scan after the TTL: %d rows, differing from the %d before", len(got), len(want))
	}
	// The Iceberg table, partitioned by dt, holds the same rows.
	if got := keys(waitForIceberg(t, lake, "db", "p", -1, len(want))); !slices.Equal(got, want) {
		t.Fatal("the Iceberg table's rows differ from the rows written")
	}
}

func TestCoveredLakeFiles(t *testing.T) {
	store, err := tiering.NewDirStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]int64{{0, 10}, {0, 5}, {2, 8}, {5, 15}, {10, 20}, {12, 18}} {
		if _, err := tiering.PutLakeFile(store, "d", r[0], r[1], []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	files, err := tiering.ListLake(store, "d")
	if err != nil {
		t.Fatal(err)
	}
	kept, covered := coveredLakeFiles(files)
	ranges := func(files []tiering.LakeFile) (out [][2]int64) {
		for _, f := range files {
			out = append(out, [2]int64{f.FirstOffset, f.NextOffset})
		}
		return out
	}
	if got, want := ranges(kept), [][2]int64{{0, 10}, {5, 15}, {10, 20}}; !slices.Equal(got, want) {
		t.Fatalf("kept %v, want %v", got, want)
	}
	if got, want := ranges(covered), [][2]int64{{0, 5}, {2, 8}, {12, 18}}; !slices.Equal(got, want) {
		t.Fatalf("covered %v, want %v", got, want)
	}
}

// TestLakeCompaction: small lake files at the end of a bucket's lake are
// merged into one, a file another holds is deleted, every row is in the
// lake once with dense offsets afterwards, and a union read whose cached
// listing names a merged-away file lists again and reads on.
func TestLakeCompaction(t *testing.T) {
	longCluster(t)
	// Retention and lake passes run by hand below; without Iceberg
	// metadata obsolete files are deleted at once (TestLakeIceberg).
	n, ctx, c, _, store := startLakeNode(t, time.Hour, time.Hour, func(c *Config) { c.Tiering.LakeFormat = "parquet" })
	tableID := createBigTable(t, ctx, c, map[string]string{"table.log.ttl": "1s", "table.datalake.enabled": "true"})
	id, tbl, r, dir, lakeFiles := bigTableBucket(t, n, store, tableID)
	compact := func() (written, deleted int, err error) {
		written, obsolete, err := n.compactLake(id, tbl)
		if err != nil {
			return written, 0, err
		}
		deleted, err = n.settleLake(id, tbl, obsolete)
		return written, deleted, err
	}
	rng := rand.New(rand.NewPCG(9, 10))
	next := 0
	for range 5 { // five passes of 200 rows: five small files
		next = appendBig(t, ctx, c, rng, next, 2)
		if _, _, err := n.tierToLake(id, tbl, r); err != nil {
			t.Fatal(err)
		}
	}
	files := lakeFiles()
	if len(files) != 5 {
		t.Fatalf("%d lake files, want 5", len(files))
	}
	// A file the first one holds, as a deposed leader's pass leaves.
	data, err := os.ReadFile(filepath.Join(n.cfg.Tiering.LakeDir, files[0].Name))
	if err != nil {
		t.Fatal(err)
	}
	cols, batches, err := tiering.ReadLakeFile(data, files[0])
	if err != nil {
		t.Fatal(err)
	}
	part := []tiering.LakeBatch{{Rec: batches[0].Rec.NewSlice(0, 50), BaseOffset: 0, CommitTs: batches[0].CommitTs}}
	sub, err := tiering.EncodeLakeFile(cols, part)
	part[0].Rec.Release()
	for _, b := range batches {
		b.Rec.Release()
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tiering.PutLakeFile(store, dir, 0, 50, sub); err != nil {
		t.Fatal(err)
	}
	want := readAll(t, ctx, c, "db.t", 1)
	// The log drops what the lake holds, and a union read caches the
	// listing of the small files.
	time.Sleep(1200 * time.Millisecond)
	n.enforceRetention(id, r)
	if r.LogStartOffset() == 0 {
		t.Fatal("retention deleted nothing")
	}
	if got := readAll(t, ctx, c, "db.t", 1); got != want {
		t.Fatal("the union read before compaction differs from the rows written")
	}

	written, deleted, err := compact()
	if err != nil || written != 1 || deleted != 6 {
		t.Fatalf("compaction wrote %d and deleted %d files, %v; want 1 and 6", written, deleted, err)
	}
	if files := lakeFiles(); len(files) != 1 || files[0].FirstOffset != 0 || files[0].NextOffset != int64(next) {
		t.Fatalf("lake files after compaction %+v, want one of [0, %d)", files, next)
	}
	_, offsets := lakeRows(t, store, dir)
	for i, off := range offsets {
		if off != int64(i) {
			t.Fatalf("compacted lake row %d has __offset %d", i, off)
		}
	}
	if len(offsets) != next {
		t.Fatalf("%d rows in the compacted lake, want %d", len(offsets), next)
	}
	n.lakeReads.mu.Lock()
	n.lakeReads.files = nil // the merged files' decodings: gone, as after a while
	n.lakeReads.mu.Unlock()
	if got := readAll(t, ctx, c, "db.t", 1); got != want {
		t.Fatal("the union read after compaction differs from the rows written")
	}
	if written, deleted, err := compact(); err != nil || written+deleted != 0 {
		t.Fatalf("a second compaction wrote %d and deleted %d files, %v; want nothing", written, deleted, err)
	}

	// Files of a new schema version merge among themselves, not with the
	// file before them.
	if _, err := c.AddColumns(ctx, "db.t", &flussv1.Column{Name: "note", Type: "STRING"}); err != nil {
		t.Fatal(err)
	}
	tbl, err = n.meta.TableByID(tableID)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		next = appendBig(t, ctx, c, rng, next, 1)
		if _, _, err := n.tierToLake(id, tbl, r); err != nil {
			t.Fatal(err)
		}
	}
	if written, deleted, err := compact(); err != nil || written != 1 || deleted != 2 {
		t.Fatalf("compaction across a schema change wrote %d and deleted %d files, %v; want 1 and 2", written, deleted, err)
	}
	if files := lakeFiles(); len(files) != 2 || files[1].NextOffset != int64(next) {
		t.Fatalf("lake files %+v, want the old schema's and the new one's", files)
	}
}

// TestLakeIceberg: with Iceberg metadata, the files compaction replaced
// leave the Iceberg table at once but stay on disk while the snapshot
// retention keeps the snapshots that held them (the union read meanwhile
// reads each row once), and are deleted after it; an idle pass leaves the
// Iceberg table alone. A table with a column
// Iceberg cannot read as stored has no Iceberg table, and its replaced
// files are deleted at once.
func TestLakeIceberg(t *testing.T) {
	n, ctx, c, lake, store := startLakeNode(t, time.Hour, time.Hour) // passes by hand
	tableID := createBigTable(t, ctx, c, map[string]string{"table.datalake.enabled": "true"})
	id, tbl, r, _, lakeFiles := bigTableBucket(t, n, store, tableID)
	pass := func(id raftmeta.BucketID, tbl *raftmeta.Table, r *replica.Replica) (written, deleted int) {
		t.Helper()
		if _, _, err := n.tierToLake(id, tbl, r); err != nil {
			t.Fatal(err)
		}
		written, obsolete, err := n.compactLake(id, tbl)
		if err != nil {
			t.Fatal(err)
		}
		if deleted, err = n.settleLake(id, tbl, obsolete); err != nil {
			t.Fatal(err)
		}
		return written, deleted
	}
	rng := rand.New(rand.NewPCG(3, 4))
	next := 0
	for range 3 {
		next = appendBig(t, ctx, c, rng, next, 1)
		pass(id, tbl, r)
	}
	// The second pass merged the first two files, the third that and the
	// third file: the Iceberg table holds the last merge, the directory
	// the four files replaced too.
	if files := lakeFiles(); len(files) != 5 {
		t.Fatalf("%d lake files, want the 4 replaced and the last merge", len(files))
	}
	rows := waitForIceberg(t, lake, "db", "t", 1, next)
	for i, row := range rows {
		if row["id"] != float64(i) || row[tiering.LakeOffsetColumn] != float64(i) {
			t.Fatalf("Iceberg row %d: id %v at __offset %v", i, row["id"], row[tiering.LakeOffsetColumn])
		}
	}
	want := readAll(t, ctx, c, "db.t", 1)
	if _, deleted := pass(id, tbl, r); deleted != 0 {
		t.Fatalf("deleted %d replaced files within the snapshot retention", deleted)
	}
	// Past the retention (and its margin) they go: the cluster's, set
	// through the admin call (the node's configuration says an hour).
	retention := time.Millisecond
	if got, err := n.SetClusterConfig(ctx, rpc.ClusterConfigChange{LakeSnapshotRetention: &retention}); err != nil || got.LakeSnapshotRetention != retention {
		t.Fatalf("SetClusterConfig lake snapshot retention %v: %+v, %v", retention, got, err)
	}
	time.Sleep(5 * time.Millisecond)
	pass(id, tbl, r)
	if files := lakeFiles(); len(files) != 1 || files[0].NextOffset != int64(next) {
		t.Fatalf("lake files past the retention: %+v, want the merged one", files)
	}
	if got := readAll(t, ctx, c, "db.t", 1); got != want {
		t.Fatal("the union read changed when the replaced files went")
	}
	waitForIceberg(t, lake, "db", "t", 1, next)
	// A pass over a bucket whose files are those of its last commit does
	// not touch the Iceberg table (which would make a new one here).
	meta := filepath.Join(lake, "db", "t", "metadata")
	if err := os.Rename(meta, meta+".away"); err != nil {
		t.Fatal(err)
	}
	pass(id, tbl, r)
	if _, err := os.Stat(meta); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an idle pass touched the Iceberg table: %v", err)
	}
	if err := os.Rename(meta+".away", meta); err != nil {
		t.Fatal(err)
	}

	// TIME(9) is stored as nanoseconds: no Iceberg table for this one.
	no := false
	timeID, err := c.CreateTable(ctx, &flussv1.CreateTableRequest{
		Table:       "db.times",
		Schema:      &flussv1.Schema{Columns: []*flussv1.Column{{Name: "id", Type: "BIGINT", Nullable: &no}, {Name: "at", Type: "TIME(9)"}}},
		BucketCount: 1,
		Properties:  map[string]string{"table.datalake.enabled": "true"},
	})
	if err != nil {
		t.Fatal(err)
	}
	tid := raftmeta.BucketID{TableID: timeID, PartitionID: raftmeta.NoPartition, Bucket: 0}
	ttbl, err := n.meta.TableByID(timeID)
	if err != nil {
		t.Fatal(err)
	}
	deleted := 0
	for i := range 3 {
		b := int32(0)
		if _, err := c.AppendRequest(ctx, &flussv1.AppendRequest{Table: "db.times", Bucket: &b, Rows: []byte(fmt.Sprintf(`[{"id":%d,"at":"10:00:00.00000000%d"}]`, i, i))}); err != nil {
			t.Fatal(err)
		}
		_, d := pass(tid, ttbl, n.replica(tid))
		deleted += d
	}
	if deleted != 4 { // as above: 1+2, then their merge and 3
		t.Fatalf("deleted %d replaced files of a table without Iceberg metadata, want the 4 merged at once", deleted)
	}
	if _, err := os.Stat(filepath.Join(lake, "db", "times", "metadata")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a table with a TIME(9) column has Iceberg metadata: %v", err)
	}
}

// TestLakeFormatPerTable: a table's lake format is its own
// table.datalake.format, set from the metadata leader's [tiering]
// lake_format when its lake is turned on without one (at creation or by
// AlterTable), and fixed from then on: a node configured with "parquet"
// writes Iceberg metadata for a table that says "iceberg", and none for
// the tables it stamped "parquet".
func TestLakeFormatPerTable(t *testing.T) {
	n, ctx, c, lake, store := startLakeNode(t, time.Hour, time.Hour, func(c *Config) { c.Tiering.LakeFormat = "parquet" })
	tableID := createBigTable(t, ctx, c, map[string]string{"table.datalake.enabled": "true", "table.datalake.format": "iceberg"})
	no := false
	simple := func(name string, props map[string]string) {
		t.Helper()
		if _, err := c.CreateTable(ctx, &flussv1.CreateTableRequest{Table: "db." + name, Properties: props,
			Schema: &flussv1.Schema{Columns: []*flussv1.Column{{Name: "id", Type: "BIGINT", Nullable: &no}}}}); err != nil {
			t.Fatal(err)
		}
	}
	simple("stamped", map[string]string{"table.datalake.enabled": "true"})
	simple("later", nil)
	if err := c.SetTableProperties(ctx, "db.later", map[string]string{"table.datalake.enabled": "true"}); err != nil {
		t.Fatal(err)
	}
	simple("off", map[string]string{"table.datalake.enabled": "false"})
	for name, want := range map[string]string{"t": "iceberg", "stamped": "parquet", "later": "parquet", "off": ""} {
		tb, err := n.meta.TableByName("db", name)
		if err != nil {
			t.Fatal(err)
		}
		if got := tb.Properties[raftmeta.PropLakeFormat]; got != want {
			t.Errorf("db.%s: table.datalake.format %q, want %q", name, got, want)
		}
		if ice := n.icebergFor(tb) != nil; ice != (want == "iceberg") {
			t.Errorf("db.%s: Iceberg metadata %v, want it for %q", name, ice, want)
		}
	}
	if err := c.SetTableProperties(ctx, "db.stamped", map[string]string{"table.datalake.format": "iceberg"}); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("changing a table's lake format = %v, want invalid_argument", err)
	}

	id, tbl, r, _, _ := bigTableBucket(t, n, store, tableID)
	next := appendBig(t, ctx, c, rand.New(rand.NewPCG(5, 6)), 0, 2)
	if _, _, err := n.tierToLake(id, tbl, r); err != nil {
		t.Fatal(err)
	}
	_, obsolete, err := n.compactLake(id, tbl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.settleLake(id, tbl, obsolete); err != nil {
		t.Fatal(err)
	}
	waitForIceberg(t, lake, "db", "t", -1, next)
}

// TestLakeFormatNeedsTheFeatureLevel: beside a node whose state machine
// refuses table.datalake.format in an AlterTable, turning a table's lake on
// leaves the format unset and naming one is refused; nothing diverges.
func TestLakeFormatNeedsTheFeatureLevel(t *testing.T) {
	lake := t.TempDir()
	cfg1 := clusterConfig(t.TempDir())
	cfg1.Tiering.LakeDir = lake
	first := startCluster(t, cfg1)
	t.Cleanup(func() { first.Close() })
	cfg2 := clusterConfig(t.TempDir())
	cfg2.Tiering.LakeDir = lake
	cfg2.Join = []string{first.peers.Addr()}
	old := startNodeWith(t, cfg2, func(n *Node) { n.featureLevel = featureClusterConfig })
	t.Cleanup(func() { old.Close() })
	waitFor(t, 20*time.Second, func() bool { return first.clusterFeatureLevel() == featureClusterConfig })
	ctx, c := withDB(t, first)
	no := false
	if _, err := c.CreateTable(ctx, &flussv1.CreateTableRequest{Table: "db.x",
		Schema: &flussv1.Schema{Columns: []*flussv1.Column{{Name: "id", Type: "BIGINT", Nullable: &no}}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetTableProperties(ctx, "db.x", map[string]string{"table.datalake.enabled": "true"}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetTableProperties(ctx, "db.x", map[string]string{"table.datalake.format": "iceberg"}); connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("naming the lake format beside an older node = %v, want failed_precondition", err)
	}
	for _, n := range []*Node{first, old} {
		waitFor(t, 10*time.Second, func() bool {
			tb, err := n.meta.TableByName("db", "x")
			return err == nil && strings.EqualFold(tb.Properties["table.datalake.enabled"], "true")
		})
		if tb, _ := n.meta.TableByName("db", "x"); tb.Properties[raftmeta.PropLakeFormat] != "" {
			t.Fatalf("node %d: table.datalake.format %q set beside an older node", n.ID(), tb.Properties[raftmeta.PropLakeFormat])
		}
	}
}
