package rpc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/rpc"
	"github.com/fluss-node/fluss-node/rpc/client"
)

// setupEvents creates s.ev, a log table partitioned by dt with 2 buckets.
func (e *env) setupEvents(t *testing.T) {
	e.mustPost(t, "/fluss.v1.AdminService/CreateDatabase", `{"name":"s"}`)
	e.mustPost(t, "/fluss.v1.AdminService/CreateTable", `{"table":"s.ev","bucketCount":2,"partitionKeys":["dt"],
		"schema":{"columns":[{"name":"id","type":"BIGINT NOT NULL"},{"name":"dt","type":"STRING NOT NULL"},{"name":"v","type":"INT"}]}}`)
}

func partitionNames(t *testing.T, e *env) []string {
	t.Helper()
	out := e.mustPost(t, "/fluss.v1.AdminService/ListPartitions", `{"table":"s.ev"}`)
	var names []string
	ps, _ := out["partitions"].([]any)
	for _, p := range ps {
		names = append(names, p.(map[string]any)["name"].(string))
	}
	return names
}

// TestPartitionedAppendRoutesAndCreates: rows go to the partition their
// partition key names, created on first write; each partition's buckets
// hold exactly its rows; reads must name a partition.
func TestPartitionedAppendRoutesAndCreates(t *testing.T) {
	e := newEnv(t, rpc.Limits{})
	e.setupEvents(t)
	out := e.mustPost(t, "/fluss.v1.WriteService/Append", `{"table":"s.ev","rows":[
		{"id":1,"dt":"a","v":1},{"id":2,"dt":"b","v":2},{"id":3,"dt":"a","v":3},{"id":4,"dt":"c"}]}`)
	counts := map[string]float64{}
	for _, r := range out["results"].([]any) {
		m := r.(map[string]any)
		counts[m["partition"].(string)] += m["count"].(float64)
	}
	if want := map[string]float64{"a": 2, "b": 1, "c": 1}; fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Fatalf("appended per partition %v, want %v", counts, want)
	}
	if got := partitionNames(t, e); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("partitions %v, want [a b c]", got)
	}
	// Every partition holds its rows and no others.
	for _, p := range []string{"a", "b", "c"} {
		var ids []float64
		for b := range 2 {
			res := e.mustPost(t, "/fluss.v1.ReadService/Fetch", fmt.Sprintf(`{"table":"s.ev","partition":%q,"bucket":%d,"offset":0}`, p, b))
			rows, _ := res["rows"].([]any)
			for _, r := range rows {
				m := r.(map[string]any)
				if m["dt"] != p {
					t.Fatalf("partition %s holds row %v", p, m)
				}
				ids = append(ids, m["id"].(float64))
			}
		}
		slices.Sort(ids)
		want := map[string][]float64{"a": {1, 3}, "b": {2}, "c": {4}}[p]
		if !slices.Equal(ids, want) {
			t.Fatalf("partition %s holds ids %v, want %v", p, ids, want)
		}
	}
	// A request that names a partition appends only rows of it.
	e.mustPost(t, "/fluss.v1.WriteService/Append", `{"table":"s.ev","partition":"b","bucket":1,"rows":[{"id":5,"dt":"b"}]}`)
	off := e.mustPost(t, "/fluss.v1.AdminService/ListOffsets", `{"table":"s.ev","partition":"b","buckets":[1],"spec":"LATEST"}`)
	if got := off["offsets"].([]any)[0].(map[string]any); got["offset"] != "1" || got["partition"] != "b" {
		t.Fatalf("ListOffsets of b/1 = %v, want offset 1", got)
	}
}

func TestPartitionedBadInput(t *testing.T) {
	e := newEnv(t, rpc.Limits{})
	e.setupEvents(t)
	e.mustPost(t, "/fluss.v1.WriteService/Append", `{"table":"s.ev","rows":[{"id":1,"dt":"a"}]}`)
	e.mustPost(t, "/fluss.v1.AdminService/CreateTable", `{"table":"s.plain","schema":{"columns":[{"name":"id","type":"BIGINT"}]}}`)
	e.mustPost(t, "/fluss.v1.AdminService/CreateTable", `{"table":"s.cc","partitionKeys":["cc"],
		"schema":{"columns":[{"name":"id","type":"BIGINT"},{"name":"cc","type":"CHAR(2) NOT NULL"}]}}`)
	for _, tc := range []struct {
		name, proc, body, code string
	}{
		{"create partition longer than its key", "/fluss.v1.AdminService/CreatePartition", `{"table":"s.cc","values":{"cc":"USA"}}`, "invalid_argument"},
		{"append to a partition longer than its key", "/fluss.v1.WriteService/Append", `{"table":"s.cc","rows":[{"id":1,"cc":"USA"}]}`, "invalid_argument"},
		{"fetch without partition", "/fluss.v1.ReadService/Fetch", `{"table":"s.ev","bucket":0,"offset":0}`, "invalid_argument"},
		{"fetch unknown partition", "/fluss.v1.ReadService/Fetch", `{"table":"s.ev","partition":"zz","bucket":0,"offset":0}`, "not_found"},
		{"partition of unpartitioned table", "/fluss.v1.ReadService/Fetch", `{"table":"s.plain","partition":"a","bucket":0,"offset":0}`, "invalid_argument"},
		{"append names another partition", "/fluss.v1.WriteService/Append", `{"table":"s.ev","partition":"a","rows":[{"id":2,"dt":"b"}]}`, "invalid_argument"},
		{"append to missing named partition", "/fluss.v1.WriteService/Append", `{"table":"s.ev","partition":"q","rows":[{"id":2,"dt":"q"}]}`, "not_found"},
		{"partition value not allowed", "/fluss.v1.WriteService/Append", `{"table":"s.ev","rows":[{"id":2,"dt":"a b"}]}`, "invalid_argument"},
		{"partition value null", "/fluss.v1.WriteService/Append", `{"table":"s.ev","rows":[{"id":2,"dt":null}]}`, "invalid_argument"},
		{"too many new partitions", "/fluss.v1.WriteService/Append", manyPartitions(17), "resource_exhausted"},
		{"create partition missing value", "/fluss.v1.AdminService/CreatePartition", `{"table":"s.ev","values":{}}`, "invalid_argument"},
		{"create partition unknown key", "/fluss.v1.AdminService/CreatePartition", `{"table":"s.ev","values":{"x":"1"}}`, "invalid_argument"},
		{"create existing partition", "/fluss.v1.AdminService/CreatePartition", `{"table":"s.ev","values":{"dt":"a"}}`, "already_exists"},
		{"create partition of unpartitioned", "/fluss.v1.AdminService/CreatePartition", `{"table":"s.plain","values":{"dt":"a"}}`, "invalid_argument"},
		{"drop missing partition", "/fluss.v1.AdminService/DropPartition", `{"table":"s.ev","values":{"dt":"zz"}}`, "not_found"},
		{"list by unknown key", "/fluss.v1.AdminService/ListPartitions", `{"table":"s.ev","values":{"x":"1"}}`, "invalid_argument"},
		{"scan unknown partition", "/fluss.v1.ReadService/LimitScan", `{"table":"s.ev","partition":"zz","limit":1}`, "not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, out := e.post(t, tc.proc, tc.body)
			if st == 200 || out["code"] != tc.code {
				t.Fatalf("status %d, %v; want code %s", st, out, tc.code)
			}
		})
	}
	// Nothing of the refused writes was stored or created.
	if got := partitionNames(t, e); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("partitions after bad input %v, want [a]", got)
	}
	if got := e.mustPost(t, "/fluss.v1.AdminService/ListPartitions", `{"table":"s.cc"}`)["partitions"]; got != nil && len(got.([]any)) > 0 {
		t.Fatalf("partitions of s.cc after bad input %v, want none", got)
	}
	e.mustPost(t, "/fluss.v1.AdminService/CreatePartition", `{"table":"s.cc","values":{"cc":"US"}}`)
	rows := e.mustPost(t, "/fluss.v1.ReadService/LimitScan", `{"table":"s.ev","partition":"a","limit":10}`)["rows"].([]any)
	if len(rows) != 1 {
		t.Fatalf("partition a holds %v, want the one row", rows)
	}
	e.mustPost(t, "/fluss.v1.AdminService/CreatePartition", `{"table":"s.ev","values":{"dt":"a"},"ignoreIfExists":true}`)
	e.mustPost(t, "/fluss.v1.AdminService/DropPartition", `{"table":"s.ev","values":{"dt":"zz"},"ignoreIfNotExists":true}`)
}

func manyPartitions(n int) string {
	var rows []map[string]any
	for i := range n {
		rows = append(rows, map[string]any{"id": i, "dt": fmt.Sprintf("p%d", i)})
	}
	b, _ := json.Marshal(map[string]any{"table": "s.ev", "rows": rows})
	return string(b)
}

// TestPartitionedScan: a scan of a partitioned table reads every
// partition; following, it also reads partitions created after it started.
func TestPartitionedScan(t *testing.T) {
	e := newEnv(t, rpc.Limits{})
	e.setupEvents(t)
	ctx := context.Background()
	if _, err := e.c.Append(ctx, "s.ev", []byte(`[{"id":1,"dt":"a"},{"id":2,"dt":"b"}]`)); err != nil {
		t.Fatal(err)
	}
	collect := func(req *flussv1.ScanRequest, until int) map[string][]float64 {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		var mu sync.Mutex
		got := map[string][]float64{}
		n := 0
		err := e.c.Scan(ctx, req, func(r *flussv1.ScanResponse) error {
			var rows []map[string]any
			if err := json.Unmarshal(r.Rows, &rows); err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			for _, row := range rows {
				if row["dt"] != r.Partition {
					return fmt.Errorf("message of partition %q holds %v", r.Partition, row)
				}
				got[r.Partition] = append(got[r.Partition], row["id"].(float64))
				n++
			}
			if until > 0 && n >= until {
				cancel()
			}
			return nil
		})
		if until > 0 && n < until {
			t.Fatalf("scan ended after %d rows (%v), want %d: %v", n, got, until, err)
		}
		if until == 0 && err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := collect(&flussv1.ScanRequest{Table: "s.ev"}, 0); fmt.Sprint(got) != "map[a:[1] b:[2]]" {
		t.Fatalf("scan of all partitions: %v", got)
	}
	if got := collect(&flussv1.ScanRequest{Table: "s.ev", Partition: "b"}, 0); fmt.Sprint(got) != "map[b:[2]]" {
		t.Fatalf("scan of partition b: %v", got)
	}
	// Follow from latest: a row in an old partition and one in a new one.
	go func() {
		time.Sleep(300 * time.Millisecond)
		e.c.Append(ctx, "s.ev", []byte(`[{"id":3,"dt":"a"},{"id":4,"dt":"new"}]`))
	}()
	got := collect(&flussv1.ScanRequest{Table: "s.ev", From: flussv1.ScanRequest_LATEST, Follow: true}, 2)
	if fmt.Sprint(got) != "map[a:[3] new:[4]]" {
		t.Fatalf("following scan read %v, want a:[3] new:[4]", got)
	}
}

// TestPartitionedAppendArrow: an Arrow stream's rows are split by
// partition (and re-encoded) like JSON rows.
func TestPartitionedAppendArrow(t *testing.T) {
	e := newEnv(t, rpc.Limits{})
	e.mustPost(t, "/fluss.v1.AdminService/CreateDatabase", `{"name":"s"}`)
	e.mustPost(t, "/fluss.v1.AdminService/CreateTable", `{"table":"s.pa","bucketCount":2,"partitionKeys":["city"],
		"schema":{"columns":[{"name":"id","type":"BIGINT NOT NULL"},{"name":"city","type":"STRING"}]}}`)
	rec := recordWith([]row{{"id": int64(1), "city": "a"}, {"id": int64(2), "city": "b"}, {"id": int64(3), "city": "a"}}, "id", "city")
	defer rec.Release()
	res, err := e.c.AppendRecord(context.Background(), "s.pa", client.NoBucket, rec)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int32{}
	for _, r := range res {
		n[r.GetPartition()] += r.GetCount()
	}
	if fmt.Sprint(n) != "map[a:2 b:1]" {
		t.Fatalf("appended %v, want a:2 b:1", n)
	}
	for p, want := range map[string]string{"a": "[1 3]", "b": "[2]"} {
		rows := e.mustPost(t, "/fluss.v1.ReadService/LimitScan", fmt.Sprintf(`{"table":"s.pa","partition":%q,"limit":10}`, p))["rows"].([]any)
		var ids []float64
		for _, r := range rows {
			ids = append(ids, r.(map[string]any)["id"].(float64))
		}
		slices.Sort(ids)
		if fmt.Sprint(ids) != want {
			t.Fatalf("partition %s holds ids %v, want %s", p, ids, want)
		}
	}
	// A null partition key in an Arrow stream is refused, nothing stored.
	bad := recordWith([]row{{"id": int64(4), "city": "a"}, {"id": int64(5), "city": nil}}, "id", "city")
	defer bad.Release()
	if _, err := e.c.AppendRecord(context.Background(), "s.pa", client.NoBucket, bad); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("null partition key: %v, want invalid_argument", err)
	}
	if rows := e.mustPost(t, "/fluss.v1.ReadService/LimitScan", `{"table":"s.pa","partition":"a","limit":10}`)["rows"].([]any); len(rows) != 2 {
		t.Fatalf("partition a after a refused append: %v", rows)
	}
}

// TestPartitionKeysOfEveryType: partition names join the values of every
// partition key (STRING, DATE, INT, BIGINT) in key order with '$'.
func TestPartitionKeysOfEveryType(t *testing.T) {
	e := newEnv(t, rpc.Limits{})
	e.mustPost(t, "/fluss.v1.AdminService/CreateDatabase", `{"name":"s"}`)
	e.mustPost(t, "/fluss.v1.AdminService/CreateTable", `{"table":"s.m","partitionKeys":["region","day","n","big"],
		"schema":{"columns":[{"name":"id","type":"BIGINT"},{"name":"region","type":"STRING"},{"name":"day","type":"DATE"},
		{"name":"n","type":"INT"},{"name":"big","type":"BIGINT"}]}}`)
	out := e.mustPost(t, "/fluss.v1.WriteService/Append", `{"table":"s.m","rows":[
		{"id":1,"region":"eu","day":"2026-12-03","n":-5,"big":"9007199254740993"},
		{"id":2,"region":"us","day":"1969-12-31","n":0,"big":1}]}`)
	var names []string
	for _, r := range out["results"].([]any) {
		names = append(names, r.(map[string]any)["partition"].(string))
	}
	slices.Sort(names)
	if want := []string{"eu$2026-12-03$-5$9007199254740993", "us$1969-12-31$0$1"}; !slices.Equal(names, want) {
		t.Fatalf("partitions %v, want %v", names, want)
	}
	ps := e.mustPost(t, "/fluss.v1.AdminService/ListPartitions", `{"table":"s.m","values":{"region":"us"}}`)["partitions"].([]any)
	if len(ps) != 1 || ps[0].(map[string]any)["name"] != "us$1969-12-31$0$1" {
		t.Fatalf("partitions of region us: %v", ps)
	}
}

// TestRetryWithoutBucketIsStoredOnce: a table without bucket keys, and an
// idempotent request that names no bucket (a client without routing,
// curl): every retry of the same (writer id, batch sequence) goes to the
// bucket of the first attempt, where it is remembered, so it is stored
// once — also in a partitioned table, per partition. Before, the server
// rotated such requests over the buckets, and a retry landed in another.
func TestRetryWithoutBucketIsStoredOnce(t *testing.T) {
	e := newEnv(t, rpc.Limits{})
	e.mustPost(t, "/fluss.v1.AdminService/CreateDatabase", `{"name":"s"}`)
	e.mustPost(t, "/fluss.v1.AdminService/CreateTable", `{"table":"s.t","bucketCount":4,"schema":{"columns":[{"name":"id","type":"BIGINT"}]}}`)
	e.mustPost(t, "/fluss.v1.AdminService/CreateTable", `{"table":"s.p","bucketCount":4,"partitionKeys":["d"],
		"schema":{"columns":[{"name":"id","type":"BIGINT"},{"name":"d","type":"STRING"}]}}`)
	total := func(table string) int64 {
		out := e.mustPost(t, "/fluss.v1.AdminService/ListOffsets", fmt.Sprintf(`{"table":%q,"spec":"LATEST"%s}`, table, map[string]string{"s.t": "", "s.p": `,"partition":"a"`}[table]))
		var n int64
		for _, o := range out["offsets"].([]any) {
			v, _ := strconv.ParseInt(o.(map[string]any)["offset"].(string), 10, 64)
			n += v
		}
		return n
	}
	for _, tc := range []struct{ table, rows string }{
		{"s.t", `[{"id":1},{"id":2}]`},
		{"s.p", `[{"id":1,"d":"a"},{"id":2,"d":"a"}]`},
	} {
		for seq := range 3 {
			for range 4 { // the first attempt and three retries
				e.mustPost(t, "/fluss.v1.WriteService/Append", fmt.Sprintf(`{"table":%q,"rows":%s,"writerId":"77","batchSequence":%d}`, tc.table, tc.rows, seq))
			}
		}
		if got := total(tc.table); got != 6 {
			t.Fatalf("%s holds %d records after 3 requests of 2 rows sent 4 times each, want 6", tc.table, got)
		}
	}
}
