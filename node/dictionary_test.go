package node

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
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
