package rpc_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"

	"connectrpc.com/connect"

	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/rpc"
	"github.com/fluss-node/fluss-node/rpc/client"
)

// TestAlterTableAddColumns: rows written before AddColumns read the new
// columns as null, through every read path (JSON and Arrow, whole batches
// and projections, filters on old and new columns, Scan), and a writer
// still on the old schema keeps writing.
func TestAlterTableAddColumns(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 1))
	e := newEnv(t, rpc.Limits{})
	ctx := context.Background()
	e.mustPost(t, "/fluss.v1.AdminService/CreateDatabase", `{"name":"s"}`)
	e.mustPost(t, "/fluss.v1.AdminService/CreateTable", `{"table":"s.t","schema":{"columns":[
		{"name":"id","type":"BIGINT NOT NULL"},{"name":"city","type":"STRING"}]}}`)

	var all []row
	// oldRows are rows of schema 1: amount and n do not exist for them.
	oldRows := func(n int) []row {
		rs := randomRows(r, len(all), n)
		for _, x := range rs {
			x["amount"], x["n"] = nil, nil
		}
		return rs
	}
	rs := oldRows(40)
	if _, err := e.c.Append(ctx, "s.t", rowsJSON(project2(rs))); err != nil {
		t.Fatal(err)
	}
	all = append(all, rs...)
	rs = oldRows(30)
	if _, err := e.c.AppendRecord(ctx, "s.t", client.NoBucket, recordWith(rs, "id", "city")); err != nil {
		t.Fatal(err)
	}
	all = append(all, rs...)

	sid, err := e.c.AddColumns(ctx, "s.t", &flussv1.Column{Name: "amount", Type: "DOUBLE"}, &flussv1.Column{Name: "n", Type: "INT"})
	if err != nil || sid != 2 {
		t.Fatalf("AddColumns = %d, %v", sid, err)
	}
	if tb, err := e.c.GetTable(ctx, "s.t"); err != nil || tb.GetSchemaId() != 2 || len(tb.GetSchema().GetColumns()) != 4 || !tb.GetSchema().GetColumns()[3].GetNullable() {
		t.Fatalf("GetTable after AddColumns = %v, %v", tb, err)
	}

	rs = randomRows(r, len(all), 50)
	if _, err := e.c.Append(ctx, "s.t", rowsJSON(rs)); err != nil {
		t.Fatal(err)
	}
	all = append(all, rs...)
	rs = randomRows(r, len(all), 20)
	if _, err := e.c.AppendRecord(ctx, "s.t", client.NoBucket, recordOf(rs)); err != nil {
		t.Fatal(err)
	}
	all = append(all, rs...)
	// A writer that still has schema 1.
	rs = oldRows(10)
	if _, err := e.c.AppendRecord(ctx, "s.t", client.NoBucket, recordWith(rs, "id", "city")); err != nil {
		t.Fatalf("append with the previous schema: %v", err)
	}
	all = append(all, rs...)
	// A JSON row without the new columns is a row with nulls in them.
	rs = oldRows(5)
	if _, err := e.c.Append(ctx, "s.t", rowsJSON(project2(rs))); err != nil {
		t.Fatal(err)
	}
	all = append(all, rs...)

	for _, tc := range []struct {
		cols   []string
		filter string
		keep   func(row) bool
	}{
		{nil, "", nil},
		{[]string{"id", "city"}, "", nil}, // stored in every batch
		{[]string{"amount"}, "", nil},     // added: null in old batches
		{[]string{"n", "city"}, "", nil},
		{[]string{"id"}, "amount IS NULL", func(x row) bool { return x["amount"] == nil }},
		{[]string{"id", "n"}, "n > 50", func(x row) bool { n, ok := x["n"].(int64); return ok && n > 50 }},
		{nil, "city = 'a' AND n IS NULL", func(x row) bool { return x["city"] == "a" && x["n"] == nil }},
	} {
		for _, format := range []flussv1.Format{flussv1.Format_JSON, flussv1.Format_ARROW} {
			t.Run(fmt.Sprintf("%v/%q/%v", tc.cols, tc.filter, format), func(t *testing.T) {
				var want []row
				for _, x := range all {
					if tc.keep == nil || tc.keep(x) {
						want = append(want, project(x, tc.cols))
					}
				}
				got := fetchRows(t, e.c, &flussv1.FetchRequest{Table: "s.t", Columns: tc.cols, Filter: tc.filter, Format: format}, int64(len(all)))
				sameRows(t, got, want)
			})
		}
	}

	var scanned []row
	err = e.c.Scan(ctx, &flussv1.ScanRequest{Table: "s.t", From: flussv1.ScanRequest_EARLIEST}, func(res *flussv1.ScanResponse) error {
		scanned = append(scanned, decodeJSON(t, res.GetRows())...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sameRows(t, scanned, all)
}

// project2 keeps a row's schema-1 columns.
func project2(rs []row) []row {
	out := make([]row, len(rs))
	for i, x := range rs {
		out[i] = project(x, []string{"id", "city"})
	}
	return out
}

// TestAlterTableBadInput: every refused change names the problem, gets the
// right code and leaves the schema as it was.
func TestAlterTableBadInput(t *testing.T) {
	e := newEnv(t, rpc.Limits{})
	ctx := context.Background()
	e.mustPost(t, "/fluss.v1.AdminService/CreateDatabase", `{"name":"s"}`)
	e.mustPost(t, "/fluss.v1.AdminService/CreateTable", `{"table":"s.t","schema":{"columns":[
		{"name":"id","type":"BIGINT NOT NULL"},{"name":"city","type":"STRING"}]}}`)
	e.mustPost(t, "/fluss.v1.AdminService/CreateTable", `{"table":"s.pk","schema":{"columns":[
		{"name":"id","type":"BIGINT NOT NULL"},{"name":"v","type":"STRING"}],"primaryKey":["id"]}}`)
	for _, tc := range []struct {
		table string
		cols  []*flussv1.Column
		code  connect.Code
	}{
		{"s.t", nil, connect.CodeInvalidArgument},
		{"s.t", []*flussv1.Column{{Name: "x", Type: "INT NOT NULL"}}, connect.CodeInvalidArgument},
		{"s.t", []*flussv1.Column{{Name: "x", Type: "INT", Nullable: new(false)}}, connect.CodeInvalidArgument},
		{"s.t", []*flussv1.Column{{Name: "city", Type: "STRING"}}, connect.CodeInvalidArgument},
		{"s.t", []*flussv1.Column{{Name: "x", Type: "INT"}, {Name: "x", Type: "STRING"}}, connect.CodeInvalidArgument},
		{"s.t", []*flussv1.Column{{Name: "x", Type: "VARCHAR2"}}, connect.CodeInvalidArgument},
		{"s.t", []*flussv1.Column{{Name: "bad name", Type: "INT"}}, connect.CodeInvalidArgument},
		{"s.nope", []*flussv1.Column{{Name: "x", Type: "INT"}}, connect.CodeNotFound},
		{"s.pk", []*flussv1.Column{{Name: "x", Type: "INT NOT NULL"}}, connect.CodeInvalidArgument},
		{"s.pk$changelog", []*flussv1.Column{{Name: "x", Type: "INT"}}, connect.CodeInvalidArgument},
	} {
		_, err := e.c.AddColumns(ctx, tc.table, tc.cols...)
		var ce *connect.Error
		if !errors.As(err, &ce) || ce.Code() != tc.code {
			t.Errorf("AddColumns(%s, %v) = %v, want %v", tc.table, tc.cols, err, tc.code)
		}
	}
	for _, table := range []string{"s.t", "s.pk"} {
		if tb, err := e.c.GetTable(ctx, table); err != nil || tb.GetSchemaId() != 1 || len(tb.GetSchema().GetColumns()) != 2 {
			t.Fatalf("%s after refused changes: %v, %v", table, tb, err)
		}
	}
}

// TestReadAheadOfCatalog: data written with a schema version this node's
// catalog has not applied yet is `unavailable` (retry), not an internal
// error, and reads again once the catalog has it.
func TestReadAheadOfCatalog(t *testing.T) {
	e := newEnv(t, rpc.Limits{})
	ctx := context.Background()
	e.mustPost(t, "/fluss.v1.AdminService/CreateDatabase", `{"name":"s"}`)
	e.mustPost(t, "/fluss.v1.AdminService/CreateTable", `{"table":"s.t","schema":{"columns":[{"name":"id","type":"BIGINT NOT NULL"}]}}`)
	before, err := e.b.Table(ctx, "s.t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.AddColumns(ctx, "s.t", &flussv1.Column{Name: "note", Type: "STRING"}); err != nil {
		t.Fatal(err)
	}
	after, _ := e.b.Table(ctx, "s.t")
	if _, err := e.c.Append(ctx, "s.t", []byte(`[{"id":1,"note":"x"}]`)); err != nil {
		t.Fatal(err)
	}
	e.b.ReplaceTable("s.t", before)
	_, err = e.c.Fetch(ctx, &flussv1.FetchRequest{Table: "s.t"})
	if connect.CodeOf(err) != connect.CodeUnavailable || !strings.Contains(err.Error(), "knows up to 1") {
		t.Fatalf("fetch with a lagging catalog = %v, want unavailable", err)
	}
	e.b.ReplaceTable("s.t", after)
	res, err := e.c.Fetch(ctx, &flussv1.FetchRequest{Table: "s.t"})
	if err != nil || string(res.GetRows()) != `[{"id":1,"note":"x"}]` {
		t.Fatalf("fetch once the catalog caught up = %s, %v", res.GetRows(), err)
	}
}

// TestAlterTableProperties: AlterTable sets and resets the properties that
// may change after creation (Connect JSON, as curl sends it), and refuses
// every other change, naming it, with nothing changed (columns asked for
// in the same request included).
func TestAlterTableProperties(t *testing.T) {
	e := newEnv(t, rpc.Limits{})
	ctx := context.Background()
	e.mustPost(t, "/fluss.v1.AdminService/CreateDatabase", `{"name":"s"}`)
	e.mustPost(t, "/fluss.v1.AdminService/CreateTable", `{"table":"s.t","schema":{"columns":[
		{"name":"id","type":"BIGINT NOT NULL"}]},"properties":{"table.log.ttl":"7d","owner":"ann","table.datalake.enabled":"true"}}`)
	e.mustPost(t, "/fluss.v1.AdminService/CreateTable", `{"table":"s.pk","schema":{"columns":[
		{"name":"id","type":"BIGINT NOT NULL"}],"primaryKey":["id"]}}`)
	e.mustPost(t, "/fluss.v1.AdminService/AlterTable", `{"table":"s.pk","setProperties":{"table.log.ttl":"1d"}}`)
	e.mustPost(t, "/fluss.v1.AdminService/AlterTable", `{"table":"s.t",
		"setProperties":{"table.log.ttl":"2d","table.log.arrow.compression.type":"LZ4_FRAME","team":"core"},
		"resetProperties":["owner"]}`)
	want := map[string]string{"table.log.ttl": "2d", "table.log.arrow.compression.type": "LZ4_FRAME", "team": "core", "table.datalake.enabled": "true"}
	tb, err := e.c.GetTable(ctx, "s.t")
	if err != nil || !maps.Equal(tb.GetProperties(), want) || tb.GetSchemaId() != 1 {
		t.Fatalf("GetTable after AlterTable = %v, %v; want properties %v", tb, err, want)
	}
	if err := e.c.SetTableProperties(ctx, "s.t", nil, "team"); err != nil {
		t.Fatal(err)
	}
	delete(want, "team")
	// A lake table created without a lake format takes one, once.
	if err := e.c.SetTableProperties(ctx, "s.t", map[string]string{"table.datalake.format": "parquet"}); err != nil {
		t.Fatalf("set the lake format of a table without one: %v", err)
	}
	want["table.datalake.format"] = "parquet"

	for _, tc := range []struct {
		name  string
		req   *flussv1.AlterTableRequest
		code  connect.Code
		words string
	}{
		{"nothing", &flussv1.AlterTableRequest{Table: "s.t"}, connect.CodeInvalidArgument, "no change"},
		{"fixed at creation", &flussv1.AlterTableRequest{Table: "s.t", SetProperties: map[string]string{"table.log.format": "ARROW"}}, connect.CodeInvalidArgument, "cannot change after the table is created"},
		{"fixed reset", &flussv1.AlterTableRequest{Table: "s.t", ResetProperties: []string{"table.merge-engine"}}, connect.CodeInvalidArgument, "table.merge-engine"},
		{"bad value", &flussv1.AlterTableRequest{Table: "s.t", SetProperties: map[string]string{"table.log.ttl": "soon"}}, connect.CodeInvalidArgument, "table.log.ttl"},
		{"both set and reset", &flussv1.AlterTableRequest{Table: "s.t", SetProperties: map[string]string{"x": "1"}, ResetProperties: []string{"x"}}, connect.CodeInvalidArgument, "both set and reset"},
		{"empty key", &flussv1.AlterTableRequest{Table: "s.t", SetProperties: map[string]string{"": "1"}}, connect.CodeInvalidArgument, "empty property key"},
		{"lake off", &flussv1.AlterTableRequest{Table: "s.t", SetProperties: map[string]string{"table.datalake.enabled": "false"}}, connect.CodeInvalidArgument, "cannot be turned off"},
		{"lake reset", &flussv1.AlterTableRequest{Table: "s.t", ResetProperties: []string{"table.datalake.enabled"}}, connect.CodeInvalidArgument, "cannot be turned off"},
		{"lake format once set", &flussv1.AlterTableRequest{Table: "s.t", SetProperties: map[string]string{"table.datalake.format": "iceberg"}}, connect.CodeInvalidArgument, "cannot change after the table is created"},
		{"lake format reset", &flussv1.AlterTableRequest{Table: "s.t", ResetProperties: []string{"table.datalake.format"}}, connect.CodeInvalidArgument, "cannot change after the table is created"},
		{"lake format unknown", &flussv1.AlterTableRequest{Table: "s.pk", SetProperties: map[string]string{"table.datalake.format": "paimon"}}, connect.CodeInvalidArgument, "want one of iceberg, parquet"},
		{"with a column", &flussv1.AlterTableRequest{Table: "s.t", AddColumns: []*flussv1.Column{{Name: "note", Type: "STRING"}},
			SetProperties: map[string]string{"table.log.arrow.compression.zstd.level": "99"}}, connect.CodeInvalidArgument, "zstd.level"},
		{"a bad column with properties", &flussv1.AlterTableRequest{Table: "s.t", AddColumns: []*flussv1.Column{{Name: "id", Type: "STRING"}},
			SetProperties: map[string]string{"table.log.ttl": "1d"}}, connect.CodeInvalidArgument, "id"},
		{"compression of a primary-key table", &flussv1.AlterTableRequest{Table: "s.pk", SetProperties: map[string]string{"table.log.arrow.compression.type": "NONE"}}, connect.CodeInvalidArgument, "primary-key table"},
		{"unknown table", &flussv1.AlterTableRequest{Table: "s.nope", SetProperties: map[string]string{"table.log.ttl": "1d"}}, connect.CodeNotFound, "s.nope"},
		{"changelog of a log table", &flussv1.AlterTableRequest{Table: "s.t$changelog", SetProperties: map[string]string{"table.log.ttl": "1d"}}, connect.CodeFailedPrecondition, "primary-key tables"},
	} {
		_, err := e.c.AlterTable(ctx, tc.req)
		if connect.CodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.words) {
			t.Errorf("%s: AlterTable = %v, want %v naming %q", tc.name, err, tc.code, tc.words)
		}
	}
	tb, err = e.c.GetTable(ctx, "s.t")
	if err != nil || !maps.Equal(tb.GetProperties(), want) || tb.GetSchemaId() != 1 {
		t.Fatalf("GetTable after refused changes = %v, %v; want properties %v and schema 1", tb, err, want)
	}
}
