package rpc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/rpc"
	"github.com/fluss-node/fluss-node/rpc/client"
	"github.com/fluss-node/fluss-node/rpc/internal/membackend"
)

type env struct {
	b   *membackend.Backend
	url string
	c   *client.Client
}

func newEnv(t *testing.T, lim rpc.Limits) *env { return newEnvLim(t, lim) }

func newEnvTB(tb testing.TB) *env { return newEnvLim(tb, rpc.Limits{}) }

func newEnvLim(t testing.TB, lim rpc.Limits) *env {
	t.Helper()
	b := membackend.New()
	url := serveHTTP(t, rpc.NewHandler(b, lim, prometheus.NewRegistry(), nil))
	return &env{b: b, url: url, c: client.New(url, client.WithRetry(client.Retry{Attempts: 1}))}
}

// serveHTTP serves h over HTTP/1.1 and h2c (gRPC) until the test ends and
// returns its URL.
func serveHTTP(t testing.TB, h http.Handler) string {
	srv := httptest.NewUnstartedServer(h)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

// post sends a Connect JSON request as curl would and returns the status
// and decoded body.
func (e *env) post(t testing.TB, proc, body string) (int, map[string]any) {
	t.Helper()
	res, err := http.Post(e.url+proc, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", proc, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("POST %s: response is not JSON: %q", proc, raw)
	}
	return res.StatusCode, out
}

func (e *env) mustPost(t *testing.T, proc, body string) map[string]any {
	return e.mustPostTB(t, proc, body)
}

func (e *env) mustPostTB(t testing.TB, proc, body string) map[string]any {
	t.Helper()
	st, out := e.post(t, proc, body)
	if st != 200 {
		t.Fatalf("POST %s %s: status %d: %v", proc, body, st, out)
	}
	return out
}

const ordersSchema = `{"table":"shop.orders","schema":{"columns":[
	{"name":"id","type":"BIGINT NOT NULL"},
	{"name":"city","type":"STRING"},
	{"name":"amount","type":"DECIMAL(10,2)"},
	{"name":"ts","type":"TIMESTAMP(3)"},
	{"name":"n","type":"INT"}]}}`

func (e *env) setupOrders(t *testing.T) {
	t.Helper()
	e.mustPost(t, "/fluss.v1.AdminService/CreateDatabase", `{"name":"shop"}`)
	e.mustPost(t, "/fluss.v1.AdminService/CreateTable", ordersSchema)
}

func TestJSONOverHTTP(t *testing.T) {
	e := newEnv(t, rpc.Limits{})
	e.setupOrders(t)
	out := e.mustPost(t, "/fluss.v1.AdminService/ListDatabases", `{}`)
	if fmt.Sprint(out["databases"]) != "[shop]" {
		t.Fatalf("databases = %v", out["databases"])
	}
	got := e.mustPost(t, "/fluss.v1.AdminService/GetTable", `{"table":"shop.orders"}`)
	if got["bucketCount"] != float64(1) || got["schema"] == nil {
		t.Fatalf("GetTable = %v", got)
	}
	rows := `[{"id":9007199254740993,"city":"a","amount":"12.50","ts":"2024-05-01T12:00:00.123","n":1},
	          {"id":2,"city":null,"amount":3,"ts":1714564800000,"n":2}]`
	res := e.mustPost(t, "/fluss.v1.WriteService/Append", `{"table":"shop.orders","rows":`+rows+`}`)
	rs := res["results"].([]any)
	if len(rs) != 1 || rs[0].(map[string]any)["count"] != float64(2) {
		t.Fatalf("Append results = %v", res)
	}
	// Fetch: rows come back inline, BIGINT exact.
	st, raw := rawPost(t, e.url+"/fluss.v1.ReadService/Fetch", `{"table":"shop.orders","bucket":0,"offset":0,"columns":["id","amount"]}`)
	if st != 200 {
		t.Fatalf("Fetch: %d %s", st, raw)
	}
	if !bytes.Contains(raw, []byte(`"rows":[{"id":9007199254740993,"amount":"12.50"},{"id":2,"amount":"3.00"}]`)) {
		t.Fatalf("Fetch body = %s", raw)
	}
	var fr struct {
		NextOffset    string `json:"nextOffset"`
		HighWatermark string `json:"highWatermark"`
	}
	_ = json.Unmarshal(raw, &fr)
	if fr.NextOffset != "2" || fr.HighWatermark != "2" {
		t.Fatalf("offsets = %+v", fr)
	}
}

func rawPost(t *testing.T, url, body string) (int, []byte) {
	t.Helper()
	res, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res.StatusCode, raw
}

func TestBadInput(t *testing.T) {
	e := newEnv(t, rpc.Limits{MaxRequestBytes: 4096})
	e.setupOrders(t)
	e.mustPost(t, "/fluss.v1.WriteService/Append", `{"table":"shop.orders","rows":[{"id":1}]}`)
	before := e.b.Appends()
	big := `{"table":"shop.orders","rows":[` + strings.Repeat(`{"id":1,"city":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"},`, 200) + `{"id":1}]}`
	for _, tc := range []struct {
		name, proc, body string
		code             string
		msg              string
	}{
		{"malformed JSON", "/fluss.v1.WriteService/Append", `{"table":"shop.orders","rows":[{"id":1}`, "invalid_argument", "malformed JSON"},
		{"rows not array", "/fluss.v1.WriteService/Append", `{"table":"shop.orders","rows":{"id":1}}`, "invalid_argument", "must be a JSON array"},
		{"rows not objects", "/fluss.v1.WriteService/Append", `{"table":"shop.orders","rows":[1]}`, "invalid_argument", "not a JSON object"},
		{"unknown request field", "/fluss.v1.WriteService/Append", `{"table":"shop.orders","rowz":[]}`, "invalid_argument", `unknown field "rowz"`},
		{"wrong type", "/fluss.v1.WriteService/Append", `{"table":"shop.orders","rows":[{"id":"abc"}]}`, "invalid_argument", "id"},
		{"wrong type int", "/fluss.v1.WriteService/Append", `{"table":"shop.orders","rows":[{"id":1,"n":"x"}]}`, "invalid_argument", "n"},
		{"null in NOT NULL", "/fluss.v1.WriteService/Append", `{"table":"shop.orders","rows":[{"id":null}]}`, "invalid_argument", "id"},
		{"missing NOT NULL", "/fluss.v1.WriteService/Append", `{"table":"shop.orders","rows":[{"city":"a"}]}`, "invalid_argument", "id"},
		{"unpaired surrogate", "/fluss.v1.WriteService/Append", `{"table":"shop.orders","rows":[{"id":1,"city":"\ud800"}]}`, "invalid_argument", `unpaired UTF-16 surrogate \ud800`},
		{"unknown column in row", "/fluss.v1.WriteService/Append", `{"table":"shop.orders","rows":[{"id":1,"nope":2}]}`, "invalid_argument", "nope"},
		{"unknown table", "/fluss.v1.WriteService/Append", `{"table":"shop.nope","rows":[{"id":1}]}`, "not_found", "shop.nope"},
		{"bad table name", "/fluss.v1.WriteService/Append", `{"table":"nodot","rows":[{"id":1}]}`, "invalid_argument", "database.table"},
		{"no rows", "/fluss.v1.WriteService/Append", `{"table":"shop.orders"}`, "invalid_argument", "needs rows"},
		{"bad bucket", "/fluss.v1.WriteService/Append", `{"table":"shop.orders","bucket":3,"rows":[{"id":1}]}`, "not_found", "bucket"},
		{"bad arrow", "/fluss.v1.WriteService/Append", `{"table":"shop.orders","arrow":"AAAAAAAA"}`, "invalid_argument", "arrow"},
		{"oversized request", "/fluss.v1.WriteService/Append", big, "resource_exhausted", "max_request_bytes"},
		{"upsert on log table", "/fluss.v1.WriteService/Upsert", `{"table":"shop.orders","rows":[{"id":1}]}`, "failed_precondition", "log table"},
		{"lookup on log table", "/fluss.v1.ReadService/Lookup", `{"table":"shop.orders","keys":[{"id":1}]}`, "failed_precondition", "log table"},
		{"changelog of log table", "/fluss.v1.ReadService/Fetch", `{"table":"shop.orders$changelog"}`, "failed_precondition", "log table"},
		{"unknown column in columns", "/fluss.v1.ReadService/Fetch", `{"table":"shop.orders","columns":["id","nope"]}`, "invalid_argument", `"nope"`},
		{"filter does not parse", "/fluss.v1.ReadService/Fetch", `{"table":"shop.orders","filter":"id >"}`, "invalid_argument", "filter"},
		{"filter unknown column", "/fluss.v1.ReadService/Fetch", `{"table":"shop.orders","filter":"nope = 1"}`, "invalid_argument", "nope"},
		{"filter quoted clipped", "/fluss.v1.ReadService/Fetch", `{"table":"shop.orders","filter":"` + strings.Repeat("(", 3000) + `"}`, "invalid_argument", "… (3000 bytes)"},
		{"filter wrong type", "/fluss.v1.ReadService/Fetch", `{"table":"shop.orders","filter":"id = 'x'"}`, "invalid_argument", "filter"},
		{"offset past the end", "/fluss.v1.ReadService/Fetch", `{"table":"shop.orders","offset":99}`, "out_of_range", "99"},
		{"negative offset", "/fluss.v1.ReadService/Fetch", `{"table":"shop.orders","offset":-1}`, "out_of_range", "-1"},
		{"negative maxRecords", "/fluss.v1.ReadService/Fetch", `{"table":"shop.orders","maxRecords":-1}`, "invalid_argument", "maxRecords -1"},
		{"negative maxBytes", "/fluss.v1.ReadService/Fetch", `{"table":"shop.orders","maxBytes":-1}`, "invalid_argument", "maxBytes -1"},
		{"negative maxWaitMs", "/fluss.v1.ReadService/Fetch", `{"table":"shop.orders","maxWaitMs":-1}`, "invalid_argument", "maxWaitMs -1"},
		{"unknown table fetch", "/fluss.v1.ReadService/Fetch", `{"table":"x.y"}`, "not_found", "x.y"},
		{"create existing db", "/fluss.v1.AdminService/CreateDatabase", `{"name":"shop"}`, "already_exists", "shop"},
		{"drop non-empty db", "/fluss.v1.AdminService/DropDatabase", `{"name":"shop"}`, "failed_precondition", "shop"},
		{"bad column type", "/fluss.v1.AdminService/CreateTable", `{"table":"shop.t2","schema":{"columns":[{"name":"a","type":"BIGGINT"}]}}`, "invalid_argument", "BIGGINT"},
		// A 136-byte stream whose schema message claims 2^31-1 fields:
		// arrow-go allocated by that count, a fatal out-of-memory.
		{"arrow schema claiming 2^31 fields", "/fluss.v1.WriteService/Append", `{"table":"shop.orders","arrow":"/////3gAAAAQAAAAAAAKAAwACgAJAAQACgAAABAAAAAAAQQACAAIAAAABAAIAAAABAAAAP///38UAAAAEAAUABAADwAOAAgAAAAEABAAAAAQAAAAGAAAAAAAAgEcAAAAAAAAAAgADAAIAAcACAAAAAAAAAFAAAAAAgAAAGlkAAD/////AAAAAA=="}`, "invalid_argument", "schema fields"},
		{"partitions of an unpartitioned table", "/fluss.v1.AdminService/ListPartitions", `{"table":"shop.orders"}`, "invalid_argument", "not partitioned"},
		{"aggregation the engine refuses", "/fluss.v1.AdminService/CreateTable",
			`{"table":"shop.agg","schema":{"columns":[{"name":"id","type":"BIGINT"},{"name":"b","type":"BOOLEAN"}],"primaryKey":["id"]},` +
				`"properties":{"table.merge-engine":"aggregation","fields.b.agg":"sum"}}`, "invalid_argument", "fields.b.agg"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, out := e.post(t, tc.proc, tc.body)
			if out["code"] != tc.code {
				t.Fatalf("code = %v, want %s (%v)", out["code"], tc.code, out["message"])
			}
			msg, _ := out["message"].(string)
			if !strings.Contains(msg, tc.msg) {
				t.Fatalf("message %q does not mention %q", msg, tc.msg)
			}
		})
	}
	// Rows in a proto request skip the JSON codec's syntax check; the row
	// decoder still refuses what it would otherwise store altered.
	c := client.New(e.url)
	for _, rows := range []string{`[{"id":1,"city":"\q"}]`, `[{"id":1,"city":"\udfff"}]`, "[{\"id\":1,\"city\":\"a\tb\"}]", "[{\"id\":1,\"ci\x01ty\":\"x\"}]"} {
		_, err := c.Append(context.Background(), "shop.orders", []byte(rows))
		if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "rows are not valid JSON") {
			t.Errorf("proto Append of %s: %v", rows, err)
		}
	}
	if got := e.b.Appends(); got != before {
		t.Fatalf("backend saw %d writes from bad requests", got-before)
	}
	for _, name := range []string{"shop.t2", "shop.agg", "shop.parted", "shop.lake"} {
		if _, out := e.post(t, "/fluss.v1.AdminService/GetTable", `{"table":"`+name+`"}`); out["code"] != "not_found" {
			t.Fatalf("refused CreateTable of %s left a table: GetTable answered %v", name, out)
		}
	}
	// Lake tiering switched off explicitly is fine.
	e.mustPost(t, "/fluss.v1.AdminService/CreateTable",
		`{"table":"shop.nolake","schema":{"columns":[{"name":"id","type":"BIGINT"}]},"properties":{"table.datalake.enabled":"false"}}`)
}

func TestHealthReadyMetrics(t *testing.T) {
	e := newEnv(t, rpc.Limits{})
	get := func(p string) (int, string) {
		res, err := http.Get(e.url + p)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if st, _ := get("/healthz"); st != 200 {
		t.Fatalf("healthz %d", st)
	}
	if st, _ := get("/readyz"); st != 200 {
		t.Fatalf("readyz %d", st)
	}
	e.b.ReadyErr = fmt.Errorf("no metadata leader yet")
	if st, body := get("/readyz"); st != 503 || !strings.Contains(body, "no metadata leader") {
		t.Fatalf("readyz when not ready: %d %q", st, body)
	}
	e.post(t, "/fluss.v1.AdminService/GetTable", `{"table":"a.b"}`)
	_, body := get("/metrics")
	if !strings.Contains(body, `fluss_rpc_requests_total{code="not_found",procedure="/fluss.v1.AdminService/GetTable"} 1`) {
		t.Fatalf("metrics lack the GetTable count:\n%s", body)
	}
}

// TestTableTrafficMetrics: each table's rows and bytes written and read
// through this node are counted once the request succeeds (a refused
// request not at all), and a dropped table's series go with it, also when
// another node dropped it (this node's catalog no longer has it when
// /metrics is scraped). (Upsert and Delete: node's TestPKTrafficMetrics;
// this backend has no PK state.)
func TestTableTrafficMetrics(t *testing.T) {
	e := newEnv(t, rpc.Limits{})
	e.mustPost(t, "/fluss.v1.AdminService/CreateDatabase", `{"name":"s"}`)
	e.mustPost(t, "/fluss.v1.AdminService/CreateTable", `{"table":"s.t","bucketCount":2,"schema":{"columns":[{"name":"id","type":"BIGINT NOT NULL"}]}}`)
	series := func(name, table string) float64 {
		t.Helper()
		return metricValue(t, e.url, name+`{table="`+table+`"}`, true)
	}
	const rows = `[{"id":1},{"id":2},{"id":3}]`
	e.mustPost(t, "/fluss.v1.WriteService/Append", `{"table":"s.t","rows":`+rows+`}`)
	if st, _ := e.post(t, "/fluss.v1.WriteService/Append", `{"table":"s.t","rows":[{"id":null}]}`); st == 200 {
		t.Fatal("a NULL id was appended")
	}
	if got := series("fluss_table_written_rows_total", "s.t"); got != 3 {
		t.Fatalf("rows written to s.t: %v, want 3 (the refused append not counted)", got)
	}
	if got := series("fluss_table_written_bytes_total", "s.t"); got != float64(len(rows)) {
		t.Fatalf("bytes written to s.t: %v, want %d", got, len(rows))
	}
	_, res := e.post(t, "/fluss.v1.ReadService/Fetch", `{"table":"s.t","bucket":0,"offset":0}`)
	fetched, _ := json.Marshal(res["rows"])
	e.post(t, "/fluss.v1.ReadService/Scan", `{"table":"s.t","from":"EARLIEST"}`)
	n := len(res["rows"].([]any))
	if got := series("fluss_table_read_rows_total", "s.t"); got != float64(n+3) {
		t.Fatalf("rows read from s.t: %v, want %d by Fetch and 3 by Scan", got, n)
	}
	if got := series("fluss_table_read_bytes_total", "s.t"); got <= float64(len(fetched)) {
		t.Fatalf("bytes read from s.t: %v, want more than the Fetch's %d", got, len(fetched))
	}
	e.mustPost(t, "/fluss.v1.AdminService/CreateTable", `{"table":"s.u","bucketCount":1,"schema":{"columns":[{"name":"id","type":"BIGINT NOT NULL"}]}}`)
	e.mustPost(t, "/fluss.v1.WriteService/Append", `{"table":"s.u","rows":[{"id":1}]}`)
	e.mustPost(t, "/fluss.v1.AdminService/DropTable", `{"table":"s.t"}`)
	if got := metricValue(t, e.url, `fluss_table_written_rows_total{table="s.t"}`, true); got != 0 {
		t.Fatalf("s.t's series outlived the table: %v", got)
	}
	// Dropped elsewhere: gone from the catalog, not through this handler.
	if got := series("fluss_table_written_rows_total", "s.u"); got != 1 {
		t.Fatalf("rows written to s.u: %v, want 1", got)
	}
	if err := e.b.DropTable(context.Background(), "s.u", false); err != nil {
		t.Fatal(err)
	}
	if got := metricValue(t, e.url, `fluss_table_written_rows_total{table="s.u"}`, true); got != 0 {
		t.Fatalf("s.u's series outlived the table dropped through another node: %v", got)
	}
}

func TestGoClient(t *testing.T) {
	for _, proto := range []string{"proto", "json", "grpc"} {
		t.Run(proto, func(t *testing.T) {
			e := newEnv(t, rpc.Limits{})
			var opts []client.Option
			switch proto {
			case "json":
				opts = append(opts, client.WithJSON())
			case "grpc":
				opts = append(opts, client.WithGRPC())
			}
			c := client.New(e.url, opts...)
			ctx := context.Background()
			if err := c.CreateDatabase(ctx, "shop", false); err != nil {
				t.Fatal(err)
			}
			nullable := false
			id, err := c.CreateTable(ctx, &flussv1.CreateTableRequest{Table: "shop.t", BucketCount: 3, BucketKeys: []string{"id"},
				Schema: &flussv1.Schema{Columns: []*flussv1.Column{{Name: "id", Type: "BIGINT", Nullable: &nullable}, {Name: "s", Type: "STRING"}}}})
			if err != nil || id == 0 {
				t.Fatalf("CreateTable: %d %v", id, err)
			}
			tables, err := c.ListTables(ctx, "shop")
			if err != nil || fmt.Sprint(tables) != "[t]" {
				t.Fatalf("ListTables = %v %v", tables, err)
			}
			var rows bytes.Buffer
			rows.WriteString("[")
			for i := range 100 {
				if i > 0 {
					rows.WriteString(",")
				}
				fmt.Fprintf(&rows, `{"id":%d,"s":"v%d"}`, i, i)
			}
			rows.WriteString("]")
			res, err := c.Append(ctx, "shop.t", rows.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			var total int32
			for _, r := range res {
				total += r.GetCount()
			}
			if total != 100 || len(res) != 3 {
				t.Fatalf("Append results %v", res)
			}
			offs, err := c.ListOffsets(ctx, "shop.t", flussv1.ListOffsetsRequest_LATEST, 0)
			if err != nil || len(offs) != 3 {
				t.Fatalf("ListOffsets %v %v", offs, err)
			}
			var sum int64
			for _, o := range offs {
				sum += o.GetOffset()
			}
			if sum != 100 {
				t.Fatalf("offsets sum %d", sum)
			}
			// Scan everything back (not following).
			seen := map[float64]bool{}
			err = c.Scan(ctx, &flussv1.ScanRequest{Table: "shop.t"}, func(m *flussv1.ScanResponse) error {
				var rs []map[string]any
				if err := json.Unmarshal(m.GetRows(), &rs); err != nil {
					return err
				}
				for _, r := range rs {
					seen[r["id"].(float64)] = true
				}
				return nil
			})
			if err != nil || len(seen) != 100 {
				t.Fatalf("Scan saw %d rows, err %v", len(seen), err)
			}
			lay, err := c.GetTableLayout(ctx, "shop.t")
			if err != nil || len(lay) != 3 {
				t.Fatalf("layout %v %v", lay, err)
			}
			ci, err := c.DescribeCluster(ctx)
			if err != nil || ci.GetClusterId() != "mem" {
				t.Fatalf("cluster %v %v", ci, err)
			}
			_, err = c.Fetch(ctx, &flussv1.FetchRequest{Table: "shop.t", Offset: 1000})
			if connect.CodeOf(err) != connect.CodeOutOfRange {
				t.Fatalf("fetch past end: %v", err)
			}
		})
	}
}

func TestScanFollow(t *testing.T) {
	e := newEnv(t, rpc.Limits{})
	e.setupOrders(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := make(chan int64, 10)
	errc := make(chan error, 1)
	go func() {
		errc <- e.c.Scan(ctx, &flussv1.ScanRequest{Table: "shop.orders", From: flussv1.ScanRequest_LATEST, Follow: true}, func(m *flussv1.ScanResponse) error {
			got <- m.GetNextOffset()
			if m.GetNextOffset() >= 2 {
				return client.ErrStop
			}
			return nil
		})
	}()
	// Keep appending until the follower has seen offset 2: the scan may
	// start after the first append (LATEST), so append until it reports.
	for i := 0; ; i++ {
		if _, err := e.c.Append(ctx, "shop.orders", []byte(`[{"id":1}]`)); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-errc:
			if err != nil {
				t.Fatal(err)
			}
			return
		case <-got:
		case <-time.After(50 * time.Millisecond):
		}
		if ctx.Err() != nil {
			t.Fatal("scan never saw the appends")
		}
	}
}
