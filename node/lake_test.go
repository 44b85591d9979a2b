package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/fluss-node/fluss-node/proto/flussv1"
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
		tr := array.NewTableReader(tbl, 1<<20)
		for tr.Next() {
			rec := tr.Record()
			js, err := rec.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			var part []map[string]any
			if err := json.Unmarshal(js, &part); err != nil {
				t.Fatal(err)
			}
			for _, r := range part {
				offsets = append(offsets, int64(r[tiering.LakeOffsetColumn].(float64)))
				if r[tiering.LakeTimestampColumn] == nil {
					t.Fatalf("%s: a row without %s", f.Name, tiering.LakeTimestampColumn)
				}
				delete(r, tiering.LakeOffsetColumn)
				delete(r, tiering.LakeTimestampColumn)
				rows = append(rows, r)
			}
		}
		tr.Release()
		tbl.Release()
	}
	return rows, offsets
}

// TestLakeTiering: a log table with table.datalake.enabled is written to
// the lake directory as Parquet, bucket by bucket, incrementally: every
// committed row once, with dense __offset values, the same values the log
// returns. A node without a lake directory refuses such a table.
func TestLakeTiering(t *testing.T) {
	lake := t.TempDir()
	cfg := testConfig(t.TempDir())
	cfg.Tiering.LakeDir = lake
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
			waitFor(t, 20*time.Second, func() bool {
				files, err := tiering.ListLake(store, dir)
				return err == nil && tiering.LakeEnd(files) == int64(rowsPerBucket)
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
	write(0, 200)
	check(200)
	write(200, 300)
	check(300) // the second pass starts where the first ended

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
	if m, _ := filepath.Glob(filepath.Join(lake, "db", "events", fmt.Sprint(tableID), "bucket=*", "*.parquet")); len(m) < 4 {
		t.Fatalf("%d lake files, want at least 4 (two passes, two buckets)", len(m))
	}

}
