package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluss-node/fluss-node/node/nodetest"
)

// scanIDs parses NDJSON scan output and returns the "id" of every row,
// sorted, checking each row has exactly the keys wantKeys (if given).
func scanIDs(t *testing.T, out string, wantKeys ...string) []int {
	t.Helper()
	var ids []int
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		var row map[string]any
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("scan line %q is not a JSON object: %v", line, err)
		}
		if wantKeys != nil {
			keys := make([]string, 0, len(row))
			for k := range row {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			if !slices.Equal(keys, wantKeys) {
				t.Errorf("scan row %s has columns %v, want %v", line, keys, wantKeys)
			}
		}
		id, _ := row["id"].(float64)
		ids = append(ids, int(id))
	}
	slices.Sort(ids)
	return ids
}

func seq(from, to int) []int {
	var s []int
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

// TestCLIEndToEnd drives every client command of the binary against a real
// server: databases, tables with --set/--buckets/--bucket-key, append from
// stdin and --row, scan with --columns/--where/--limit/--from, scan
// --follow, and failing commands (non-zero exit, reason on stderr).
func TestCLIEndToEnd(t *testing.T) {
	longMultiProcess(t)
	addr := startNode(t, t.TempDir()).addr
	mustCall(t, addr, "AdminService/ListDatabases", map[string]any{}, nil)
	cli := func(stdin string, args ...string) cliResult { t.Helper(); return mustCLI(t, addr, stdin, args...) }

	// Databases.
	if got := cli("", "db", "create", "app").stdout; got != "created database app\n" {
		t.Errorf("db create = %q", got)
	}
	if got := cli("", "db", "create", "app", "--if-not-exists").stdout; got != "database app exists\n" {
		t.Errorf("db create --if-not-exists of an existing database = %q", got)
	}
	cli("", "db", "create", "scratch")
	if got := cli("", "db", "list").stdout; !strings.Contains(got, "app\n") || !strings.Contains(got, "scratch\n") {
		t.Errorf("db list = %q, want app and scratch", got)
	}
	if got := cli("", "db", "drop", "scratch").stdout; got != "dropped database scratch\n" {
		t.Errorf("db drop = %q", got)
	}
	if got := cli("", "db", "drop", "scratch", "--if-exists").stdout; got != "database scratch does not exist\n" {
		t.Errorf("db drop --if-exists of a dropped database = %q", got)
	}
	if got := cli("", "db", "list").stdout; strings.Contains(got, "scratch") || !strings.Contains(got, "app\n") {
		t.Errorf("db list after drop = %q, want app without scratch", got)
	}

	// Tables.
	out := cli("", "table", "create", "app.ev", "--schema", "id BIGINT NOT NULL, kind STRING, n INT",
		"--buckets", "3", "--bucket-key", "id", "--set", "table.log.ttl=24h", "--set", "table.log.arrow.compression.type=ZSTD").stdout
	if !strings.HasPrefix(out, "created app.ev (table id ") {
		t.Errorf("table create printed %q", out)
	}
	desc := cli("", "table", "describe", "app.ev").stdout
	for _, s := range []string{"table app.ev", "id ", "BIGINT", "NOT NULL", "kind", "STRING", "n ", "INT",
		"buckets: 3 by id", "properties:\n", "table.log.ttl = 24h", "table.log.arrow.compression.type = ZSTD"} {
		if !strings.Contains(desc, s) {
			t.Errorf("table describe does not show %q:\n%s", s, desc)
		}
	}
	if got := cli("", "table", "list", "app").stdout; got != "ev\n" {
		t.Errorf("table list app = %q, want \"ev\\n\"", got)
	}

	// Append: NDJSON on stdin (blank lines ignored), then --row.
	var nd strings.Builder
	for i := 1; i <= 6; i++ {
		fmt.Fprintf(&nd, `{"id": %d, "kind": "k%d", "n": %d}`+"\n", i, i%2, i)
		if i == 3 {
			nd.WriteString("\n")
		}
	}
	if got := cli(nd.String(), "append", "app.ev").stderr; !strings.Contains(got, "appended 6 rows") {
		t.Errorf("append from stdin: stderr %q, want \"appended 6 rows\"", got)
	}
	if got := cli("", "append", "app.ev", "--row", `{"id": 7, "kind": "k1", "n": 7}`, "--row", `{"id": 8, "kind": null, "n": 8}`).stderr; !strings.Contains(got, "appended 2 rows") {
		t.Errorf("append --row: stderr %q, want \"appended 2 rows\"", got)
	}

	// Scan.
	if ids := scanIDs(t, cli("", "scan", "app.ev").stdout, "id", "kind", "n"); !slices.Equal(ids, seq(1, 8)) {
		t.Errorf("scan: ids %v, want 1..8", ids)
	}
	if ids := scanIDs(t, cli("", "scan", "app.ev", "--columns", "id,kind", "--where", "n > 4 AND kind IS NOT NULL").stdout, "id", "kind"); !slices.Equal(ids, []int{5, 6, 7}) {
		t.Errorf("scan --columns id,kind --where: ids %v, want [5 6 7]", ids)
	}
	if ids := scanIDs(t, cli("", "scan", "app.ev", "--limit", "3").stdout); len(ids) != 3 {
		t.Errorf("scan --limit 3 printed %d rows", len(ids))
	}
	if got := cli("", "scan", "app.ev", "--from", "latest").stdout; got != "" {
		t.Errorf("scan --from latest (no follow) printed %q, want nothing", got)
	}
	if ids := scanIDs(t, cli("", "scan", "app.ev", "--from", "ts:0").stdout); !slices.Equal(ids, seq(1, 8)) {
		t.Errorf("scan --from ts:0: ids %v, want 1..8", ids)
	}
	// A row appended after a point in time is the only one from ts:then.
	then := time.Now().UnixMilli()
	waitFor(t, 5*time.Second, func() error {
		if time.Now().UnixMilli() <= then {
			return fmt.Errorf("clock has not moved past %d", then)
		}
		return nil
	})
	cli("", "append", "app.ev", "--row", `{"id": 9, "kind": "k1", "n": 9}`)
	if ids := scanIDs(t, cli("", "scan", "app.ev", "--from", "ts:"+strconv.FormatInt(then+1, 10)).stdout); !slices.Equal(ids, []int{9}) {
		t.Errorf("scan --from ts:%d: ids %v, want [9]", then+1, ids)
	}
	at := time.UnixMilli(then + 1).In(time.FixedZone("", 3600)).Format(time.RFC3339Nano)
	if ids := scanIDs(t, cli("", "scan", "app.ev", "--from", "ts:"+at).stdout); !slices.Equal(ids, []int{9}) {
		t.Errorf("scan --from ts:%s: ids %v, want [9]", at, ids)
	}
	if ids := scanIDs(t, cli("", "scan", "app.ev", "--from", "ago:1h").stdout); !slices.Equal(ids, seq(1, 9)) {
		t.Errorf("scan --from ago:1h: ids %v, want 1..9", ids)
	}
	if ids := scanIDs(t, cli("", "scan", "app.ev", "--from", "ago:0s").stdout); len(ids) != 0 {
		t.Errorf("scan --from ago:0s: ids %v, want none", ids)
	}

	// Follow: the existing rows, then rows appended while it runs.
	t.Run("follow", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, binary, "scan", "app.ev", "--follow", "--columns", "id", "--server", addr)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 100)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		read := func(n int) []int {
			var ids []int
			timeout := time.After(20 * time.Second)
			for len(ids) < n {
				select {
				case l, ok := <-lines:
					if !ok {
						t.Fatalf("scan --follow ended after %d of %d rows; stderr: %s", len(ids), n, stderr.String())
					}
					ids = append(ids, scanIDs(t, l+"\n", "id")...)
				case <-timeout:
					t.Fatalf("scan --follow: %d of %d rows after 20s", len(ids), n)
				}
			}
			slices.Sort(ids)
			return ids
		}
		if ids := read(9); !slices.Equal(ids, seq(1, 9)) {
			t.Errorf("scan --follow: first rows %v, want 1..9", ids)
		}
		cli("", "append", "app.ev", "--row", `{"id": 10, "n": 10}`, "--row", `{"id": 11, "n": 11}`)
		cli(`{"id": 12, "n": 12}`+"\n", "append", "app.ev")
		if ids := read(3); !slices.Equal(ids, []int{10, 11, 12}) {
			t.Errorf("scan --follow: rows appended while following %v, want [10 11 12]", ids)
		}
		cmd.Process.Signal(os.Interrupt)
		for range lines {
		}
		err = cmd.Wait()
		if ctx.Err() != nil {
			t.Fatal("scan --follow did not stop within 60s of SIGINT")
		}
		if err != nil {
			t.Errorf("scan --follow stopped by SIGINT: %v; stderr: %s", err, stderr.String())
		}
	})

	// Failing commands: non-zero exit, the reason on stderr.
	fails := []struct {
		name, stdin string
		args        []string
		words       []string
	}{
		{"scan unknown table", "", []string{"scan", "app.nope"}, []string{"app.nope", "not found"}},
		{"append to unknown table", "", []string{"append", "app.nope", "--row", `{"id": 1}`}, []string{"app.nope", "not found"}},
		{"describe unknown table", "", []string{"table", "describe", "app.nope"}, []string{"app.nope", "not found"}},
		{"drop unknown database", "", []string{"db", "drop", "nodb"}, []string{`not_found: database "nodb" not found`}},
		{"create existing database", "", []string{"db", "create", "app"}, []string{`already_exists: database "app" already exists`}},
		{"create existing table", "", []string{"table", "create", "app.ev", "--schema", "id INT"}, []string{"already_exists: table app.ev already exists\n"}},
		{"drop unknown table", "", []string{"table", "drop", "app.nope"}, []string{"not_found: table app.nope not found\n"}},
		{"table in unknown database", "", []string{"table", "create", "nodb.x", "--schema", "id INT"}, []string{`not_found: database "nodb" not found`}},
		{"drop non-empty database", "", []string{"db", "drop", "app"}, []string{`failed_precondition: database "app" is not empty: it holds 1 table (`, "cascade"}},
		{"bad --schema type", "", []string{"table", "create", "app.x", "--schema", "id BIGGINT"}, []string{"--schema", "BIGGINT"}},
		{"--schema column without type", "", []string{"table", "create", "app.x", "--schema", "id"}, []string{"--schema", `"id"`}},
		{"--buckets 0", "", []string{"table", "create", "app.x", "--schema", "id INT", "--buckets", "0"}, []string{"--buckets 0", "at least 1"}},
		{"primary key twice", "", []string{"table", "create", "app.x", "--schema", "id INT NOT NULL, PRIMARY KEY (id)", "--primary-key", "id"}, []string{"--primary-key", "twice"}},
		{"--set without =", "", []string{"table", "create", "app.x", "--schema", "id INT", "--set", "table.log.ttl"}, []string{"--set", "key=value"}},
		{"bad --from", "", []string{"scan", "app.ev", "--from", "yesterday"}, []string{"--from", "yesterday"}},
		{"bad --where", "", []string{"scan", "app.ev", "--where", "n >"}, []string{"filter"}},
		{"unknown --columns", "", []string{"scan", "app.ev", "--columns", "id,zz"}, []string{`"zz"`}},
		{"NDJSON line not JSON", `{"id": 1}` + "\nnot json\n", []string{"append", "app.ev"}, []string{"line 2"}},
		{"NULL in NOT NULL column", "", []string{"append", "app.ev", "--row", `{"id": null}`}, []string{`"id"`, "NOT NULL"}},
		{"--row not JSON", "", []string{"append", "app.ev", "--row", `{"id": 1}`, "--row", `{"id":`}, []string{"--row", "not valid JSON"}},
		{"--batch 0", `{"id": 1}` + "\n", []string{"append", "app.ev", "--batch", "0"}, []string{"--batch 0", "positive"}},
		{"negative --limit", "", []string{"scan", "app.ev", "--limit", "-1"}, []string{"--limit -1"}},
	}
	for _, f := range fails {
		r := runCLI(t, addr, f.stdin, f.args...)
		if r.code == 0 {
			t.Errorf("%s: exit 0, want non-zero (stdout %q)", f.name, r.stdout)
			continue
		}
		for _, w := range f.words {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%s: stderr %q does not mention %q", f.name, r.stderr, w)
			}
		}
	}
	// The table x was never created; no failed append stored a row.
	if got := cli("", "table", "list", "app").stdout; got != "ev\n" {
		t.Errorf("table list app after failed commands = %q, want \"ev\\n\"", got)
	}
	if ids := scanIDs(t, cli("", "scan", "app.ev").stdout); !slices.Equal(ids, seq(1, 12)) {
		t.Errorf("scan after failed commands: ids %v, want 1..12", ids)
	}

	// Drop.
	if got := cli("", "table", "drop", "app.ev").stdout; got != "dropped table app.ev\n" {
		t.Errorf("table drop = %q", got)
	}
	if got := cli("", "table", "drop", "app.ev", "--if-exists").stdout; got != "table app.ev does not exist\n" {
		t.Errorf("table drop --if-exists of a dropped table = %q", got)
	}
	if got := cli("", "table", "list", "app").stdout; got != "" {
		t.Errorf("table list after drop = %q, want nothing", got)
	}
	cli("", "db", "drop", "app")
	if got := cli("", "db", "list").stdout; strings.Contains(got, "app") {
		t.Errorf("db list after dropping app = %q", got)
	}
}

// TestCLIBenchProduce runs `bench produce` briefly against a real node:
// it prints its table with requests answered and no errors, and
// --cpuprofile writes a profile of the load generator.
func TestCLIBenchProduce(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	addr := startNode(t, t.TempDir()).addr
	prof := filepath.Join(t.TempDir(), "bench.pprof")
	out := mustCLI(t, addr, "", "bench", "--cpuprofile", prof, "produce",
		"--format", "json", "--batch", "1", "--clients", "2", "--buckets", "2", "--duration", "1s").stdout
	// | format | compression | clients | rows/request | buckets | rows/s | requests/s | MB/s | p50 | p99 | errors | disk bytes/row |
	var row []string
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, "| json ") {
			row = strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		}
	}
	if len(row) != 12 {
		t.Fatalf("no result row in:\n%s", out)
	}
	if reqs, err := strconv.ParseFloat(strings.TrimSpace(row[6]), 64); err != nil || reqs <= 0 {
		t.Fatalf("requests/s %q in:\n%s", row[6], out)
	}
	if errs := strings.TrimSpace(row[10]); errs != "0" {
		t.Fatalf("errors %q in:\n%s", errs, out)
	}
	b, err := os.ReadFile(prof)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b { // pprof writes gzipped protobuf
		t.Fatalf("cpu profile of %d bytes is not a pprof profile", len(b))
	}
}

// TestCLITableAlter adds columns to a log table with rows through the CLI;
// the rows written before read the new columns as null, also after a
// kill -9 and restart (the schema versions are in the metadata log). It
// also sets and resets properties, which survive the restart too.
func TestCLITableAlter(t *testing.T) {
	longMultiProcess(t)
	dir := t.TempDir()
	node := startNode(t, dir)
	addr := node.addr
	cli := func(stdin string, args ...string) cliResult { t.Helper(); return mustCLI(t, addr, stdin, args...) }
	cli("", "db", "create", "app")
	cli("", "table", "create", "app.ev", "--schema", "id BIGINT NOT NULL, kind STRING", "--buckets", "2")
	cli("", "append", "app.ev", "--row", `{"id": 1, "kind": "a"}`, "--row", `{"id": 2, "kind": "b"}`)
	if out := cli("", "table", "alter", "app.ev", "--add-columns", "note STRING, score DOUBLE").stdout; out != "altered app.ev (schema 2)\n" {
		t.Fatalf("table alter printed %q", out)
	}
	cli("", "append", "app.ev", "--row", `{"id": 3, "kind": "c", "note": "hi", "score": 1.5}`)
	if r := runCLI(t, addr, "", "table", "alter", "app.ev", "--add-columns", "x INT NOT NULL"); r.code == 0 || !strings.Contains(r.stderr, "must be nullable") {
		t.Fatalf("alter with a NOT NULL column: exit %d, %s", r.code, r.stderr)
	}
	// A primary-key table takes columns too: its rows read them as null
	// until a write (here a partial update of the new column) sets them.
	cli("", "table", "create", "app.acct", "--schema", "id BIGINT NOT NULL, name STRING", "--primary-key", "id", "--buckets", "2")
	cli("", "upsert", "app.acct", "--row", `{"id": 1, "name": "a"}`, "--row", `{"id": 2, "name": "b"}`)
	if out := cli("", "table", "alter", "app.acct", "--add-columns", "tier STRING").stdout; out != "altered app.acct (schema 2)\n" {
		t.Fatalf("table alter of a primary-key table printed %q", out)
	}
	cli("", "upsert", "app.acct", "--columns", "id,tier", "--row", `{"id": 2, "tier": "gold"}`)
	cli("", "table", "alter", "app.ev", "--set", "table.log.ttl=3d", "--set", "team=core", "--set", "owner=ann")
	if out := cli("", "table", "alter", "app.ev", "--reset", "owner").stdout; out != "altered app.ev (schema 2)\n" {
		t.Fatalf("table alter --reset printed %q", out)
	}
	for _, args := range [][]string{
		{"--set", "table.log.format=ARROW"}, // fixed at creation
		{"--set", "table.log.ttl=soon"},
		{"--set", "ttl"},
		{}, // nothing to alter
	} {
		r := runCLI(t, addr, "", append([]string{"table", "alter", "app.ev"}, args...)...)
		if r.code == 0 || r.stderr == "" {
			t.Fatalf("table alter %q: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}

	check := func() {
		t.Helper()
		rows := ndjsonRows(t, cli("", "scan", "app.ev", "--columns", "id,note,score").stdout)
		byID := map[string]map[string]any{}
		for _, r := range rows {
			byID[fmt.Sprint(r["id"])] = r
		}
		if len(rows) != 3 || byID["1"]["note"] != nil || byID["2"]["score"] != nil || byID["3"]["note"] != "hi" || fmt.Sprint(byID["3"]["score"]) != "1.5" {
			t.Fatalf("rows after alter: %v", rows)
		}
		if ids := scanIDs(t, cli("", "scan", "app.ev", "--where", "note IS NULL").stdout, "id", "kind", "note", "score"); !slices.Equal(ids, []int{1, 2}) {
			t.Fatalf("rows with note IS NULL: %v", ids)
		}
		desc := cli("", "table", "describe", "app.ev").stdout
		if !strings.Contains(desc, "schema 2") || !strings.Contains(desc, "score") ||
			!strings.Contains(desc, "properties:\n  table.log.ttl = 3d\n  team = core\n") || strings.Contains(desc, "owner") {
			t.Fatalf("describe after alter:\n%s", desc)
		}
		acct := ndjsonRows(t, cli("", "lookup", "app.acct", "--key", `{"id": 1}`, "--key", `{"id": 2}`).stdout)
		if len(acct) != 2 || acct[0]["name"] != "a" || acct[0]["tier"] != nil || acct[1]["name"] != "b" || acct[1]["tier"] != "gold" {
			t.Fatalf("primary-key rows after alter: %v", acct)
		}
	}
	check()
	node.kill()
	addr = startNode(t, dir).addr
	check()
}

// A client command aimed where no server listens fails (after its retries)
// with the refusal and a hint at --server.
func TestCLINoServer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	addr := nodetest.FreeAddr() // nothing listens there
	r := runCLI(t, addr, "", "db", "list")
	if r.code == 0 || !strings.Contains(r.stderr, "connection refused") || !strings.Contains(r.stderr, "no server listens at "+addr) || !strings.Contains(r.stderr, "--server") {
		t.Fatalf("exit %d, stderr %q: want a failure naming the address and --server", r.code, r.stderr)
	}
}

// --server takes a list: an address where nothing listens is passed over,
// by DDL, writes and the scan alike; a list that does not parse is refused
// with the bad entry named.
func TestCLIServerList(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	live := startNode(t, t.TempDir()).addr
	servers := nodetest.FreeAddr() + "," + live // the first: nothing listens
	mustCLI(t, servers, "", "db", "create", "app")
	mustCLI(t, servers, "", "table", "create", "app.ev", "--schema", "id BIGINT NOT NULL, kind STRING")
	mustCLI(t, servers, `{"id":1,"kind":"a"}`+"\n"+`{"id":2,"kind":"b"}`+"\n", "append", "app.ev")
	out := mustCLI(t, servers, "", "scan", "app.ev").stdout
	if got := scanIDs(t, out); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("scan through the list = ids %v, want [1 2]\n%s", got, out)
	}

	r := runCLI(t, live+",ftp://elsewhere", "", "db", "list")
	if r.code == 0 || !strings.Contains(r.stderr, "invalid_argument") || !strings.Contains(r.stderr, `"ftp://elsewhere"`) {
		t.Errorf("a bad list: exit %d, stderr %q; want invalid_argument naming the bad entry", r.code, r.stderr)
	}
}
