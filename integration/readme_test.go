package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// readmeBlock returns the first ```sh block after the heading of README.md
// that starts with heading.
func readmeBlock(t *testing.T, heading string) string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n"+heading)
	if i < 0 {
		t.Fatalf("README.md has no heading %q", heading)
	}
	s = s[i:]
	start := strings.Index(s, "```sh\n")
	if start < 0 {
		t.Fatalf("README.md: no ```sh block after %q", heading)
	}
	s = s[start+len("```sh\n"):]
	end := strings.Index(s, "```")
	if end < 0 {
		t.Fatalf("README.md: unterminated block after %q", heading)
	}
	return s[:end]
}

// shellCommands splits a small POSIX-shell script into commands of words:
// single and double quotes (which may span lines), $VAR expansion from
// vars and outside single quotes, `NAME=value` assignments (recorded in
// vars, not returned), and newlines ending commands outside quotes. A `|`
// word is kept as a word of its own. Enough for README examples.
func shellCommands(t *testing.T, script string, vars map[string]string) [][]string {
	t.Helper()
	var cmds [][]string
	var words []string
	var w strings.Builder
	inWord := false
	endWord := func() {
		if inWord {
			words = append(words, w.String())
			w.Reset()
			inWord = false
		}
	}
	endCmd := func() {
		endWord()
		if len(words) == 1 && strings.Contains(words[0], "=") && !strings.HasPrefix(words[0], "-") {
			k, v, _ := strings.Cut(words[0], "=")
			vars[k] = v
		} else if len(words) > 0 {
			cmds = append(cmds, words)
		}
		words = nil
	}
	expand := func(s string, i int) (string, int) { // s[i] == '$'
		j := i + 1
		for j < len(s) && (s[j] == '_' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= '0' && s[j] <= '9') {
			j++
		}
		v, ok := vars[s[i+1:j]]
		if !ok {
			t.Fatalf("README script uses undefined $%s", s[i+1:j])
		}
		return v, j
	}
	for i := 0; i < len(script); {
		c := script[i]
		switch {
		case c == '\n':
			endCmd()
			i++
		case c == ' ' || c == '\t':
			endWord()
			i++
		case c == '#' && !inWord:
			for i < len(script) && script[i] != '\n' {
				i++
			}
		case c == '\'':
			j := strings.IndexByte(script[i+1:], '\'')
			if j < 0 {
				t.Fatalf("unterminated ' in README script")
			}
			w.WriteString(script[i+1 : i+1+j])
			inWord = true
			i += j + 2
		case c == '"':
			i++
			for i < len(script) && script[i] != '"' {
				if script[i] == '$' {
					v, j := expand(script, i)
					w.WriteString(v)
					i = j
					continue
				}
				w.WriteByte(script[i])
				i++
			}
			inWord = true
			i++
		case c == '$':
			v, j := expand(script, i)
			w.WriteString(v)
			inWord = true
			i = j
		case c == '|':
			endWord()
			words = append(words, "|")
			i++
		default:
			w.WriteByte(c)
			inWord = true
			i++
		}
	}
	endCmd()
	return cmds
}

// TestReadmeCurlExamples runs the `curl` commands of README.md's "Try it
// with curl" block as HTTP requests (same method, headers and body) against
// a fresh server and checks each succeeds and the Fetch returns the rows
// the README implies: both appended orders have amount > 10, so both come
// back, with only the id and amount columns.
func TestReadmeCurlExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	addr := startNode(t, t.TempDir()).addr
	// Wait for the metadata leader before running the script verbatim.
	mustCall(t, addr, "AdminService/ListDatabases", map[string]any{}, nil)

	vars := map[string]string{}
	cmds := shellCommands(t, readmeBlock(t, "## Try it with curl"), vars)
	if vars["S"] != "http://127.0.0.1:9123" {
		t.Fatalf("README: S=%q, want the default address http://127.0.0.1:9123", vars["S"])
	}
	var replies [][]byte
	var fetchBody, scanBody []byte
	for _, words := range cmds {
		if words[0] != "curl" {
			t.Fatalf("unexpected command in the curl block: %q", words)
		}
		method, url, body := "GET", "", []byte(nil)
		hdr := http.Header{}
		for i := 1; i < len(words); i++ {
			switch words[i] {
			case "-s":
			case "-H":
				i++
				k, v, _ := strings.Cut(words[i], ":")
				hdr.Set(strings.TrimSpace(k), strings.TrimSpace(v))
			case "-d":
				i++
				body, method = []byte(words[i]), "POST"
			default:
				if strings.HasPrefix(words[i], "-") {
					t.Fatalf("curl option %q not understood by this test", words[i])
				}
				url = words[i]
			}
		}
		url = strings.Replace(url, "127.0.0.1:9123", addr, 1)
		req, err := http.NewRequest(method, url, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = hdr
		client := &http.Client{Timeout: 20 * time.Second}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		reply, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("README command %s %s: HTTP %d %s", method, url, resp.StatusCode, reply)
		}
		t.Logf("%s -> %s", url[strings.LastIndex(url, "/")+1:], reply)
		replies = append(replies, reply)
		switch {
		case strings.HasSuffix(url, "/Fetch"):
			fetchBody = reply
		case strings.HasSuffix(url, "/Scan"):
			scanBody = reply
		}
	}
	if len(replies) != 5 || fetchBody == nil || scanBody == nil {
		t.Fatalf("README curl block: ran %d commands, want 5 ending with a Fetch and a Scan", len(replies))
	}
	// The Scan's answer is a JSON message per line, holding both rows.
	var scanned []string
	for line := range strings.SplitSeq(strings.TrimSpace(string(scanBody)), "\n") {
		var msg struct {
			Rows []struct {
				ID   int
				City string
			}
		}
		if err := json.Unmarshal([]byte(line), &msg); err != nil {
			t.Fatalf("README Scan: line %q: %v", line, err)
		}
		for _, r := range msg.Rows {
			scanned = append(scanned, fmt.Sprint(r.ID, r.City))
		}
	}
	if slices.Sort(scanned); !slices.Equal(scanned, []string{"1berlin", "2paris"}) {
		t.Errorf("README Scan returned rows %q, want 1 berlin and 2 paris", scanned)
	}
	var fetched struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(fetchBody, &fetched); err != nil {
		t.Fatalf("Fetch reply %s: %v", fetchBody, err)
	}
	want := []map[string]any{{"id": float64(1), "amount": "12.50"}, {"id": float64(2), "amount": "99.99"}}
	if fmt.Sprint(fetched.Rows) != fmt.Sprint(want) {
		// Say where the rows went, to make the README fix obvious.
		where := ""
		for b := 0; b < 2; b++ {
			where += fmt.Sprintf(" bucket %d holds %d rows;", b, len(fetchAllRaw(t, addr, "shop.orders", 2)[b]))
		}
		t.Errorf("README Fetch (bucket 0, columns id,amount, filter amount > 10) returned %v, want %v;%s "+
			"the Append names no bucket, so the server puts the rows in a rotating bucket", fetched.Rows, want, where)
	}
}

// TestReadmeCLIExamples runs the commands of README.md's CLI block through
// the built binary against a fresh server (as $FLUSS_SERVER) and checks
// their outputs.
func TestReadmeCLIExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	addr := startNode(t, t.TempDir()).addr
	mustCall(t, addr, "AdminService/ListDatabases", map[string]any{}, nil)

	cmds := shellCommands(t, readmeBlock(t, "## The CLI"), map[string]string{})
	ran := map[string]cliResult{}
	for _, words := range cmds {
		stdin := ""
		if pipe := indexOf(words, "|"); pipe >= 0 {
			if words[0] != "echo" {
				t.Fatalf("README: pipe from %q not understood by this test", words[0])
			}
			stdin = strings.Join(words[1:pipe], " ") + "\n"
			words = words[pipe+1:]
		}
		if words[0] == "go" {
			continue // the binary is built by TestMain
		}
		if words[0] != "./fluss-node" {
			t.Fatalf("unexpected command in the CLI block: %q", words)
		}
		r := runCLI(t, addr, stdin, words[1:]...)
		t.Logf("%q: exit %d\nstdout: %s\nstderr: %s", words[1:], r.code, r.stdout, r.stderr)
		if r.code != 0 {
			t.Errorf("README command %q: exit %d: %s", strings.Join(words, " "), r.code, strings.TrimSpace(r.stderr))
		}
		ran[strings.Join(words[1:3], " ")] = r
	}
	checks := []struct {
		cmd      string
		out      func(cliResult) string
		contains []string
	}{
		{"table create", func(r cliResult) string { return r.stdout }, []string{"created shop.clicks"}},
		{"append shop.clicks", func(r cliResult) string { return r.stderr }, []string{"appended 1 row\n"}},
		{"scan shop.clicks", func(r cliResult) string { return r.stdout }, []string{`{"user_id":7,"page":"/home"}` + "\n"}},
		{"table alter", func(r cliResult) string { return r.stdout }, []string{"altered shop.clicks (schema 2)"}},
		{"table describe", func(r cliResult) string { return r.stdout },
			[]string{"shop.clicks", "schema 2", "user_id", "BIGINT", "NOT NULL", "page", "STRING", "TIMESTAMP(3)", "referrer", "buckets: 4"}},
		{"cluster status", func(r cliResult) string { return r.stdout }, []string{addr}},
	}
	for _, c := range checks {
		r, ok := ran[c.cmd]
		if !ok {
			t.Errorf("README CLI block has no %q command", c.cmd)
			continue
		}
		for _, s := range c.contains {
			if !strings.Contains(c.out(r), s) {
				t.Errorf("README %q: output %q does not contain %q", c.cmd, c.out(r), s)
			}
		}
	}
	if r := ran["scan shop.clicks"]; strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("README scan printed %d lines, want the 1 appended row: %q", strings.Count(r.stdout, "\n"), r.stdout)
	}
}

func indexOf(words []string, w string) int {
	for i, x := range words {
		if x == w {
			return i
		}
	}
	return -1
}

// TestReadmePKExamples runs README.md's primary-key block through the
// built binary and checks the lookups and the changelog it prints.
func TestReadmePKExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	addr := startNode(t, t.TempDir()).addr
	mustCall(t, addr, "AdminService/ListDatabases", map[string]any{}, nil)
	outs := runReadmeCLIBlock(t, addr, "## Primary-key tables")
	if len(outs) != 8 {
		t.Fatalf("ran %d commands, want 8", len(outs))
	}
	for i, want := range map[int]string{
		4: `{"user_id":7,"item":1,"qty":5,"note":"gift"}`, // lookup after the partial update
		5: `{"user_id":7,"item":1,"qty":5,"note":"gift"}`, // prefix lookup
	} {
		if !strings.Contains(outs[i], want) {
			t.Errorf("README command %d printed %q, want %s", i, outs[i], want)
		}
	}
	var types []string
	for _, line := range strings.Split(strings.TrimSpace(outs[7]), "\n") {
		var row map[string]any
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("changelog line %q: %v", line, err)
		}
		types = append(types, fmt.Sprint(row["_change_type"]))
	}
	if got := strings.Join(types, " "); got != "+I -U +U -D" {
		t.Errorf("README changelog scan printed change types %q, want +I -U +U -D", got)
	}
}

// TestReadmePartitionExamples runs README.md's partitioned-table block
// with the CLI against a fresh server: the append creates its partition,
// the scan reads the row back, and after the create and drop the list
// holds the new partition only.
func TestReadmePartitionExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	addr := startNode(t, t.TempDir()).addr
	if err := call(context.Background(), addr, "AdminService/CreateDatabase", map[string]any{"name": "shop"}, nil); err != nil {
		t.Fatal(err)
	}
	outs := runReadmeCLIBlock(t, addr, "## Partitioned tables")
	if len(outs) != 7 {
		t.Fatalf("ran %d commands, want 7", len(outs))
	}
	if !strings.Contains(outs[2], "2026-12-03") {
		t.Errorf("partition list after the append printed %q, want partition 2026-12-03", outs[2])
	}
	if want := `{"id":1,"day":"2026-12-03","page":"/"}`; strings.TrimSpace(outs[3]) != want {
		t.Errorf("scan printed %q, want %s", outs[3], want)
	}
	if want := "dropped partition day=2026-12-03 of shop.visits\n"; outs[5] != want {
		t.Errorf("partition drop printed %q, want %q", outs[5], want)
	}
	if !strings.Contains(outs[6], "2026-12-04") || strings.Contains(outs[6], "2026-12-03") {
		t.Errorf("partition list after create and drop printed %q, want 2026-12-04 only", outs[6])
	}
}

// runReadmeCLIBlock runs the ./fluss-node commands of the README block
// after heading against addr (`echo ... | ./fluss-node ...` feeds the
// echoed words on stdin), fails the test on any non-zero exit, and returns
// each command's stdout.
func runReadmeCLIBlock(t *testing.T, addr, heading string) []string {
	t.Helper()
	var outs []string
	for _, words := range shellCommands(t, readmeBlock(t, heading), map[string]string{}) {
		stdin := ""
		if pipe := indexOf(words, "|"); pipe >= 0 {
			stdin = strings.Join(words[1:pipe], " ") + "\n"
			words = words[pipe+1:]
		}
		if words[0] != "./fluss-node" {
			t.Fatalf("unexpected command in the README block %q: %q", heading, words)
		}
		r := runCLI(t, addr, stdin, words[1:]...)
		if r.code != 0 {
			t.Fatalf("README command %q: exit %d: %s", strings.Join(words, " "), r.code, strings.TrimSpace(r.stderr))
		}
		outs = append(outs, r.stdout)
	}
	return outs
}
