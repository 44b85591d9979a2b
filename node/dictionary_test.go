package node

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/tiering"
)

// TestLakeUnionReadDictionary: a log table with a dictionary-encoded
// column goes to the lake as plain strings, and once the log has dropped
// its oldest rows a read from offset 0 serves them from the lake, stored
// as the log stores them: JSON gives the rows written, and ARROW (whole
// and projected) carries the column as a dictionary in every batch, the
// lake's and the log's alike.
func TestLakeUnionReadDictionary(t *testing.T) {
	longCluster(t)
	n, ctx, c, lake, store := startLakeNode(t, 100*time.Millisecond, time.Hour)
	no := false
	tableID, err := c.CreateTable(ctx, &flussv1.CreateTableRequest{
		Table: "db.t",
		Schema: &flussv1.Schema{Columns: []*flussv1.Column{
			{Name: "id", Type: "BIGINT", Nullable: &no},
			{Name: "kind", Type: "STRING", Dictionary: true},
			{Name: "s", Type: "STRING"},
		}},
		BucketCount: 1,
		Properties:  map[string]string{"table.log.ttl": "6s", "table.datalake.enabled": "true"},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, _, r, _, lakeFiles := bigTableBucket(t, n, store, tableID)
	kinds := []string{"view", "click", "purchase"}
	_, next := outliveTheLog(t, ctx, c, n, tableID, r, rand.New(rand.NewPCG(5, 6)), func(rng *rand.Rand) string {
		if rng.IntN(10) == 0 {
			return `,"kind":null`
		}
		return fmt.Sprintf(`,"kind":%q`, kinds[rng.IntN(len(kinds))])
	})

	// The lake files hold kind as plain strings.
	files := lakeFiles()
	if len(files) != 3 {
		t.Fatalf("lake files %+v, want 3", files)
	}
	data, err := os.ReadFile(filepath.Join(lake, files[0].Name))
	if err != nil {
		t.Fatal(err)
	}
	cols, batches, err := tiering.ReadLakeFile(data, files[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range batches {
		b.Rec.Release()
	}
	if f, _ := cols.FieldsByName("kind"); len(f) != 1 || !arrow.TypeEqual(f[0].Type, arrow.BinaryTypes.String) {
		t.Fatalf("lake file columns %s", cols)
	}

	for _, columns := range [][]string{nil, {"kind"}, {"id", "kind"}} {
		var ids []int64
		for off := int64(0); off < int64(next); {
			resp, err := c.Fetch(ctx, &flussv1.FetchRequest{Table: "db.t", Offset: off, Columns: columns, Format: flussv1.Format_ARROW})
			if err != nil {
				t.Fatal(err)
			}
			rd, err := ipc.NewReader(bytes.NewReader(resp.Arrow))
			if err != nil {
				t.Fatal(err)
			}
			for rd.Next() {
				rec := rd.RecordBatch()
				k, _ := rec.Schema().FieldsByName("kind")
				if len(k) != 1 || k[0].Type.ID() != arrow.DICTIONARY {
					t.Fatalf("columns %v at offset %d: kind is %v", columns, off, k)
				}
				if idx := rec.Schema().FieldIndices("id"); len(idx) == 1 {
					ids = append(ids, rec.Column(idx[0]).(*array.Int64).Int64Values()...)
				}
			}
			if err := rd.Err(); err != nil {
				t.Fatalf("columns %v at offset %d: %v", columns, off, err)
			}
			rd.Release()
			off = resp.NextOffset
		}
		if columns == nil || len(columns) == 2 {
			for i, v := range ids {
				if v != int64(i) {
					t.Fatalf("columns %v: row %d has id %d", columns, i, v)
				}
			}
			if len(ids) != next {
				t.Fatalf("columns %v: %d rows, want %d", columns, len(ids), next)
			}
		}
	}
}

// TestPKTableDictionary: a primary-key table's dictionary-encoded column
// (its changelog stores it so) reads back the same through lookups, the
// changelog as JSON and as Arrow (where it is a dictionary) and the
// binlog (whose images hold plain values).
func TestPKTableDictionary(t *testing.T) {
	n := startNode(t, testConfig(t.TempDir()))
	defer n.Close()
	ctx, c := withDB(t, n)
	createPKTableNote(t, ctx, c, "cart", nil, true)
	var rows []string
	for u := range 4 {
		for item := range 5 {
			rows = append(rows, fmt.Sprintf(`{"user_id":%d,"item":%d,"qty":%d,"note":%q}`, u, item, u*item, []string{"gift", "rush", "gift", "none"}[(u+item)%4]))
		}
	}
	if _, err := c.Upsert(ctx, "db.cart", []byte("["+strings.Join(rows, ",")+"]"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Upsert(ctx, "db.cart", []byte(`[{"user_id":1,"item":2,"note":"late"},{"user_id":2,"item":0,"note":null}]`), []string{"user_id", "item", "note"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Delete(ctx, "db.cart", []byte(`[{"user_id":3,"item":4}]`)); err != nil {
		t.Fatal(err)
	}
	got, err := c.Lookup(ctx, "db.cart", []byte(`[{"user_id":1,"item":2},{"user_id":2,"item":0},{"user_id":3,"item":4},{"user_id":0,"item":1}]`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := `[{"user_id":1,"item":2,"qty":2,"note":"late"},{"user_id":2,"item":0,"qty":0,"note":null},null,{"user_id":0,"item":1,"qty":0,"note":"rush"}]`; string(got) != want {
		t.Fatalf("lookup:\n got %s\nwant %s", got, want)
	}

	// The changelog as JSON and as Arrow: the same changes.
	var fromJSON, fromArrow []string
	for _, r := range scanAll(t, ctx, c, "db.cart$changelog") {
		fromJSON = append(fromJSON, fmt.Sprintf("%v %v/%v %v %v", r["_log_offset"], r["user_id"], r["item"], r["_change_type"], r["note"]))
	}
	for _, br := range scanArrow(t, ctx, c, "db.cart$changelog", nil) {
		rec := br.rec
		note := rec.Column(6)
		d, ok := note.(*array.Dictionary)
		if !ok {
			t.Fatalf("Arrow $changelog note is %s", note.DataType())
		}
		for i := range int(rec.NumRows()) {
			v := "<nil>"
			if !d.IsNull(i) {
				v = d.Dictionary().(*array.String).Value(d.GetValueIndex(i))
			}
			fromArrow = append(fromArrow, fmt.Sprintf("%v %v/%v %v %v", rec.Column(1).(*array.Int64).Value(i),
				rec.Column(3).(*array.Int64).Value(i), rec.Column(4).(*array.Int32).Value(i), rec.Column(0).(*array.String).Value(i), v))
		}
		rec.Release()
	}
	slices.Sort(fromJSON)
	slices.Sort(fromArrow)
	if len(fromJSON) != 20+4+1 || !slices.Equal(fromJSON, fromArrow) {
		t.Fatalf("changelog as JSON (%d rows):\n%v\nas Arrow (%d rows):\n%v", len(fromJSON), fromJSON, len(fromArrow), fromArrow)
	}

	// The binlog's images hold note as a plain string.
	updates := 0
	for _, r := range scanAll(t, ctx, c, "db.cart$binlog") {
		if r["_change_type"] == "update" && r["before"].(map[string]any)["user_id"] == float64(1) {
			if before, after := r["before"].(map[string]any), r["after"].(map[string]any); before["note"] != "none" || after["note"] != "late" {
				t.Fatalf("binlog update %v", r)
			}
			updates++
		}
	}
	if updates != 1 {
		t.Fatalf("%d binlog updates of user 1, want 1", updates)
	}
	// Filters on the dictionary-encoded column, by its images too.
	for filter, want := range map[string]string{
		"note = 'late'": "update 1/2",
		"before.note = 'none' AND after.note = 'late'":     "update 1/2",
		"after.note IS NULL AND _change_type = 'update'":   "update 2/0",
		"_change_type = 'delete' AND before.note = 'none'": "delete 3/4",
	} {
		var got []string
		for _, r := range scanJSON(t, ctx, c, &flussv1.ScanRequest{Table: "db.cart$binlog", From: flussv1.ScanRequest_EARLIEST, Filter: filter}) {
			img, _ := r["after"].(map[string]any)
			if img == nil {
				img = r["before"].(map[string]any)
			}
			got = append(got, fmt.Sprintf("%v %v/%v", r["_change_type"], img["user_id"], img["item"]))
		}
		if len(got) != 1 || got[0] != want {
			t.Errorf("$binlog where %s: %v, want [%s]", filter, got, want)
		}
	}
	for _, br := range scanArrow(t, ctx, c, "db.cart$binlog", nil) {
		after := br.rec.Schema().Field(4).Type.(*arrow.StructType)
		if f, _ := after.FieldByName("note"); !arrow.TypeEqual(f.Type, arrow.BinaryTypes.String) || f.HasMetadata() {
			t.Fatalf("Arrow $binlog image field %v", f)
		}
		br.rec.Release()
	}
}
