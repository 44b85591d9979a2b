package rpc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/fluss-node/fluss-node/logstore/record"
	"github.com/fluss-node/fluss-node/logstore/record/arrowipc"
	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/raftmeta"
	"github.com/fluss-node/fluss-node/rpc"
	"github.com/fluss-node/fluss-node/rpc/client"
)

var seedFlag = flag.Uint64("seed", 0, "seed of the random fetch tests (0: random)")

type row map[string]any // values: int64, string, float64, bool, nil

var cities = []string{"a", "b", "c", "d"}

func randomRows(r *rand.Rand, start, n int) []row {
	out := make([]row, n)
	for i := range out {
		x := row{"id": int64(start + i)}
		x["city"] = nil
		if r.IntN(5) > 0 {
			x["city"] = cities[r.IntN(len(cities))]
		}
		x["amount"] = nil
		if r.IntN(6) > 0 {
			x["amount"] = float64(r.IntN(2000)) / 10
		}
		x["n"] = int64(r.IntN(100))
		out[i] = x
	}
	return out
}

func rowsJSON(rs []row) []byte {
	b, _ := json.Marshal(rs)
	return b
}

// TestFetchProjectionFilter checks Fetch (JSON and ARROW, with column
// projection, filters and record limits) against the appended rows.
func TestFetchProjectionFilter(t *testing.T) { testFetchProjectionFilter(t, false) }

// TestFetchProjectionFilterDictionary is TestFetchProjectionFilter with
// city stored dictionary-encoded, appended as JSON, as plain Arrow and as
// dictionary-encoded Arrow: every read gives the same rows, and Arrow
// results carry city as a dictionary.
func TestFetchProjectionFilterDictionary(t *testing.T) { testFetchProjectionFilter(t, true) }

func testFetchProjectionFilter(t *testing.T, dictionary bool) {
	seed := *seedFlag
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (replay with -seed %d)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 1))
	e := newEnv(t, rpc.Limits{})
	ctx := context.Background()
	e.mustPost(t, "/fluss.v1.AdminService/CreateDatabase", `{"name":"s"}`)
	e.mustPost(t, "/fluss.v1.AdminService/CreateTable", fmt.Sprintf(`{"table":"s.t","schema":{"columns":[
		{"name":"id","type":"BIGINT NOT NULL"},{"name":"city","type":"STRING","dictionary":%v},
		{"name":"amount","type":"DOUBLE"},{"name":"n","type":"INT NOT NULL"}]}}`, dictionary))
	if got := e.mustPost(t, "/fluss.v1.AdminService/GetTable", `{"table":"s.t"}`); strings.Contains(fmt.Sprint(got), "dictionary:true") != dictionary {
		t.Fatalf("GetTable says %v", got)
	}
	var all []row
	for i := 0; i < 6; i++ {
		rs := randomRows(r, len(all), 1+r.IntN(80))
		all = append(all, rs...)
		if _, err := e.c.Append(ctx, "s.t", rowsJSON(rs)); err != nil {
			t.Fatal(err)
		}
	}
	// Half the data again through the Arrow path (stored as sent).
	rs := randomRows(r, len(all), 50)
	all = append(all, rs...)
	if _, err := e.c.AppendRecord(ctx, "s.t", client.NoBucket, recordOf(rs)); err != nil {
		t.Fatal(err)
	}
	// And with city dictionary-encoded by the client (kept or decoded,
	// whatever the table stores).
	rs = randomRows(r, len(all), 60)
	all = append(all, rs...)
	if _, err := e.c.AppendRecord(ctx, "s.t", 0, dictionaryCity(t, recordOf(rs))); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		cols   []string
		filter string
		keep   func(row) bool
	}{
		{nil, "", nil},
		{[]string{"city"}, "", nil},
		{[]string{"n", "id"}, "", nil},
		{[]string{"id", "amount"}, "amount > 100", func(x row) bool { a, ok := x["amount"].(float64); return ok && a > 100 }},
		{[]string{"id"}, "city IN ('a','b') OR amount IS NULL", func(x row) bool {
			c, _ := x["city"].(string)
			return c == "a" || c == "b" || x["amount"] == nil
		}},
		{nil, "n < 10 AND city != 'c'", func(x row) bool { c, ok := x["city"].(string); return x["n"].(int64) < 10 && ok && c != "c" }},
		{[]string{"city"}, "id >= 1000000", func(row) bool { return false }},
		{[]string{"id", "city"}, "city NOT LIKE 'a%' AND n BETWEEN 10 AND 60", func(x row) bool {
			c, ok := x["city"].(string)
			return ok && !strings.HasPrefix(c, "a") && x["n"].(int64) >= 10 && x["n"].(int64) <= 60
		}},
		{[]string{"city"}, "city ILIKE 'B' OR city NOT ILIKE '%C%'", func(x row) bool {
			c, ok := x["city"].(string)
			return ok && c != "c"
		}},
	} {
		for _, format := range []flussv1.Format{flussv1.Format_JSON, flussv1.Format_ARROW} {
			for _, maxRecords := range []int32{0, 7} {
				name := fmt.Sprintf("%v/%q/%v/max%d", tc.cols, tc.filter, format, maxRecords)
				t.Run(name, func(t *testing.T) {
					start := r.Int64N(int64(len(all)))
					var want []row
					for _, x := range all[start:] {
						if tc.keep == nil || tc.keep(x) {
							want = append(want, project(x, tc.cols))
						}
					}
					got := fetchRows(t, e.c, &flussv1.FetchRequest{Table: "s.t", Offset: start, Columns: tc.cols, Filter: tc.filter, Format: format, MaxRecords: maxRecords}, int64(len(all)))
					sameRows(t, got, want)
					if format == flussv1.Format_ARROW && (tc.cols == nil || slices.Contains(tc.cols, "city")) {
						res, err := e.c.Fetch(ctx, &flussv1.FetchRequest{Table: "s.t", Offset: start, Columns: tc.cols, Filter: tc.filter, Format: format, MaxRecords: maxRecords})
						if err != nil {
							t.Fatal(err)
						}
						rd, err := ipc.NewReader(bytes.NewReader(res.GetArrow()))
						if err != nil {
							t.Fatal(err)
						}
						f, _ := rd.Schema().FieldsByName("city")
						if isDict := f[0].Type.ID() == arrow.DICTIONARY; isDict != dictionary {
							t.Fatalf("Arrow result has city as %s", f[0].Type)
						}
						rd.Release()
					}
				})
			}
		}
	}
}

// fetchRows fetches req's bucket from req.Offset up to end (the high
// watermark), following nextOffset, and decodes the rows.
func fetchRows(t *testing.T, c *client.Client, req *flussv1.FetchRequest, end int64) []row {
	t.Helper()
	var got []row
	for req.Offset < end {
		res, err := c.Fetch(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		var part []row
		if req.Format == flussv1.Format_ARROW {
			part = decodeArrow(t, res.GetArrow())
		} else {
			part = decodeJSON(t, res.GetRows())
		}
		if req.MaxRecords > 0 && len(part) > int(req.MaxRecords) {
			t.Fatalf("got %d rows, maxRecords %d", len(part), req.MaxRecords)
		}
		if res.GetNextOffset() <= req.Offset {
			t.Fatalf("nextOffset %d did not advance from %d", res.GetNextOffset(), req.Offset)
		}
		got = append(got, part...)
		req.Offset = res.GetNextOffset()
	}
	return got
}

func sameRows(t *testing.T, got, want []row) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d rows, want %d", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("row %d: got %v, want %v", i, got[i], want[i])
		}
	}
}

func project(x row, cols []string) row {
	if cols == nil {
		cols = []string{"id", "city", "amount", "n"}
	}
	out := row{}
	for _, c := range cols {
		out[c] = x[c]
	}
	return out
}

func recordOf(rs []row) arrow.Record { return recordWith(rs, "id", "city", "amount", "n") }

// dictionaryCity returns rec (of recordOf) with city dictionary-encoded
// with int16 indices, its dictionary holding every city (some unused).
func dictionaryCity(t *testing.T, rec arrow.Record) arrow.Record {
	t.Helper()
	defer rec.Release()
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int16, ValueType: arrow.BinaryTypes.String}
	b := array.NewDictionaryBuilder(memory.DefaultAllocator, dt).(*array.BinaryDictionaryBuilder)
	defer b.Release()
	sb := array.NewStringBuilder(memory.DefaultAllocator)
	defer sb.Release()
	sb.AppendValues(append([]string{"unused"}, cities...), nil)
	all := sb.NewStringArray()
	defer all.Release()
	if err := b.InsertStringDictValues(all); err != nil {
		t.Fatal(err)
	}
	city := rec.Column(1).(*array.String)
	for i := range city.Len() {
		if city.IsNull(i) {
			b.AppendNull()
		} else if err := b.AppendString(city.Value(i)); err != nil {
			t.Fatal(err)
		}
	}
	d := b.NewArray()
	defer d.Release()
	fields := rec.Schema().Fields()
	fields[1].Type = dt
	cols := slices.Clone(rec.Columns())
	cols[1] = d
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, rec.NumRows())
}

// recordWith builds an Arrow record of the rows' given columns (of id
// BIGINT, city STRING, amount DOUBLE, n INT), in that order.
func recordWith(rs []row, cols ...string) arrow.Record {
	types := map[string]arrow.Field{
		"id":     {Name: "id", Type: arrow.PrimitiveTypes.Int64},
		"city":   {Name: "city", Type: arrow.BinaryTypes.String, Nullable: true},
		"amount": {Name: "amount", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		"n":      {Name: "n", Type: arrow.PrimitiveTypes.Int32},
	}
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = types[c]
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema(fields, nil))
	defer b.Release()
	for _, x := range rs {
		for i, c := range cols {
			if x[c] == nil {
				b.Field(i).AppendNull()
				continue
			}
			switch fb := b.Field(i).(type) {
			case *array.Int64Builder:
				fb.Append(x[c].(int64))
			case *array.StringBuilder:
				fb.Append(x[c].(string))
			case *array.Float64Builder:
				fb.Append(x[c].(float64))
			case *array.Int32Builder:
				fb.Append(int32(x[c].(int64)))
			}
		}
	}
	return b.NewRecord()
}

func decodeJSON(t *testing.T, raw []byte) []row {
	t.Helper()
	if len(raw) == 0 {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var rs []map[string]any
	if err := d.Decode(&rs); err != nil {
		t.Fatalf("rows %s: %v", raw, err)
	}
	out := make([]row, len(rs))
	for i, m := range rs {
		x := row{}
		for k, v := range m {
			switch {
			case v == nil:
				x[k] = nil
			case k == "id" || k == "n":
				n, _ := v.(json.Number).Int64()
				x[k] = n
			case k == "amount":
				f, _ := v.(json.Number).Float64()
				x[k] = f
			default:
				x[k] = v
			}
		}
		out[i] = x
	}
	return out
}

// decodeArrow reads an ARROW response as a client would, with arrow-go's
// IPC reader.
func decodeArrow(t *testing.T, stream []byte) []row {
	t.Helper()
	rd, err := ipc.NewReader(bytes.NewReader(stream))
	if err != nil {
		t.Fatalf("arrow stream: %v", err)
	}
	defer rd.Release()
	var out []row
	for rd.Next() {
		rec := rd.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			x := row{}
			for c := 0; c < int(rec.NumCols()); c++ {
				name := rec.Schema().Field(c).Name
				col := rec.Column(c)
				if col.IsNull(i) {
					x[name] = nil
					continue
				}
				switch a := col.(type) {
				case *array.Int64:
					x[name] = a.Value(i)
				case *array.Int32:
					x[name] = int64(a.Value(i))
				case *array.String:
					x[name] = a.Value(i)
				case *array.Float64:
					x[name] = a.Value(i)
				case *array.Dictionary:
					x[name] = a.Dictionary().(*array.String).Value(a.GetValueIndex(i))
				default:
					t.Fatalf("unexpected column type %T", col)
				}
			}
			out = append(out, x)
		}
	}
	if err := rd.Err(); err != nil {
		t.Fatalf("arrow stream: %v", err)
	}
	return out
}

func TestAppendArrowRejectsBadInput(t *testing.T) {
	e := newEnv(t, rpc.Limits{})
	ctx := context.Background()
	e.mustPost(t, "/fluss.v1.AdminService/CreateDatabase", `{"name":"s"}`)
	e.mustPost(t, "/fluss.v1.AdminService/CreateTable", `{"table":"s.t","schema":{"columns":[
		{"name":"id","type":"BIGINT NOT NULL"},{"name":"city","type":"STRING"},
		{"name":"amount","type":"DOUBLE"},{"name":"n","type":"INT NOT NULL"}]}}`)
	good, err := client.EncodeArrowStream(nil, recordOf(randomRows(rand.New(rand.NewPCG(1, 2)), 0, 20)), false)
	if err != nil {
		t.Fatal(err)
	}
	// Wrong schema: a different column type.
	wrongSch := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int32}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, wrongSch)
	b.Field(0).(*array.Int32Builder).Append(1)
	wrong, _ := client.EncodeArrowStream(nil, b.NewRecord(), false)
	// A body whose buffers are cut short: flip the declared value length.
	corrupt := bytes.Clone(good)
	if i := bytes.LastIndex(corrupt, []byte{20, 0, 0, 0, 0, 0, 0, 0}); i > 0 {
		corrupt[i] = 200 // record count 200 with buffers for 20
	} else {
		t.Fatal("could not find the record count to corrupt")
	}
	// The table's schema message, then a batch with a fifth column: Arrow
	// readers ignore the extra field node and buffers, projection cannot.
	wide := arrow.NewSchema(append(recordOf(nil).Schema().Fields(), arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int32}), nil)
	wb := array.NewRecordBuilder(memory.DefaultAllocator, wide)
	wb.Field(0).(*array.Int64Builder).Append(1)
	wb.Field(1).(*array.StringBuilder).Append("a")
	wb.Field(2).(*array.Float64Builder).Append(1)
	wb.Field(3).(*array.Int32Builder).Append(1)
	wb.Field(4).(*array.Int32Builder).Append(1)
	wideStream, _ := client.EncodeArrowStream(nil, wb.NewRecord(), false)
	goodSchema, _, err := arrowipc.SplitStream(good)
	if err != nil {
		t.Fatal(err)
	}
	_, wideBatches, err := arrowipc.SplitStream(wideStream)
	if err != nil {
		t.Fatal(err)
	}
	extra := arrowipc.AppendStream(nil, goodSchema, wideBatches...)
	for _, tc := range []struct {
		name   string
		stream []byte
		msg    string
	}{
		{"garbage", []byte("not arrow at all"), "arrow"},
		{"extra buffers", extra, "field nodes"},
		{"wrong schema", wrong, "columns"},
		{"truncated", good[:len(good)-40], "arrow"},
		{"corrupt body", corrupt, "record batch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.c.AppendArrow(ctx, "s.t", client.NoBucket, tc.stream)
			if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want invalid_argument mentioning %q", err, tc.msg)
			}
		})
	}
	if n := e.b.Appends(); n != 0 {
		t.Fatalf("backend stored %d appends of bad Arrow", n)
	}
	if _, err := e.c.AppendArrow(ctx, "s.t", 0, good); err != nil {
		t.Fatalf("good stream: %v", err)
	}
}

func TestClientRetriesWithoutDuplicates(t *testing.T) {
	e := newEnv(t, rpc.Limits{})
	e.setupOrders(t)
	ctx := context.Background()
	fails := 2
	c := client.New(e.url, client.WithRetry(client.Retry{Attempts: 5, Base: 1, Max: 2}))
	// Two attempts fail with unavailable; the third stores the rows.
	e.b.AppendHook = func(b raftmeta.BucketID) error {
		if fails > 0 {
			fails--
			if fails == 0 {
				return rpc.ErrNoBucketLeader
			}
			return rpc.ErrNotLeader
		}
		return nil
	}
	res, err := c.Append(ctx, "shop.orders", []byte(`[{"id":1},{"id":2}]`))
	if err != nil || len(res) != 1 || res[0].GetCount() != 2 {
		t.Fatalf("append after retries: %v %v", res, err)
	}
	// Replay the same (writer, sequence) by hand: stored once.
	req := &flussv1.AppendRequest{Table: "shop.orders", Rows: []byte(`[{"id":3}]`)}
	if _, err := c.AppendRequest(ctx, req); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AppendRequest(ctx, req); err != nil { // same WriterId and BatchSequence
		t.Fatal(err)
	}
	tab, _ := e.b.Table(ctx, "shop.orders")
	if got := e.b.Records(tab.ID, 0); got != 3 {
		t.Fatalf("bucket holds %d records, want 3 (no duplicates)", got)
	}
	// Unavailable forever: the client gives up with the server's code.
	e.b.AppendHook = func(raftmeta.BucketID) error { return rpc.ErrNoBucketLeader }
	_, err = c.Append(ctx, "shop.orders", []byte(`[{"id":4}]`))
	if connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("err = %v, want unavailable", err)
	}
}

// TestClientScanRetriesBeforeFirstMessage: a Scan that fails as
// unavailable before anything reached the caller is retried; a following
// scan that fails after rows were handed over resumes from its position,
// so nothing is read twice and nothing is skipped.
func TestClientScanRetriesBeforeFirstMessage(t *testing.T) {
	// Short long-polls: a following scan's next read may start before the
	// rows reach the caller and would otherwise wait 30 s for data.
	e := newEnv(t, rpc.Limits{MaxWait: 20 * time.Millisecond})
	e.setupOrders(t)
	ctx := context.Background()
	c := client.New(e.url, client.WithRetry(client.Retry{Attempts: 5, Base: 1, Max: 2}))
	if _, err := c.Append(ctx, "shop.orders", []byte(`[{"id":1},{"id":2},{"id":3}]`)); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	fails, failing, readsWhileFailing := 2, false, 0
	e.b.ReadHook = func(raftmeta.BucketID) error {
		mu.Lock()
		defer mu.Unlock()
		if failing {
			readsWhileFailing++
			failing = readsWhileFailing < 2
			return rpc.ErrNoBucketLeader
		}
		if fails > 0 {
			fails--
			return rpc.ErrNoBucketLeader
		}
		return nil
	}
	scan := func(follow bool, onRows func(rows int) error) (int, error) {
		rows := 0
		err := c.Scan(ctx, &flussv1.ScanRequest{Table: "shop.orders", From: flussv1.ScanRequest_EARLIEST, Follow: follow}, func(res *flussv1.ScanResponse) error {
			rows += len(decodeJSON(t, res.GetRows()))
			return onRows(rows)
		})
		return rows, err
	}
	if rows, err := scan(false, func(int) error { return nil }); err != nil || rows != 3 {
		t.Fatalf("scan after two unavailable starts: %d rows, %v", rows, err)
	}

	// Following: the rows arrive, then two reads fail (the stream breaks,
	// the first new stream fails before its first message) while a new row
	// comes: the scan resumes after the three rows it handed over.
	rows, err := scan(true, func(rows int) error {
		switch rows {
		case 3:
			mu.Lock()
			failing = true
			mu.Unlock()
			// The row comes once a read failed: the read under way when the
			// rows were handed over passed the hook before it, and would
			// return the row in the first stream.
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
				mu.Lock()
				failed := readsWhileFailing
				mu.Unlock()
				if failed > 0 {
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("no read failed within 5 s")
				}
			}
			_, err := c.Append(ctx, "shop.orders", []byte(`[{"id":4}]`))
			return err
		case 4:
			return client.ErrStop
		}
		return fmt.Errorf("%d rows handed over, want 3 then 4 (a row twice?)", rows)
	})
	if err != nil || rows != 4 {
		t.Fatalf("follow scan failing after its rows: %d rows, %v (want 4, no error)", rows, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if readsWhileFailing != 2 {
		t.Fatalf("%d reads failed, want 2 (the broken stream's and the first resumed one's)", readsWhileFailing)
	}
}

// TestAppendArrowInStoredForm: a record built with the table's Arrow
// schema (record.Schema.ArrowSchema, which marks its dictionary-encoded
// columns) leaves the Go client with those columns encoded as the table
// stores them, and its batch is stored exactly as sent; a plain record is
// re-encoded, and both read back as the rows appended.
func TestAppendArrowInStoredForm(t *testing.T) {
	e := newEnv(t, rpc.Limits{})
	ctx := context.Background()
	e.mustPost(t, "/fluss.v1.AdminService/CreateDatabase", `{"name":"s"}`)
	e.mustPost(t, "/fluss.v1.AdminService/CreateTable", `{"table":"s.t","schema":{"columns":[
		{"name":"id","type":"BIGINT NOT NULL"},{"name":"city","type":"STRING","dictionary":true},
		{"name":"amount","type":"DOUBLE"},{"name":"n","type":"INT NOT NULL"}]}}`)
	tbl, err := e.b.Table(ctx, "s.t")
	if err != nil {
		t.Fatal(err)
	}
	rs := randomRows(rand.New(rand.NewPCG(1, 2)), 0, 100)
	plain := recordOf(rs)
	defer plain.Release()
	marked := array.NewRecordBatch(tbl.Schema().ArrowSchema(), plain.Columns(), plain.NumRows())
	defer marked.Release()

	for i, rec := range []arrow.Record{marked, plain} {
		sent, err := client.EncodeArrowStream(nil, rec, true)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.c.AppendArrow(ctx, "s.t", 0, sent); err != nil {
			t.Fatal(err)
		}
		_, bodies, err := arrowipc.SplitStream(sent)
		if err != nil || len(bodies) != 1 {
			t.Fatalf("split what the client sent: %d bodies, %v", len(bodies), err)
		}
		res, err := e.b.Fetch(ctx, raftmeta.BucketID{TableID: tbl.ID, PartitionID: raftmeta.NoPartition}, int64(i*len(rs)), 1<<20, 0)
		if err != nil {
			t.Fatal(err)
		}
		b, _, err := record.ParseBatch(res.Batches[0])
		if err != nil {
			t.Fatal(err)
		}
		if kept := bytes.Equal(b.Body, bodies[0]); kept != (rec == marked) {
			t.Fatalf("record %d: stored as sent: %v", i, kept)
		}
	}
	got := fetchRows(t, e.c, &flussv1.FetchRequest{Table: "s.t", Format: flussv1.Format_ARROW}, int64(2*len(rs)))
	sameRows(t, got, append(rs, rs...))
}
