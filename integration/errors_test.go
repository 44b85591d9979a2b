package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestBadInputIsRejectedAndChangesNothing sends bad requests as curl would
// (Connect JSON over net/http) to a server with a small max_request_bytes:
// each gets the exact Connect code and a message naming the problem, and the
// table's data is byte-for-byte the same afterwards.
func TestBadInputIsRejectedAndChangesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	const maxRequest = 4096
	p := startNodeWithConfig(t, t.TempDir(), fmt.Sprintf("[limits]\nmax_request_bytes = %d\nmax_batch_bytes = %d\n", maxRequest, maxRequest))
	addr := p.addr

	mustCall(t, addr, "AdminService/CreateDatabase", map[string]any{"name": "bad"}, nil)
	mustCall(t, addr, "AdminService/CreateTable", map[string]any{
		"table": "bad.t",
		"schema": map[string]any{"columns": []map[string]any{
			{"name": "id", "type": "BIGINT", "nullable": false},
			{"name": "name", "type": "STRING"},
			{"name": "amount", "type": "DECIMAL(10,2)"},
			{"name": "code", "type": "CHAR(3)"},
		}},
		"bucketCount": 2,
	}, nil)
	for b := 0; b < 2; b++ {
		mustCall(t, addr, "WriteService/Append", map[string]any{"table": "bad.t", "bucket": b, "rows": []map[string]any{
			{"id": 10*b + 1, "name": "a", "amount": "1.50"},
			{"id": 10*b + 2, "name": nil, "amount": 2},
		}}, nil)
	}
	before := fetchAllRaw(t, addr, "bad.t", 2)
	if len(before[0]) != 2 || len(before[1]) != 2 {
		t.Fatalf("setup: want 2 rows per bucket, got %d and %d", len(before[0]), len(before[1]))
	}

	raw := []struct {
		name, procedure, body, code string
		words                       []string
	}{
		{"malformed JSON body", "WriteService/Append", `{"table": "bad.t", "rows": [{"id": 1,}]}`, "invalid_argument", []string{"JSON"}},
		{"truncated JSON body", "WriteService/Append", `{"table": "bad.t", "rows": [`, "invalid_argument", []string{"JSON"}},
		{"body is not an object", "AdminService/CreateDatabase", `[1,2]`, "invalid_argument", nil},
		{"oversized request", "WriteService/Append",
			`{"table": "bad.t", "rows": [{"id": 99, "name": "` + strings.Repeat("x", 2*maxRequest) + `"}]}`,
			"resource_exhausted", nil},
	}
	for _, c := range raw {
		status, body, err := postRaw(addr, c.procedure, []byte(c.body))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		var ce connectErr
		if status == 200 || json.Unmarshal(body, &ce) != nil {
			t.Errorf("%s: HTTP %d %s, want a Connect error %s", c.name, status, body, c.code)
			continue
		}
		wantCode(t, c.name, &ce, c.code, c.words...)
	}

	col := func(name, typ string) map[string]any { return map[string]any{"name": name, "type": typ} }
	table := func(name string, bucketCount int, cols ...map[string]any) map[string]any {
		return map[string]any{"table": name, "schema": map[string]any{"columns": cols}, "bucketCount": bucketCount}
	}
	cases := []struct {
		name, procedure string
		req             any
		code            string
		words           []string
	}{
		{"wrong JSON type (string for BIGINT)", "WriteService/Append",
			map[string]any{"table": "bad.t", "rows": []map[string]any{{"id": "abc"}}}, "invalid_argument", []string{`"id"`, "row 0"}},
		{"wrong JSON type (number for STRING)", "WriteService/Append",
			map[string]any{"table": "bad.t", "rows": []map[string]any{{"id": 5}, {"id": 6, "name": 7}}}, "invalid_argument", []string{`"name"`, "row 1"}},
		{"wrong JSON type (object for DECIMAL)", "WriteService/Append",
			map[string]any{"table": "bad.t", "rows": []map[string]any{{"id": 5, "amount": map[string]any{}}}}, "invalid_argument", []string{`"amount"`}},
		{"string longer than its column allows", "WriteService/Append",
			map[string]any{"table": "bad.t", "rows": []map[string]any{{"id": 5, "code": "EUR"}, {"id": 6, "code": "EURO"}}}, "invalid_argument", []string{`"code"`, "row 1", "VARCHAR(3)"}},
		{"rows is not an array", "WriteService/Append",
			map[string]any{"table": "bad.t", "rows": "nope"}, "invalid_argument", nil},
		{"NULL in NOT NULL column", "WriteService/Append",
			map[string]any{"table": "bad.t", "rows": []map[string]any{{"id": nil, "name": "x"}}}, "invalid_argument", []string{`"id"`, "NOT NULL"}},
		{"missing NOT NULL column", "WriteService/Append",
			map[string]any{"table": "bad.t", "rows": []map[string]any{{"name": "x"}}}, "invalid_argument", []string{`"id"`, "NOT NULL"}},
		{"unknown table (append)", "WriteService/Append",
			map[string]any{"table": "bad.nope", "rows": []map[string]any{{"id": 1}}}, "not_found", []string{"bad.nope"}},
		{"unknown table (fetch)", "ReadService/Fetch",
			map[string]any{"table": "bad.nope", "bucket": 0, "offset": 0}, "not_found", []string{"bad.nope"}},
		{"unknown database (fetch)", "ReadService/Fetch",
			map[string]any{"table": "nodb.t", "bucket": 0, "offset": 0}, "not_found", []string{"nodb"}},
		{"unknown column in rows", "WriteService/Append",
			map[string]any{"table": "bad.t", "rows": []map[string]any{{"id": 1, "bogus": 2}}}, "invalid_argument", []string{`"bogus"`}},
		{"unknown column in columns", "ReadService/Fetch",
			map[string]any{"table": "bad.t", "bucket": 0, "offset": 0, "columns": []string{"id", "bogus"}}, "invalid_argument", []string{`"bogus"`}},
		{"filter that does not parse", "ReadService/Fetch",
			map[string]any{"table": "bad.t", "bucket": 0, "offset": 0, "filter": "amount >> 10"}, "invalid_argument", []string{"filter", "position"}},
		{"filter with unclosed string", "ReadService/Fetch",
			map[string]any{"table": "bad.t", "bucket": 0, "offset": 0, "filter": "name = 'abc"}, "invalid_argument", []string{"filter"}},
		{"filter on unknown column", "ReadService/Fetch",
			map[string]any{"table": "bad.t", "bucket": 0, "offset": 0, "filter": "bogus > 10"}, "invalid_argument", []string{`"bogus"`}},
		{"offset past the end", "ReadService/Fetch",
			map[string]any{"table": "bad.t", "bucket": 0, "offset": 99}, "out_of_range",
			[]string{"fetch bad.t bucket 0 at offset 99: offset out of range: the log holds offsets [0, 2)"}},
		{"negative offset", "ReadService/Fetch",
			map[string]any{"table": "bad.t", "bucket": 0, "offset": -1}, "out_of_range", []string{"-1"}},
		{"bucket that does not exist", "ReadService/Fetch",
			map[string]any{"table": "bad.t", "bucket": 7, "offset": 0}, "not_found", []string{"7"}},
		{"append to a bucket that does not exist", "WriteService/Append",
			map[string]any{"table": "bad.t", "bucket": 7, "rows": []map[string]any{{"id": 1}}}, "not_found", []string{"7"}},
		{"Upsert on a log table", "WriteService/Upsert",
			map[string]any{"table": "bad.t", "rows": []map[string]any{{"id": 1}}}, "failed_precondition", []string{"bad.t", "log table"}},
		{"Delete on a log table", "WriteService/Delete",
			map[string]any{"table": "bad.t", "keys": []map[string]any{{"id": 1}}}, "failed_precondition", []string{"bad.t", "log table"}},
		{"Lookup on a log table", "ReadService/Lookup",
			map[string]any{"table": "bad.t", "keys": []map[string]any{{"id": 1}}}, "failed_precondition", []string{"bad.t", "log table"}},
		{"DDL: bad type", "AdminService/CreateTable",
			table("bad.t1", 1, col("a", "BIGGINT")), "invalid_argument", []string{"BIGGINT"}},
		{"DDL: VARCHAR of length 0", "AdminService/CreateTable",
			table("bad.t1", 1, col("a", "VARCHAR(0)")), "invalid_argument", []string{"VARCHAR(0)", "at least 1"}},
		{"DDL: DECIMAL precision out of range", "AdminService/CreateTable",
			table("bad.t1", 1, col("a", "DECIMAL(99,2)")), "invalid_argument", []string{"DECIMAL"}},
		{"DDL: duplicate column", "AdminService/CreateTable",
			table("bad.t1", 1, col("a", "INT"), col("a", "STRING")), "invalid_argument", []string{`"a"`}},
		{"DDL: no columns", "AdminService/CreateTable",
			table("bad.t1", 1), "invalid_argument", nil},
		{"DDL: bucketCount 5000", "AdminService/CreateTable",
			table("bad.t1", 5000, col("a", "INT")), "invalid_argument", []string{"5000"}},
		{"DDL: bucketCount -1", "AdminService/CreateTable",
			table("bad.t1", -1, col("a", "INT")), "invalid_argument", []string{"-1"}},
		{"DDL: bucket key not a column", "AdminService/CreateTable",
			map[string]any{"table": "bad.t1", "schema": map[string]any{"columns": []any{col("a", "INT")}}, "bucketKeys": []string{"zz"}},
			"invalid_argument", []string{`zz`}},
		{"DDL: table name without database", "AdminService/CreateTable",
			table("t1", 1, col("a", "INT")), "invalid_argument", []string{"t1"}},
		{"DDL: table in a missing database", "AdminService/CreateTable",
			table("nodb.t1", 1, col("a", "INT")), "not_found", []string{"nodb"}},
		{"DDL: existing table", "AdminService/CreateTable",
			table("bad.t", 1, col("a", "INT")), "already_exists", []string{"bad.t"}},
		{"DDL: existing database", "AdminService/CreateDatabase",
			map[string]any{"name": "bad"}, "already_exists", []string{"bad"}},
		{"DDL: drop a database that is not empty", "AdminService/DropDatabase",
			map[string]any{"name": "bad"}, "failed_precondition", []string{"bad"}},
		{"DDL: drop a missing table", "AdminService/DropTable",
			map[string]any{"table": "bad.nope"}, "not_found", []string{"bad.nope"}},
		{"ListOffsets on an unknown table", "AdminService/ListOffsets",
			map[string]any{"table": "bad.nope", "spec": "LATEST"}, "not_found", []string{"bad.nope"}},
	}
	for _, c := range cases {
		err := callOnce(addr, c.procedure, c.req, nil)
		wantCode(t, c.name, err, c.code, c.words...)
	}

	// None of the failed DDL created bad.t1.
	var tables struct {
		Tables []string `json:"tables"`
	}
	mustCall(t, addr, "AdminService/ListTables", map[string]any{"database": "bad"}, &tables)
	if len(tables.Tables) != 1 || tables.Tables[0] != "t" {
		t.Errorf("after failed DDL, tables of bad = %q, want [t]", tables.Tables)
	}
	// The data is unchanged, byte for byte.
	after := fetchAllRaw(t, addr, "bad.t", 2)
	for b := range before {
		if !bytes.Equal(joinRaw(before[b]), joinRaw(after[b])) {
			t.Errorf("bucket %d changed by rejected requests:\nbefore %s\nafter  %s", b, joinRaw(before[b]), joinRaw(after[b]))
		}
	}
}

// TestBucketCountZeroMeansDefault pins what bucketCount 0 does: proto3 cannot
// tell 0 from unset, so it is the default, one bucket.
func TestBucketCountZeroMeansDefault(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	addr := startNode(t, t.TempDir()).addr
	mustCall(t, addr, "AdminService/CreateDatabase", map[string]any{"name": "d"}, nil)
	mustCall(t, addr, "AdminService/CreateTable", map[string]any{"table": "d.t", "bucketCount": 0,
		"schema": map[string]any{"columns": []map[string]any{{"name": "a", "type": "INT"}}}}, nil)
	var got struct {
		BucketCount int `json:"bucketCount"`
	}
	mustCall(t, addr, "AdminService/GetTable", map[string]any{"table": "d.t"}, &got)
	if got.BucketCount != 1 {
		t.Fatalf("bucketCount 0 gave %d buckets, want the default 1", got.BucketCount)
	}
}

func joinRaw(rows []json.RawMessage) []byte {
	return append(bytes.Join(func() [][]byte {
		out := make([][]byte, len(rows))
		for i, r := range rows {
			out[i] = r
		}
		return out
	}(), []byte("\n")), '\n')
}
