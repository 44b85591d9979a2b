package integration

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// ndjsonRows parses NDJSON output into one value per line (nil for null).
func ndjsonRows(t *testing.T, out string) []map[string]any {
	t.Helper()
	var rows []map[string]any
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("output line %q is not a JSON object or null: %v", line, err)
		}
		rows = append(rows, m)
	}
	return rows
}

// TestPKCLI drives a primary-key table end to end through the binary:
// create, upsert (stdin and --row, partial update), lookup, prefix lookup,
// limit scan, delete, and the error of upsert on a log table.
func TestPKCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	addr := startNode(t, t.TempDir()).addr
	mustCall(t, addr, "AdminService/ListDatabases", map[string]any{}, nil)
	cli := func(stdin string, args ...string) cliResult { t.Helper(); return mustCLI(t, addr, stdin, args...) }

	cli("", "db", "create", "app")
	cli("", "table", "create", "app.users", "--schema", "id BIGINT NOT NULL, name STRING, score INT",
		"--primary-key", "id", "--buckets", "3")

	// Upsert from stdin; id 2 twice: the later row wins.
	var nd strings.Builder
	for i := 1; i <= 5; i++ {
		fmt.Fprintf(&nd, `{"id": %d, "name": "u%d", "score": %d}`+"\n", i, i, i*10)
	}
	nd.WriteString(`{"id": 2, "name": "u2-new", "score": 21}` + "\n")
	if got := cli(nd.String(), "upsert", "app.users").stderr; !strings.Contains(got, "upserted 6 rows") {
		t.Errorf("upsert from stdin: stderr %q, want \"upserted 6 rows\"", got)
	}
	// --row, and a partial update that leaves name alone.
	cli("", "upsert", "app.users", "--row", `{"id": 6, "name": "u6", "score": 60}`)
	cli("", "upsert", "app.users", "--columns", "id,score", "--row", `{"id": 3, "score": 99}`)

	lookup := func(keys ...string) []map[string]any {
		t.Helper()
		args := []string{"lookup", "app.users"}
		for _, k := range keys {
			args = append(args, "--key", k)
		}
		rows := ndjsonRows(t, cli("", args...).stdout)
		if len(rows) != len(keys) {
			t.Fatalf("lookup of %d keys printed %d lines", len(keys), len(rows))
		}
		return rows
	}
	rows := lookup(`{"id": 2}`, `{"id": 42}`, `{"id": 3}`, `{"id": 6}`)
	if rows[0]["name"] != "u2-new" || rows[0]["score"] != float64(21) {
		t.Errorf("lookup id 2 = %v, want the later upsert (u2-new, 21)", rows[0])
	}
	if rows[1] != nil {
		t.Errorf("lookup of a missing key = %v, want null", rows[1])
	}
	if rows[2]["name"] != "u3" || rows[2]["score"] != float64(99) {
		t.Errorf("lookup id 3 after a partial update = %v, want name u3 kept and score 99", rows[2])
	}
	if rows[3]["name"] != "u6" {
		t.Errorf("lookup id 6 = %v, want u6", rows[3])
	}
	// Keys from stdin, in order.
	if got := ndjsonRows(t, cli("{\"id\": 5}\n{\"id\": 1}\n", "lookup", "app.users").stdout); len(got) != 2 || got[0]["name"] != "u5" || got[1]["name"] != "u1" {
		t.Errorf("lookup from stdin = %v, want u5 then u1", got)
	}

	// Limit scan sees the current values: 6 distinct keys.
	if got := ndjsonRows(t, cli("", "limit-scan", "app.users", "--limit", "100").stdout); len(got) != 6 {
		t.Errorf("limit-scan printed %d rows, want 6: %v", len(got), got)
	}
	if got := ndjsonRows(t, cli("", "limit-scan", "app.users", "--limit", "2").stdout); len(got) != 2 {
		t.Errorf("limit-scan --limit 2 printed %d rows", len(got))
	}

	// Delete from stdin and --key; the keys then look up as null.
	if got := cli("{\"id\": 2}\n", "delete", "app.users").stderr; !strings.Contains(got, "deleted 1 key\n") {
		t.Errorf("delete from stdin: stderr %q, want \"deleted 1 key\"", got)
	}
	if got := cli("", "delete", "app.users", "--key", `{"id": 6}`, "--key", `{"id": 2}`, "--key", `{"id": 99}`).stderr; !strings.Contains(got, "deleted 1 of 3 keys; 2 removed nothing (absent, or the table ignores deletes)\n") {
		t.Errorf("delete of a present and two absent keys: stderr %q", got)
	}
	rows = lookup(`{"id": 2}`, `{"id": 6}`, `{"id": 1}`)
	if rows[0] != nil || rows[1] != nil || rows[2]["name"] != "u1" {
		t.Errorf("lookup after delete = %v, want null, null, u1", rows)
	}

	// Prefix lookup: bucket key user_id is a prefix of the primary key
	// (given the SQL way, inside --schema).
	cli("", "table", "create", "app.orders", "--schema", "user_id BIGINT NOT NULL, order_id BIGINT NOT NULL, amount INT, PRIMARY KEY (user_id, order_id)",
		"--bucket-key", "user_id", "--buckets", "4")
	nd.Reset()
	for u := 1; u <= 3; u++ {
		for o := 1; o <= u+1; o++ {
			fmt.Fprintf(&nd, `{"user_id": %d, "order_id": %d, "amount": %d}`+"\n", u, o, u*100+o)
		}
	}
	cli(nd.String(), "upsert", "app.orders")
	got := ndjsonRows(t, cli("", "prefix-lookup", "app.orders", "--key", `{"user_id": 2}`).stdout)
	var orders []int
	for _, r := range got {
		if r["user_id"] != float64(2) {
			t.Errorf("prefix-lookup user 2 returned %v", r)
		}
		orders = append(orders, int(jsonInt(r["order_id"])))
	}
	slices.Sort(orders)
	if !slices.Equal(orders, []int{1, 2, 3}) {
		t.Errorf("prefix-lookup user 2: orders %v, want [1 2 3]", orders)
	}
	if got := ndjsonRows(t, cli("", "prefix-lookup", "app.orders", "--key", `{"user_id": 9}`).stdout); len(got) != 0 {
		t.Errorf("prefix-lookup of an absent user printed %v", got)
	}

	// Upsert on a log table fails with a non-zero exit and a reason.
	cli("", "table", "create", "app.events", "--schema", "id BIGINT NOT NULL, kind STRING")
	r := runCLI(t, addr, "", "upsert", "app.events", "--row", `{"id": 1, "kind": "a"}`)
	if r.code == 0 {
		t.Fatalf("upsert on a log table succeeded: %+v", r)
	}
	if !strings.Contains(r.stderr, "failed_precondition") || !strings.Contains(r.stderr, "app.events") {
		t.Errorf("upsert on a log table: stderr %q, want failed_precondition naming the table", r.stderr)
	}
	// Bad input never reaches the server.
	if r := runCLI(t, addr, "", "lookup", "app.users", "--key", `{"id": `); r.code == 0 || !strings.Contains(r.stderr, "not valid JSON") {
		t.Errorf("lookup with a malformed key: exit %d stderr %q, want a JSON error", r.code, r.stderr)
	}
}

// TestCLIBenchLookupBatched runs `bench lookup --batched`: both rows (one
// connection per client, and the clients sharing one batching client)
// report lookups, no errors and no misses (every key looked up was loaded).
func TestCLIBenchLookupBatched(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	addr := startNode(t, t.TempDir()).addr
	out := mustCLI(t, addr, "", "bench", "lookup", "--keys", "500", "--buckets", "2",
		"--clients", "4", "--duration", "1s", "--batched").stdout
	// | system | op | clients | rows/request | keys | requests/s | rows/s | p50 | p99 | p999 | errors | misses |
	seen := map[string]bool{}
	for line := range strings.Lines(out) {
		row := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(row) != 12 || !strings.HasPrefix(strings.TrimSpace(row[0]), "fluss-node") {
			continue
		}
		system := strings.TrimSpace(row[0])
		seen[system] = true
		if rate, err := strconv.ParseFloat(strings.TrimSpace(row[6]), 64); err != nil || rate <= 0 {
			t.Errorf("%s: rows/s %q in:\n%s", system, row[6], out)
		}
		if errs, misses := strings.TrimSpace(row[10]), strings.TrimSpace(row[11]); errs != "0" || misses != "0" {
			t.Errorf("%s: %s errors, %s misses in:\n%s", system, errs, misses, out)
		}
	}
	if !seen["fluss-node"] || !seen["fluss-node, batched"] {
		t.Fatalf("want a fluss-node and a batched row in:\n%s", out)
	}
}
