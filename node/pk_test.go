package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/rpc/client"
)

// withDB returns a context bounded to 60 s (cancelled when the test ends)
// and a client of n on which database "db" exists.
func withDB(t *testing.T, n *Node) (context.Context, *client.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	c := client.New("http://" + n.ClientAddr())
	if err := c.CreateDatabase(ctx, "db", false); err != nil {
		t.Fatal(err)
	}
	return ctx, c
}

// createPKTable creates db.<name>: (user_id, item) primary key, bucket key
// user_id (a strict prefix: prefix lookups), 4 buckets.
func createPKTable(t *testing.T, ctx context.Context, c *client.Client, name string, props map[string]string) {
	t.Helper()
	createPKTableNote(t, ctx, c, name, props, false)
}

// createPKTableNote is createPKTable with, when dictionary is set, the note
// column dictionary-encoded.
func createPKTableNote(t *testing.T, ctx context.Context, c *client.Client, name string, props map[string]string, dictionary bool) {
	t.Helper()
	no := false
	if _, err := c.CreateTable(ctx, &flussv1.CreateTableRequest{
		Table: "db." + name,
		Schema: &flussv1.Schema{Columns: []*flussv1.Column{
			{Name: "user_id", Type: "BIGINT", Nullable: &no},
			{Name: "item", Type: "INT", Nullable: &no},
			{Name: "qty", Type: "BIGINT"},
			{Name: "note", Type: "STRING", Dictionary: dictionary},
		}, PrimaryKey: []string{"user_id", "item"}},
		BucketKeys:  []string{"user_id"},
		BucketCount: 4,
		Properties:  props,
	}); err != nil {
		t.Fatal(err)
	}
}

// scanAll reads a whole table or view (from earliest to the current end)
// as JSON objects, bucket by bucket.
func scanAll(t *testing.T, ctx context.Context, c *client.Client, table string) []map[string]any {
	t.Helper()
	return scanJSON(t, ctx, c, &flussv1.ScanRequest{Table: table, From: flussv1.ScanRequest_EARLIEST})
}

// scanJSON runs a bounded Scan in JSON and returns its rows.
func scanJSON(t *testing.T, ctx context.Context, c *client.Client, req *flussv1.ScanRequest) []map[string]any {
	t.Helper()
	var out []map[string]any
	err := c.Scan(ctx, req, func(r *flussv1.ScanResponse) error {
		if len(r.GetRows()) == 0 {
			return nil
		}
		var rows []map[string]any
		if err := json.Unmarshal(r.GetRows(), &rows); err != nil {
			return fmt.Errorf("rows %s: %w", r.GetRows(), err)
		}
		out = append(out, rows...)
		return nil
	})
	if err != nil {
		t.Fatalf("scan %s (filter %q): %v", req.GetTable(), req.GetFilter(), err)
	}
	return out
}

// bucketRecord is one Arrow record batch of a scan and its bucket.
type bucketRecord struct {
	bucket int32
	rec    arrow.Record
}

// scanArrow scans table in Arrow format and returns the record batches of
// every response with their bucket (the caller releases them).
func scanArrow(t *testing.T, ctx context.Context, c *client.Client, table string, columns []string) []bucketRecord {
	t.Helper()
	return scanArrowReq(t, ctx, c, &flussv1.ScanRequest{Table: table, From: flussv1.ScanRequest_EARLIEST, Columns: columns})
}

// scanArrowReq runs a bounded Scan in Arrow format (req.Format is set
// here) and returns its record batches with their bucket.
func scanArrowReq(t *testing.T, ctx context.Context, c *client.Client, req *flussv1.ScanRequest) []bucketRecord {
	t.Helper()
	req.Format = flussv1.Format_ARROW
	var out []bucketRecord
	err := c.Scan(ctx, req, func(r *flussv1.ScanResponse) error {
		if len(r.GetArrow()) == 0 {
			return nil
		}
		rd, err := ipc.NewReader(bytes.NewReader(r.GetArrow()))
		if err != nil {
			return err
		}
		defer rd.Release()
		for rd.Next() {
			rec := rd.RecordBatch()
			rec.Retain()
			out = append(out, bucketRecord{r.GetBucket(), rec})
		}
		return rd.Err()
	})
	if err != nil {
		t.Fatalf("scan %s as Arrow (filter %q): %v", req.GetTable(), req.GetFilter(), err)
	}
	return out
}

// checkBinlogMaxRecords fetches db.cart$binlog one row per Fetch: the -U
// half of an update does not count against maxRecords, so every Fetch
// before the end returns exactly one row, and all rows arrive once.
func checkBinlogMaxRecords(t *testing.T, ctx context.Context, c *client.Client, want int) {
	t.Helper()
	got := 0
	for b := int32(0); b < 4; b++ {
		for off := int64(0); ; {
			resp, err := c.Fetch(ctx, &flussv1.FetchRequest{Table: "db.cart$binlog", Bucket: b, Offset: off, MaxRecords: 1})
			if err != nil {
				t.Fatalf("fetch bucket %d at %d: %v", b, off, err)
			}
			if off >= resp.GetHighWatermark() {
				break
			}
			var rows []map[string]any
			if err := json.Unmarshal(resp.GetRows(), &rows); err != nil || len(rows) != 1 {
				t.Fatalf("fetch bucket %d at %d with maxRecords 1: %s (%v), want one row", b, off, resp.GetRows(), err)
			}
			got++
			off = resp.GetNextOffset()
		}
	}
	if got != want {
		t.Fatalf("fetched %d $binlog rows one by one, want %d", got, want)
	}
}

// checkBinlogFilters reads db.cart$binlog (as TestPKTableEndToEnd leaves
// it: three inserts, an update of qty 2 to 7, the delete of a row of qty 1
// and note b) with filters, in JSON and in Arrow, and checks each against
// the unfiltered $binlog filtered here: a filter sees $binlog's change
// types and the changed row's values (the after image; a delete's before
// image).
func checkBinlogFilters(t *testing.T, ctx context.Context, c *client.Client) {
	t.Helper()
	all := scanAll(t, ctx, c, "db.cart$binlog")
	image := func(r map[string]any, which string) map[string]any {
		m, _ := r[which].(map[string]any) // nil (no image) reads as NULL values
		return m
	}
	changed := func(r map[string]any) map[string]any {
		if after, ok := r["after"].(map[string]any); ok {
			return after
		}
		return r["before"].(map[string]any)
	}
	for _, tc := range []struct {
		filter string
		keep   func(r map[string]any) bool
		want   int
	}{
		{"_change_type = 'update'", func(r map[string]any) bool { return r["_change_type"] == "update" }, 1},
		{"qty >= 5", func(r map[string]any) bool { return changed(r)["qty"].(float64) >= 5 }, 2},
		{"qty < 5 AND _change_type <> 'insert'", func(r map[string]any) bool {
			return changed(r)["qty"].(float64) < 5 && r["_change_type"] != "insert"
		}, 1},
		{"note = 'b'", func(r map[string]any) bool { return changed(r)["note"] == "b" }, 2},
		// The -U row of the update holds qty 2, its +U 7: the update is out.
		{"qty = 2", func(r map[string]any) bool { return changed(r)["qty"].(float64) == 2 }, 1},
		{"_change_type IS NULL OR _change_type = '+U'", func(map[string]any) bool { return false }, 0},
		// The images by name: null where a change has none.
		{"before.qty = 2 AND after.qty = 7", func(r map[string]any) bool {
			return image(r, "before")["qty"] == 2.0 && image(r, "after")["qty"] == 7.0
		}, 1},
		{"before.qty IS NULL", func(r map[string]any) bool { return image(r, "before")["qty"] == nil }, 3},
		{"after.note = 'b'", func(r map[string]any) bool { return image(r, "after")["note"] == "b" }, 1},
		{"before.note = 'b' OR after.qty > 6", func(r map[string]any) bool {
			q, _ := image(r, "after")["qty"].(float64)
			return image(r, "before")["note"] == "b" || q > 6
		}, 2},
	} {
		var want []string
		for _, r := range all {
			if tc.keep(r) {
				b, _ := json.Marshal(r)
				want = append(want, string(b))
			}
		}
		var got []string
		for _, r := range scanJSON(t, ctx, c, &flussv1.ScanRequest{Table: "db.cart$binlog", From: flussv1.ScanRequest_EARLIEST, Filter: tc.filter}) {
			b, _ := json.Marshal(r)
			got = append(got, string(b))
		}
		slices.Sort(want)
		slices.Sort(got)
		if len(want) != tc.want || !slices.Equal(got, want) {
			t.Fatalf("$binlog where %s:\n got %v\nwant %v (%d rows)", tc.filter, got, want, tc.want)
		}
		var kinds []string
		for _, br := range scanArrowReq(t, ctx, c, &flussv1.ScanRequest{Table: "db.cart$binlog", From: flussv1.ScanRequest_EARLIEST, Filter: tc.filter}) {
			ct := br.rec.Column(0).(*array.String)
			for i := range ct.Len() {
				kinds = append(kinds, ct.Value(i))
			}
			br.rec.Release()
		}
		var wantKinds []string
		for _, r := range want {
			var m map[string]any
			_ = json.Unmarshal([]byte(r), &m)
			wantKinds = append(wantKinds, m["_change_type"].(string))
		}
		slices.Sort(kinds)
		slices.Sort(wantKinds)
		if !slices.Equal(kinds, wantKinds) {
			t.Fatalf("Arrow $binlog where %s: change types %v, want %v", tc.filter, kinds, wantKinds)
		}
	}
}

// checkArrowBinlog reads db.cart$binlog as JSON and as Arrow and checks
// that both say the same per bucket and _log_offset: the change type, and
// before/after present or null with the same qty; then a projection to one
// column.
func checkArrowBinlog(t *testing.T, ctx context.Context, c *client.Client) {
	t.Helper()
	type change struct {
		kind          string
		before, after string // qty or "null"
	}
	qty := func(img any) string {
		if m, ok := img.(map[string]any); ok {
			return fmt.Sprint(m["qty"])
		}
		return "null"
	}
	want := map[string]change{}
	err := c.Scan(ctx, &flussv1.ScanRequest{Table: "db.cart$binlog", From: flussv1.ScanRequest_EARLIEST}, func(r *flussv1.ScanResponse) error {
		if len(r.GetRows()) == 0 {
			return nil
		}
		var rows []map[string]any
		if err := json.Unmarshal(r.GetRows(), &rows); err != nil {
			return err
		}
		for _, row := range rows {
			want[fmt.Sprintf("%d/%v", r.GetBucket(), row["_log_offset"])] = change{fmt.Sprint(row["_change_type"]), qty(row["before"]), qty(row["after"])}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]change{}
	for _, br := range scanArrow(t, ctx, c, "db.cart$binlog", nil) {
		rec := br.rec
		defer rec.Release()
		if names := fmt.Sprint(fieldNames(rec.Schema())); names != "[_change_type _log_offset _commit_timestamp before after]" {
			t.Fatalf("Arrow $binlog columns %s", names)
		}
		before, after := rec.Column(3).(*array.Struct), rec.Column(4).(*array.Struct)
		image := func(s *array.Struct, i int) string {
			if s.IsNull(i) {
				return "null"
			}
			st := s.DataType().(*arrow.StructType)
			idx, _ := st.FieldIdx("qty")
			return fmt.Sprint(s.Field(idx).(*array.Int64).Value(i))
		}
		for i := range int(rec.NumRows()) {
			key := fmt.Sprintf("%d/%d", br.bucket, rec.Column(1).(*array.Int64).Value(i))
			got[key] = change{rec.Column(0).(*array.String).Value(i), image(before, i), image(after, i)}
		}
	}
	if len(want) != 5 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Arrow $binlog\n got %v\nwant %v (5 changes)", got, want)
	}
	recs := scanArrow(t, ctx, c, "db.cart$binlog", []string{"qty"})
	for _, br := range recs {
		defer br.rec.Release()
		if st := br.rec.Schema().Field(4).Type.(*arrow.StructType); st.NumFields() != 1 || st.Field(0).Name != "qty" {
			t.Fatalf("projected Arrow $binlog image %s, want only qty", st)
		}
	}
	if len(recs) == 0 {
		t.Fatal("projected Arrow $binlog returned nothing")
	}
}

func fieldNames(s *arrow.Schema) []string {
	var out []string
	for _, f := range s.Fields() {
		out = append(out, f.Name)
	}
	return out
}

func codeOf(err error) connect.Code {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Code()
	}
	return 0
}

// TestPKTableEndToEnd drives a primary-key table through the Connect API of
// one in-process node: upsert, partial update, lookup (order, nulls,
// projection), prefix lookup, delete, $changelog and $binlog, limit scan,
// bad input that changes nothing, and a restart.
// TestPKTrafficMetrics: Upsert and Delete count their rows and the bytes
// the client sent toward the table's written series, Lookup its keys and
// PrefixLookup its prefixes toward its lookups.
func TestPKTrafficMetrics(t *testing.T) {
	n := startNode(t, testConfig(t.TempDir()))
	defer n.Close()
	ctx, c := withDB(t, n)
	createPKTable(t, ctx, c, "cart", nil)
	rows := []byte(`[{"user_id":1,"item":10,"qty":2},{"user_id":2,"item":10,"qty":5}]`)
	keys := []byte(`[{"user_id":1,"item":10}]`)
	if _, err := c.Upsert(ctx, "db.cart", rows, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Delete(ctx, "db.cart", keys); err != nil {
		t.Fatal(err)
	}
	body := scrape(t, n)
	if got := metricValue(t, body, `fluss_table_written_rows_total{table="db.cart"}`); got != 3 {
		t.Fatalf("rows written: %v, want 2 upserted and 1 deleted", got)
	}
	if got := metricValue(t, body, `fluss_table_written_bytes_total{table="db.cart"}`); got != float64(len(rows)+len(keys)) {
		t.Fatalf("bytes written: %v, want %d", got, len(rows)+len(keys))
	}
	if _, err := c.Lookup(ctx, "db.cart", []byte(`[{"user_id":2,"item":10},{"user_id":3,"item":1}]`), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PrefixLookup(ctx, "db.cart", []byte(`[{"user_id":2}]`), nil); err != nil {
		t.Fatal(err)
	}
	if got := metricValue(t, scrape(t, n), `fluss_table_lookup_keys_total{table="db.cart"}`); got != 3 {
		t.Fatalf("keys looked up: %v, want 2 keys and 1 prefix", got)
	}
}

func TestPKTableEndToEnd(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	n := startNode(t, cfg)
	defer func() { n.Close() }()
	ctx, c := withDB(t, n)
	createPKTable(t, ctx, c, "cart", nil)

	// counts checks a write's results summed over its buckets: rows stored
	// and the $changelog records they made.
	counts := func(what string, res []*flussv1.WriteResult, err error, rows, changes int32) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		var n, cl int32
		for _, r := range res {
			n += r.GetCount()
			cl += r.GetChangelogRecords()
		}
		if n != rows || cl != changes {
			t.Fatalf("%s: count %d, changelogRecords %d; want %d and %d", what, n, cl, rows, changes)
		}
	}
	res, err := c.Upsert(ctx, "db.cart", []byte(`[
		{"user_id":1,"item":10,"qty":2,"note":"a"},
		{"user_id":1,"item":11,"qty":1,"note":"b"},
		{"user_id":2,"item":10,"qty":5,"note":"c"}]`), nil)
	counts("three inserts", res, err, 3, 3)
	// Partial update: only qty changes, note keeps its value.
	res, err = c.Upsert(ctx, "db.cart", []byte(`[{"user_id":1,"item":10,"qty":7}]`), []string{"user_id", "item", "qty"})
	counts("an update", res, err, 1, 2)
	lookup := func(keys string, cols ...string) string {
		t.Helper()
		got, err := c.Lookup(ctx, "db.cart", []byte(keys), cols)
		if err != nil {
			t.Fatalf("lookup %s: %v", keys, err)
		}
		return string(got)
	}
	if got, want := lookup(`[{"user_id":1,"item":10},{"user_id":9,"item":9},{"user_id":2,"item":10}]`),
		`[{"user_id":1,"item":10,"qty":7,"note":"a"},null,{"user_id":2,"item":10,"qty":5,"note":"c"}]`; got != want {
		t.Fatalf("lookup:\n got %s\nwant %s", got, want)
	}
	if got, want := lookup(`[{"user_id":1,"item":11}]`, "note"), `[{"note":"b"}]`; got != want {
		t.Fatalf("projected lookup: %s, want %s", got, want)
	}
	pr, err := c.PrefixLookup(ctx, "db.cart", []byte(`[{"user_id":1},{"user_id":3}]`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(pr) != 2 || string(pr[0].GetRows()) != `[{"user_id":1,"item":10,"qty":7,"note":"a"},{"user_id":1,"item":11,"qty":1,"note":"b"}]` || string(pr[1].GetRows()) != `[]` {
		t.Fatalf("prefix lookup: %v", pr)
	}
	res, err = c.Delete(ctx, "db.cart", []byte(`[{"user_id":1,"item":11},{"user_id":9,"item":9}]`))
	counts("a delete of a present and an absent key", res, err, 2, 1)
	if got := lookup(`[{"user_id":1,"item":11}]`); got != `[null]` {
		t.Fatalf("deleted key: %s", got)
	}

	// The changelog: +I ×3, -U/+U of the partial update, -D.
	cl := scanAll(t, ctx, c, "db.cart$changelog")
	var types []string
	for _, r := range cl {
		types = append(types, fmt.Sprint(r["_change_type"]))
		for _, k := range []string{"_log_offset", "_commit_timestamp", "user_id", "item"} {
			if _, ok := r[k]; !ok {
				t.Fatalf("changelog row %v lacks %s", r, k)
			}
		}
	}
	if got := strings.Join(sortedCopy(types), " "); got != "+I +I +I +U -D -U" {
		t.Fatalf("changelog change types %v", types)
	}
	// Replaying the changelog reproduces the table.
	if got, want := replayChangelog(t, cl), limitScanKeys(t, ctx, c, "db.cart"); got != want {
		t.Fatalf("changelog replay %s, table %s", got, want)
	}
	bl := scanAll(t, ctx, c, "db.cart$binlog")
	kinds := map[string]int{}
	for _, r := range bl {
		kinds[fmt.Sprint(r["_change_type"])]++
		if r["_change_type"] == "update" {
			before, _ := r["before"].(map[string]any)
			after, _ := r["after"].(map[string]any)
			if before == nil || after == nil || before["qty"] != float64(2) || after["qty"] != float64(7) {
				t.Fatalf("binlog update %v: want before qty 2, after qty 7", r)
			}
		}
	}
	if kinds["insert"] != 3 || kinds["update"] != 1 || kinds["delete"] != 1 || len(bl) != 5 {
		t.Fatalf("binlog kinds %v (%d rows)", kinds, len(bl))
	}
	checkArrowBinlog(t, ctx, c)
	checkBinlogFilters(t, ctx, c)
	checkBinlogMaxRecords(t, ctx, c, kinds["insert"]+kinds["update"]+kinds["delete"])

	// Bad input: the right code, nothing stored.
	yes := false
	if _, err := c.CreateTable(ctx, &flussv1.CreateTableRequest{Table: "db.events",
		Schema: &flussv1.Schema{Columns: []*flussv1.Column{{Name: "id", Type: "BIGINT", Nullable: &yes}}}}); err != nil {
		t.Fatal(err)
	}
	before := len(scanAll(t, ctx, c, "db.cart$changelog"))
	for _, tc := range []struct {
		name string
		call func() error
		code connect.Code
	}{
		{"missing key column", func() error {
			_, err := c.Upsert(ctx, "db.cart", []byte(`[{"user_id":1,"qty":1}]`), nil)
			return err
		}, connect.CodeInvalidArgument},
		{"partial update without the key", func() error {
			_, err := c.Upsert(ctx, "db.cart", []byte(`[{"user_id":1,"qty":1}]`), []string{"user_id", "qty"})
			return err
		}, connect.CodeInvalidArgument},
		{"unknown column", func() error {
			_, err := c.Upsert(ctx, "db.cart", []byte(`[{"user_id":1,"item":1,"color":"red"}]`), nil)
			return err
		}, connect.CodeInvalidArgument},
		{"wrong type", func() error {
			_, err := c.Upsert(ctx, "db.cart", []byte(`[{"user_id":"x","item":1}]`), nil)
			return err
		}, connect.CodeInvalidArgument},
		{"upsert on a log table", func() error {
			_, err := c.Upsert(ctx, "db.events", []byte(`[{"id":1}]`), nil)
			return err
		}, connect.CodeFailedPrecondition},
		{"append on a PK table", func() error {
			_, err := c.Append(ctx, "db.cart", []byte(`[{"user_id":1,"item":1}]`))
			return err
		}, connect.CodeFailedPrecondition},
		{"upsert on $changelog", func() error {
			_, err := c.Upsert(ctx, "db.cart$changelog", []byte(`[{"user_id":1,"item":1}]`), nil)
			return err
		}, connect.CodeFailedPrecondition},
		{"lookup without the whole key", func() error {
			_, err := c.Lookup(ctx, "db.cart", []byte(`[{"user_id":1}]`), nil)
			return err
		}, connect.CodeInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if codeOf(err) != tc.code {
				t.Fatalf("got %v, want %v", err, tc.code)
			}
		})
	}
	if after := len(scanAll(t, ctx, c, "db.cart$changelog")); after != before {
		t.Fatalf("bad input changed the changelog: %d -> %d records", before, after)
	}

	// A restart keeps everything.
	want := lookup(`[{"user_id":1,"item":10},{"user_id":2,"item":10}]`)
	n.Close()
	cfg.ClientAddr = n.ClientAddr()
	n = startNode(t, cfg)
	c = client.New("http://"+n.ClientAddr(), client.WithRetry(client.Retry{Attempts: 50, Base: 50 * time.Millisecond, Max: 500 * time.Millisecond}))
	if got := lookup(`[{"user_id":1,"item":10},{"user_id":2,"item":10}]`); got != want {
		t.Fatalf("after restart: %s, want %s", got, want)
	}
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// replayChangelog applies changelog rows (+I/+U put, -D delete; -U must
// match the current row) to an empty map and renders it in key order.
func replayChangelog(t *testing.T, rows []map[string]any) string {
	t.Helper()
	state := map[string]string{}
	for _, r := range rows {
		key := fmt.Sprintf("%v/%v", r["user_id"], r["item"])
		val := fmt.Sprintf("%v|%v", r["qty"], r["note"])
		switch r["_change_type"] {
		case "+I", "+U":
			state[key] = val
		case "-D":
			delete(state, key)
		case "-U":
			if state[key] != val {
				t.Fatalf("-U of %s carries %s, the replayed row is %s", key, val, state[key])
			}
		}
	}
	var keys []string
	for k, v := range state {
		keys = append(keys, k+"="+v)
	}
	return strings.Join(sortedCopy(keys), ",")
}

// limitScanKeys renders every row of a PK table as replayChangelog does.
func limitScanKeys(t *testing.T, ctx context.Context, c *client.Client, table string) string {
	t.Helper()
	b, err := c.LimitScan(ctx, table, nil, 10000)
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal(b, &rows); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, r := range rows {
		keys = append(keys, fmt.Sprintf("%v/%v=%v|%v", r["user_id"], r["item"], r["qty"], r["note"]))
	}
	return strings.Join(sortedCopy(keys), ",")
}

// TestPrefixLookupRowBudget: the rows a PrefixLookup returns count against
// max_rows_per_request over all its prefixes; a request over it is refused
// (resource_exhausted), never answered with rows left out.
func TestPrefixLookupRowBudget(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Limits.MaxRowsPerRequest = 5
	n := startNode(t, cfg)
	defer n.Close()
	ctx, c := withDB(t, n)
	createPKTable(t, ctx, c, "cart", nil)
	// Users 1 and 2 have 3 items each, user 3 has 5 (users 1..3 may share
	// buckets or not: the budget is per request).
	var rows []string
	for u, items := range map[int]int{1: 3, 2: 3, 3: 5} {
		for i := range items {
			rows = append(rows, fmt.Sprintf(`{"user_id":%d,"item":%d,"qty":1}`, u, i))
		}
	}
	for len(rows) > 0 { // requests within the limit too
		k := min(len(rows), 5)
		if _, err := c.Upsert(ctx, "db.cart", []byte("["+strings.Join(rows[:k], ",")+"]"), nil); err != nil {
			t.Fatal(err)
		}
		rows = rows[k:]
	}
	count := func(prefixes string) (int, error) {
		res, err := c.PrefixLookup(ctx, "db.cart", []byte(prefixes), nil)
		n := 0
		for _, r := range res {
			n += strings.Count(string(r.GetRows()), `"user_id"`)
		}
		return n, err
	}
	if got, err := count(`[{"user_id":1}]`); err != nil || got != 3 {
		t.Fatalf("one prefix of 3 rows: %d rows, %v", got, err)
	}
	if got, err := count(`[{"user_id":3}]`); err != nil || got != 5 {
		t.Fatalf("one prefix of exactly the limit: %d rows, %v", got, err)
	}
	for _, p := range []string{`[{"user_id":1},{"user_id":2}]`, `[{"user_id":3},{"user_id":9},{"user_id":1}]`} {
		if got, err := count(p); codeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), "max_rows_per_request") {
			t.Fatalf("prefixes %s over the limit: %d rows, %v; want resource_exhausted", p, got, err)
		}
	}
}

// TestPKReadByteBudget: Lookup, PrefixLookup and LimitScan answer at most
// max_fetch_bytes of stored rows: the first two refuse more
// (resource_exhausted, never a partial answer), LimitScan answers fewer
// rows than its limit, as Fetch does.
func TestPKReadByteBudget(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Limits.MaxFetchBytes = 2048
	n := startNode(t, cfg)
	defer n.Close()
	ctx, c := withDB(t, n)
	createPKTable(t, ctx, c, "cart", nil)
	note := strings.Repeat("x", 500) // a stored row is a little over 500 bytes
	var rows, keys []string
	for i := range 10 {
		rows = append(rows, fmt.Sprintf(`{"user_id":1,"item":%d,"note":%q}`, i, note))
		keys = append(keys, fmt.Sprintf(`{"user_id":1,"item":%d}`, i))
	}
	if _, err := c.Upsert(ctx, "db.cart", []byte("["+strings.Join(rows, ",")+"]"), nil); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Lookup(ctx, "db.cart", []byte("["+strings.Join(keys[:3], ",")+"]"), []string{"item"}); err != nil || string(got) != `[{"item":0},{"item":1},{"item":2}]` {
		t.Fatalf("lookup of 3 rows within the budget: %s, %v", got, err)
	}
	if _, err := c.Lookup(ctx, "db.cart", []byte("["+strings.Join(keys, ",")+"]"), nil); codeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), "max_fetch_bytes") {
		t.Fatalf("lookup of 10 rows over the budget: %v, want resource_exhausted", err)
	}
	if _, err := c.PrefixLookup(ctx, "db.cart", []byte(`[{"user_id":1}]`), nil); codeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), "max_fetch_bytes") {
		t.Fatalf("prefix lookup of 10 rows over the budget: %v, want resource_exhausted", err)
	}
	got, err := c.LimitScan(ctx, "db.cart", nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	if k := strings.Count(string(got), `"item"`); k < 1 || k > 4 {
		t.Fatalf("limit scan answered %d rows; want 1 to 4 (2048 bytes of ~510-byte rows)", k)
	}
}

// TestPKAddColumnAggregation: an aggregation table keeps summing across a
// column added to it, and the new column aggregates by the default
// (last_value_ignore_nulls): rows of the earlier version keep their sums,
// a write that leaves the new column out does not clear it.
func TestPKAddColumnAggregation(t *testing.T) {
	n := startNode(t, testConfig(t.TempDir()))
	defer n.Close()
	ctx, c := withDB(t, n)
	createPKTable(t, ctx, c, "agg", map[string]string{"table.merge-engine": "aggregation", "fields.qty.agg": "sum"})
	up := func(rows string) {
		t.Helper()
		if _, err := c.Upsert(ctx, "db.agg", []byte(rows), nil); err != nil {
			t.Fatal(err)
		}
	}
	up(`[{"user_id":1,"item":1,"qty":2},{"user_id":1,"item":2,"qty":7}]`)
	if _, err := c.AddColumns(ctx, "db.agg", &flussv1.Column{Name: "tag", Type: "STRING"}); err != nil {
		t.Fatal(err)
	}
	up(`[{"user_id":1,"item":1,"qty":3,"tag":"a"}]`)
	up(`[{"user_id":1,"item":1,"qty":4}]`)
	out, err := c.Lookup(ctx, "db.agg", []byte(`[{"user_id":1,"item":1},{"user_id":1,"item":2}]`), []string{"qty", "tag"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `[{"qty":9,"tag":"a"},{"qty":7,"tag":null}]`; string(out) != want {
		t.Fatalf("aggregated rows across a column added: %s, want %s", out, want)
	}
	// A dictionary-encoded column, and the changelog of all three versions.
	if _, err := c.AddColumns(ctx, "db.agg", &flussv1.Column{Name: "kind", Type: "STRING", Dictionary: true}); err != nil {
		t.Fatal(err)
	}
	up(`[{"user_id":1,"item":2,"qty":1,"kind":"k"}]`)
	var last map[string]any
	for _, r := range scanAll(t, ctx, c, "db.agg$changelog") {
		if r["item"] == float64(2) {
			last = r
		}
	}
	if got := fmt.Sprintf("%v %v %v %v", last["_change_type"], last["qty"], last["tag"], last["kind"]); got != "+U 8 <nil> k" {
		t.Fatalf("last change of item 2: %v", last)
	}
}
