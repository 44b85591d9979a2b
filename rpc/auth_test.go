package rpc_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/rpc"
	"github.com/fluss-node/fluss-node/rpc/client"
	"github.com/fluss-node/fluss-node/rpc/internal/membackend"
)

func TestParseGrant(t *testing.T) {
	for _, tc := range []struct {
		in, want string // want: the grant's String, or the error's text
		ok       bool
	}{
		{"all:*", "all:*", true},
		{"read:shop", "read:shop", true},
		{"write:shop.orders", "write:shop.orders", true},
		{"describe:shop.orders", "describe:shop.orders", true},
		{"alter:*", "alter:*", true},
		{"read", "want OPERATION:RESOURCE", false},
		{"steal:shop", `unknown operation "steal"`, false},
		{"read:", "must be", false},
		{"read:shop.", "must be", false},
		{"read:.orders", "must be", false},
		{"read:a.b.c", "must be", false},
		{"read:shop.*", "must be", false},
		{"read:shop.orders$changelog", "must be", false},
	} {
		g, err := rpc.ParseGrant(tc.in)
		switch {
		case tc.ok && err != nil:
			t.Errorf("ParseGrant(%q): %v", tc.in, err)
		case tc.ok && g.String() != tc.want:
			t.Errorf("ParseGrant(%q).String() = %q, want %q", tc.in, g, tc.want)
		case !tc.ok && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("ParseGrant(%q) = %v, %v; want an error with %q", tc.in, g, err, tc.want)
		}
	}
}

func TestNewAuthRejectsAmbiguousUsers(t *testing.T) {
	a := rpc.User{Name: "a", TokenSHA256: rpc.HashToken("t1")}
	for _, tc := range []struct {
		users []rpc.User
		want  string
	}{
		{[]rpc.User{{TokenSHA256: rpc.HashToken("t")}}, "has no name"},
		{[]rpc.User{a, {Name: "a", TokenSHA256: rpc.HashToken("t2")}}, "listed twice"},
		{[]rpc.User{a, {Name: "b", TokenSHA256: rpc.HashToken("t1")}}, "same token"},
	} {
		if _, err := rpc.NewAuth(tc.users); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewAuth(%v) = %v, want an error with %q", tc.users, err, tc.want)
		}
	}
	if _, err := rpc.ParseTokenHash("abc"); err == nil {
		t.Error("ParseTokenHash accepted 3 hex digits")
	}
}

// authEnv is a server with three users: admin (all:*), ingest
// (write:shop) and analyst (read:shop.orders).
type authEnv struct {
	url  string
	auth *rpc.Auth
}

func newAuthEnv(t *testing.T) *authEnv {
	t.Helper()
	grant := func(s string) rpc.Grant {
		g, err := rpc.ParseGrant(s)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	a, err := rpc.NewAuth([]rpc.User{
		{Name: "admin", TokenSHA256: rpc.HashToken("admin-token"), Grants: []rpc.Grant{grant("all:*")}},
		{Name: "ingest", TokenSHA256: rpc.HashToken("ingest-token"), Grants: []rpc.Grant{grant("write:shop")}},
		{Name: "analyst", TokenSHA256: rpc.HashToken("analyst-token"), Grants: []rpc.Grant{grant("read:shop.orders")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &authEnv{url: serveHTTP(t, rpc.NewHandler(membackend.New(), rpc.Limits{}, prometheus.NewRegistry(), nil, rpc.WithAuth(a))), auth: a}
}

// post sends Connect JSON as curl would, with "Authorization: auth" unless
// auth is empty, and returns the status and the error code ("" on success).
func (e *authEnv) post(t *testing.T, auth, proc, body string) (int, string, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.url+proc, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("POST %s: not JSON: %q", proc, raw)
	}
	code, _ := out["code"].(string)
	return res.StatusCode, code, out
}

func (e *authEnv) as(t *testing.T, user, proc, body string) (string, map[string]any) {
	t.Helper()
	_, code, out := e.post(t, "Bearer "+user+"-token", proc, body)
	return code, out
}

func TestAuthTokens(t *testing.T) {
	e := newAuthEnv(t)
	const proc = "/fluss.v1.AdminService/ListDatabases"
	for _, tc := range []struct{ auth, want string }{
		{"", "requires a token"},
		{"Bearer wrong", "unknown token"},
		{"Basic YWRtaW46eA==", `must be "Bearer TOKEN"`},
		{"Bearer", `must be "Bearer TOKEN"`},
	} {
		st, code, out := e.post(t, tc.auth, proc, `{}`)
		if st != http.StatusUnauthorized || code != "unauthenticated" || !strings.Contains(out["message"].(string), tc.want) {
			t.Errorf("Authorization %q: status %d, %v; want 401 unauthenticated with %q", tc.auth, st, out, tc.want)
		}
	}
	if st, code, _ := e.post(t, "bearer admin-token", proc, `{}`); st != 200 {
		t.Errorf("lower-case scheme: %d %s", st, code)
	}
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		res, err := http.Get(e.url + p)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Errorf("%s without a token: %d", p, res.StatusCode)
		}
		if p == "/metrics" && !strings.Contains(string(body), `fluss_rpc_requests_total{code="unauthenticated",procedure="`+proc+`"} 4`) {
			t.Errorf("metrics do not count the 4 refusals:\n%s", body)
		}
	}
}

// Scan over plain JSON (how curl calls a server stream) is refused as a
// unary call is.
func TestAuthPlainJSONScan(t *testing.T) {
	e := newAuthEnv(t)
	const proc = "/fluss.v1.ReadService/Scan"
	if st, code, out := e.post(t, "", proc, `{"table":"shop.orders"}`); st != http.StatusUnauthorized || code != "unauthenticated" {
		t.Errorf("no token: status %d, %v; want 401 unauthenticated", st, out)
	}
	if st, code, out := e.post(t, "Bearer analyst-token", proc, `{"table":"shop.other"}`); st != http.StatusForbidden || code != "permission_denied" {
		t.Errorf("no grant: status %d, %v; want 403 permission_denied", st, out)
	}
}

func TestAuthGrants(t *testing.T) {
	e := newAuthEnv(t)
	ok := func(user, proc, body string) map[string]any {
		t.Helper()
		code, out := e.as(t, user, proc, body)
		if code != "" {
			t.Fatalf("%s %s %s: %v", user, proc, body, out)
		}
		return out
	}
	denied := func(user, proc, body, wantGrant string) {
		t.Helper()
		code, out := e.as(t, user, proc, body)
		if code != "permission_denied" || !strings.Contains(out["message"].(string), wantGrant) {
			t.Errorf("%s %s %s: %v; want permission_denied naming %s", user, proc, body, out, wantGrant)
		}
	}
	const admin = "/fluss.v1.AdminService/"
	denied("ingest", admin+"CreateDatabase", `{"name":"shop"}`, `"create:shop"`)
	ok("admin", admin+"CreateDatabase", `{"name":"shop"}`)
	ok("admin", admin+"CreateDatabase", `{"name":"hr"}`)
	denied("analyst", admin+"CreateTable", ordersSchema, `"create:shop.orders"`)
	ok("admin", admin+"CreateTable", ordersSchema)
	returns := strings.Replace(ordersSchema, "shop.orders", "shop.returns", 1)
	denied("ingest", admin+"CreateTable", returns, `"create:shop.returns"`) // write:shop does not create
	ok("admin", admin+"CreateTable", returns)
	ok("admin", admin+"CreateTable", strings.Replace(ordersSchema, "shop.orders", "hr.salaries", 1))

	// Writes: ingest may write all of shop, analyst nothing.
	const appendProc = "/fluss.v1.WriteService/Append"
	ok("ingest", appendProc, `{"table":"shop.orders","rows":[{"id":1,"city":"Oslo"}]}`)
	denied("analyst", appendProc, `{"table":"shop.orders","rows":[{"id":2}]}`, `"write:shop.orders"`)
	denied("ingest", appendProc, `{"table":"hr.salaries","rows":[{"id":2}]}`, `"write:hr.salaries"`)

	// Reads: analyst reads shop.orders only; ingest may describe but not read.
	const fetch = "/fluss.v1.ReadService/Fetch"
	out := ok("analyst", fetch, `{"table":"shop.orders","bucket":0,"offset":0}`)
	if rows, _ := out["rows"].([]any); len(rows) != 1 {
		t.Fatalf("analyst's fetch: %v", out)
	}
	denied("analyst", fetch, `{"table":"shop.returns","bucket":0,"offset":0}`, `"read:shop.returns"`)
	denied("ingest", fetch, `{"table":"shop.orders","bucket":0,"offset":0}`, `"read:shop.orders"`)
	ok("ingest", admin+"GetTable", `{"table":"shop.orders"}`)
	ok("analyst", admin+"GetTableLayout", `{"table":"shop.orders"}`)
	ok("analyst", admin+"ListOffsets", `{"table":"shop.orders","spec":"LATEST"}`)
	denied("analyst", admin+"GetTable", `{"table":"hr.salaries"}`, `"describe:hr.salaries"`)

	// DDL beyond create, and cluster operations.
	denied("ingest", admin+"DropTable", `{"table":"shop.returns"}`, `"drop:shop.returns"`)
	denied("analyst", admin+"DropDatabase", `{"name":"shop"}`, `"drop:shop"`)
	denied("ingest", admin+"AlterTable", `{"table":"shop.orders"}`, `"alter:shop.orders"`)
	denied("ingest", admin+"Rebalance", `{}`, `"alter:*"`)
	denied("analyst", admin+"DrainNode", `{"nodeId":1}`, `"alter:*"`)
	denied("ingest", admin+"DecommissionNode", `{"nodeId":1}`, `"alter:*"`)
	denied("analyst", admin+"SetClusterConfig", `{"metaVoters":3}`, `"alter:*"`)
	denied("ingest", admin+"RestoreBucket", `{"table":"shop.orders","bucket":0}`, `"alter:*"`)
	ok("analyst", admin+"DescribeCluster", `{}`)

	// Lists show only what a user holds a grant in.
	for _, tc := range []struct {
		user, proc, body, key string
		want                  []string
	}{
		{"admin", "ListDatabases", `{}`, "databases", []string{"hr", "shop"}},
		{"ingest", "ListDatabases", `{}`, "databases", []string{"shop"}},
		{"analyst", "ListDatabases", `{}`, "databases", []string{"shop"}},
		{"ingest", "ListTables", `{"database":"shop"}`, "tables", []string{"orders", "returns"}},
		{"analyst", "ListTables", `{"database":"shop"}`, "tables", []string{"orders"}},
		{"analyst", "ListTables", `{"database":"hr"}`, "tables", nil},
	} {
		var got []string
		for _, v := range ok(tc.user, admin+tc.proc, tc.body)[tc.key].([]any) {
			got = append(got, v.(string))
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s %s %s: %v, want %v", tc.user, tc.proc, tc.body, got, tc.want)
		}
	}

	// A bad table name is the client's mistake, not a permission matter.
	if code, out := e.as(t, "analyst", fetch, `{"table":"orders","bucket":0}`); code != "invalid_argument" {
		t.Errorf("bad table name: %v", out)
	}
	// Nothing a refused user sent reached the table.
	out = ok("admin", fetch, `{"table":"shop.orders","bucket":0,"offset":0}`)
	if rows := out["rows"].([]any); len(rows) != 1 {
		t.Errorf("shop.orders holds %d rows after refused writes, want 1", len(rows))
	}
}

// The Go client's token reaches unary calls and streams (Scan).
func TestAuthGoClient(t *testing.T) {
	e := newAuthEnv(t)
	ctx := context.Background()
	admin := client.New(e.url, client.WithToken("admin-token"))
	if err := admin.CreateDatabase(ctx, "shop", false); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Admin().CreateTable(ctx, connect.NewRequest(tableSpec(t, ordersSchema))); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Append(ctx, "shop.orders", []byte(`[{"id":1},{"id":2}]`)); err != nil {
		t.Fatal(err)
	}
	scan := func(c *client.Client) (int, error) {
		n := 0
		err := c.Scan(ctx, &flussv1.ScanRequest{Table: "shop.orders", From: flussv1.ScanRequest_EARLIEST}, func(r *flussv1.ScanResponse) error {
			n += len(decodeJSON(t, r.GetRows()))
			return nil
		})
		return n, err
	}
	for _, proto := range []client.Option{client.WithJSON(), client.WithGRPC()} {
		if n, err := scan(client.New(e.url, proto, client.WithToken("analyst-token"))); err != nil || n != 2 {
			t.Errorf("analyst's scan: %d rows, %v", n, err)
		}
		_, err := scan(client.New(e.url, proto, client.WithToken("ingest-token"), client.WithRetry(client.Retry{Attempts: 1})))
		if connect.CodeOf(err) != connect.CodePermissionDenied {
			t.Errorf("ingest's scan: %v, want permission_denied", err)
		}
	}
	_, err := client.New(e.url, client.WithRetry(client.Retry{Attempts: 1})).ListDatabases(ctx)
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeUnauthenticated {
		t.Errorf("no token: %v, want unauthenticated", err)
	}
}

func tableSpec(t *testing.T, js string) *flussv1.CreateTableRequest {
	t.Helper()
	var req flussv1.CreateTableRequest
	if err := rpc.Codecs()[0].Unmarshal([]byte(js), &req); err != nil {
		t.Fatal(err)
	}
	return &req
}

// Replace changes the users of a serving Auth: no users lets everyone in,
// and users that do not check out leave the old ones in place.
func TestAuthReplace(t *testing.T) {
	e := newAuthEnv(t)
	const proc = "/fluss.v1.AdminService/ListDatabases"
	code := func(auth string) string {
		t.Helper()
		_, code, _ := e.post(t, auth, proc, `{}`)
		return code
	}
	if c := code(""); c != "unauthenticated" {
		t.Fatalf("with users, no token: %q", c)
	}
	if err := e.auth.Replace(nil); err != nil {
		t.Fatal(err)
	}
	if c := code(""); c != "" {
		t.Fatalf("without users, no token: %q, want success", c)
	}
	all, _ := rpc.ParseGrant("all:*")
	if err := e.auth.Replace([]rpc.User{{Name: "new", TokenSHA256: rpc.HashToken("new-token"), Grants: []rpc.Grant{all}}}); err != nil {
		t.Fatal(err)
	}
	if c := code("Bearer admin-token"); c != "unauthenticated" {
		t.Fatalf("a replaced user's token: %q", c)
	}
	if c := code("Bearer new-token"); c != "" {
		t.Fatalf("the new user's token: %q", c)
	}
	twice := []rpc.User{{Name: "a", TokenSHA256: rpc.HashToken("x")}, {Name: "a", TokenSHA256: rpc.HashToken("y")}}
	if err := e.auth.Replace(twice); err == nil {
		t.Fatal("Replace took a user listed twice")
	}
	if c := code("Bearer new-token"); c != "" {
		t.Fatalf("after a refused Replace: %q, want the users before it", c)
	}
}
