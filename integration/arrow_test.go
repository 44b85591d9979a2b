package integration

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"google.golang.org/protobuf/proto"

	"github.com/fluss-node/fluss-node/logstore/record"
	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/rpc/client"
)

// TestArrowAppendFetchWithClient appends record.SampleRecord batches to
// several buckets with the Go client (Arrow IPC, ZSTD), fetches them back
// with format ARROW and a projection, decodes the streams with arrow-go's
// ipc reader and compares every value with the source rows; ListOffsets
// EARLIEST, LATEST and TIMESTAMP agree with what was written.
func TestArrowAppendFetchWithClient(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	const (
		buckets = 3
		rows    = 300 // per batch; two batches per bucket
	)
	addr := startNode(t, t.TempDir()).addr
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := client.New("http://" + addr)
	waitFor(t, 20*time.Second, func() error { return c.CreateDatabase(ctx, "arrow", true) })

	var cols []*flussv1.Column
	for _, col := range record.SampleSchema().Columns {
		cols = append(cols, &flussv1.Column{Name: col.Name, Type: col.Type.String(), Nullable: proto.Bool(col.Nullable)})
	}
	if _, err := c.CreateTable(ctx, &flussv1.CreateTableRequest{
		Table: "arrow.events", Schema: &flussv1.Schema{Columns: cols}, BucketCount: buckets,
	}); err != nil {
		t.Fatal(err)
	}

	// Two batches per bucket with a clock tick between the rounds, so that
	// a timestamp separates them.
	src := make([][]arrow.Record, buckets)
	appendRound := func(round int) {
		for b := int32(0); b < buckets; b++ {
			rec := record.SampleRecord(rows, int64(10*round+int(b)+1))
			t.Cleanup(rec.Release)
			res, err := c.AppendRecord(ctx, "arrow.events", b, rec)
			if err != nil {
				t.Fatalf("AppendRecord bucket %d round %d: %v", b, round, err)
			}
			if len(res) != 1 || res[0].Bucket != b || res[0].BaseOffset != int64(round*rows) || res[0].Count != rows {
				t.Fatalf("AppendRecord bucket %d round %d: results %v, want bucket %d base %d count %d", b, round, res, b, round*rows, rows)
			}
			src[b] = append(src[b], rec)
		}
	}
	appendRound(0)
	between := time.Now().UnixMilli()
	waitFor(t, 5*time.Second, func() error {
		if time.Now().UnixMilli() <= between {
			return fmt.Errorf("clock has not moved past %d", between)
		}
		return nil
	})
	appendRound(1)
	after := time.Now().UnixMilli() + 1

	// Fetch every bucket as Arrow with a projection and compare values.
	projection := []string{"amount", "event_id", "country", "ts", "is_mobile"}
	for b := int32(0); b < buckets; b++ {
		var got []string
		var offset int64
		for {
			resp, err := c.Fetch(ctx, &flussv1.FetchRequest{Table: "arrow.events", Bucket: b, Offset: offset,
				Columns: projection, Format: flussv1.Format_ARROW, MaxBytes: 64 << 10})
			if err != nil {
				t.Fatalf("Fetch bucket %d at %d: %v", b, offset, err)
			}
			if len(resp.Rows) != 0 {
				t.Errorf("Fetch with format ARROW returned JSON rows too")
			}
			if len(resp.Arrow) > 0 {
				got = append(got, decodeArrow(t, resp.Arrow, projection)...)
			}
			if resp.NextOffset >= resp.HighWatermark {
				break
			}
			if resp.NextOffset <= offset {
				t.Fatalf("Fetch bucket %d at %d made no progress", b, offset)
			}
			offset = resp.NextOffset
		}
		var want []string
		for _, rec := range src[b] {
			want = append(want, recordRows(t, rec, projection)...)
		}
		if len(got) != len(want) {
			t.Fatalf("bucket %d: fetched %d rows, appended %d", b, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("bucket %d offset %d: fetched %s, appended %s", b, i, got[i], want[i])
			}
		}
	}

	// ListOffsets.
	specs := []struct {
		name string
		spec flussv1.ListOffsetsRequest_Spec
		ts   int64
		want int64
	}{
		{"EARLIEST", flussv1.ListOffsetsRequest_EARLIEST, 0, 0},
		{"LATEST", flussv1.ListOffsetsRequest_LATEST, 0, 2 * rows},
		{"TIMESTAMP 0", flussv1.ListOffsetsRequest_TIMESTAMP, 0, 0},
		{"TIMESTAMP between the rounds", flussv1.ListOffsetsRequest_TIMESTAMP, between + 1, rows},
		{"TIMESTAMP after the last write", flussv1.ListOffsetsRequest_TIMESTAMP, after + 60_000, 2 * rows},
	}
	for _, s := range specs {
		offs, err := c.ListOffsets(ctx, "arrow.events", s.spec, s.ts)
		if err != nil {
			t.Fatalf("ListOffsets %s: %v", s.name, err)
		}
		if len(offs) != buckets {
			t.Fatalf("ListOffsets %s: %d buckets, want %d", s.name, len(offs), buckets)
		}
		for _, o := range offs {
			if o.Offset != s.want {
				t.Errorf("ListOffsets %s: bucket %d at %d, want %d", s.name, o.Bucket, o.Offset, s.want)
			}
		}
	}
	// One bucket only.
	offs, err := c.ListOffsets(ctx, "arrow.events", flussv1.ListOffsetsRequest_LATEST, 0, 1)
	if err != nil || len(offs) != 1 || offs[0].Bucket != 1 || offs[0].Offset != 2*rows {
		t.Errorf("ListOffsets LATEST bucket 1: %v %v, want bucket 1 at %d", offs, err, 2*rows)
	}
}

// decodeArrow reads a complete Arrow IPC stream, checks its schema holds
// exactly the projected columns in table order (what the server does; API.md
// does not say which order a projection has), and
// renders each row as text in the order of columns.
func decodeArrow(t *testing.T, stream []byte, columns []string) []string {
	t.Helper()
	r, err := ipc.NewReader(bytes.NewReader(stream))
	if err != nil {
		t.Fatalf("Arrow IPC stream from Fetch: %v", err)
	}
	defer r.Release()
	var names []string
	for _, f := range r.Schema().Fields() {
		names = append(names, f.Name)
	}
	var want []string
	for _, c := range record.SampleSchema().Columns {
		if slices.Contains(columns, c.Name) {
			want = append(want, c.Name)
		}
	}
	if !slices.Equal(names, want) {
		t.Fatalf("fetched Arrow schema has columns %v, want the projection %v in table order %v", names, columns, want)
	}
	var out []string
	for r.Next() {
		out = append(out, recordRows(t, r.RecordBatch(), columns)...)
	}
	if err := r.Err(); err != nil {
		t.Fatalf("Arrow IPC stream from Fetch: %v", err)
	}
	return out
}

// recordRows renders the named columns of every row of rec as text.
func recordRows(t *testing.T, rec arrow.Record, columns []string) []string {
	t.Helper()
	out := make([]string, rec.NumRows())
	for _, name := range columns {
		idx := rec.Schema().FieldIndices(name)
		if len(idx) != 1 {
			t.Fatalf("record has no column %q", name)
		}
		col := rec.Column(idx[0])
		for i := range out {
			out[i] += name + "=" + col.ValueStr(i) + " "
		}
	}
	return out
}
