package rpc_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/fluss-node/fluss-node/rpc"
)

// scanPlain calls Scan as curl would, with a plain JSON body, and returns
// the answer's status, content type and lines.
func scanPlain(t *testing.T, url, body string) (int, string, []string) {
	t.Helper()
	res, err := http.Post(url+"/fluss.v1.ReadService/Scan", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var lines []string
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, res.Header.Get("Content-Type"), lines
}

// Scan, a server stream, answers a plain JSON request (curl's) with one
// JSON message per line, every row once; its errors come back as a unary
// call's do.
func TestScanOverPlainJSON(t *testing.T) {
	e := ordersWithRows(t, 300)
	status, ct, lines := scanPlain(t, e.url, `{"table":"shop.orders","from":"EARLIEST","columns":["id","city"],"filter":"n >= 100"}`)
	if status != 200 || ct != "application/x-ndjson" {
		t.Fatalf("status %d, content type %q: %q", status, ct, lines)
	}
	seen := map[int]bool{}
	for _, l := range lines {
		var msg struct {
			Bucket int32
			Rows   []map[string]any
			Error  any
		}
		if err := json.Unmarshal([]byte(l), &msg); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if msg.Error != nil {
			t.Fatalf("error line %q", l)
		}
		for _, r := range msg.Rows {
			id := int(r["id"].(float64))
			if seen[id] || len(r) != 2 || id < 100 {
				t.Fatalf("row %v: seen before %v, want columns id and city of n >= 100", r, seen[id])
			}
			seen[id] = true
		}
	}
	if len(seen) != 200 {
		t.Fatalf("%d rows in %d lines, want 200", len(seen), len(lines))
	}

	for _, tc := range []struct {
		name, body string
		status     int
		code, msg  string
	}{
		{"unknown table", `{"table":"shop.nope"}`, 404, "not_found", "shop.nope"},
		{"bad filter", `{"table":"shop.orders","filter":"id >"}`, 400, "invalid_argument", "filter"},
		{"not JSON", `{"table":`, 400, "invalid_argument", "JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, ct, lines := scanPlain(t, e.url, tc.body)
			var out struct{ Code, Message string }
			if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &out) != nil {
				t.Fatalf("status %d, answer %q: want one JSON error", status, lines)
			}
			if status != tc.status || ct != "application/json" || out.Code != tc.code || !strings.Contains(out.Message, tc.msg) {
				t.Fatalf("status %d (%s), %+v; want %d, code %s, a message naming %q", status, ct, out, tc.status, tc.code, tc.msg)
			}
		})
	}
}

// TestScanFromOffsets: a Scan from given offsets reads each bucket from
// there to its end; an offset at the end reads nothing, one outside the log
// is out_of_range, as Fetch answers it.
func TestScanFromOffsets(t *testing.T) {
	e := ordersWithRows(t, 300) // one bucket, offsets 0..299
	from := func(offset int) string {
		return fmt.Sprintf(`{"table":"shop.orders","from":"OFFSETS","offsets":[{"bucket":0,"offset":%d}],"columns":["n"]}`, offset)
	}
	for _, tc := range []struct{ offset, first, rows int }{{250, 250, 50}, {0, 0, 300}, {300, 0, 0}} {
		status, _, lines := scanPlain(t, e.url, from(tc.offset))
		var ns []int
		for _, l := range lines {
			var msg struct{ Rows []struct{ N int } }
			if err := json.Unmarshal([]byte(l), &msg); err != nil {
				t.Fatalf("line %q: %v", l, err)
			}
			for _, r := range msg.Rows {
				ns = append(ns, r.N)
			}
		}
		if status != 200 || len(ns) != tc.rows {
			t.Fatalf("from %d: status %d, %d rows, want %d", tc.offset, status, len(ns), tc.rows)
		}
		for i, n := range ns {
			if n != tc.first+i {
				t.Fatalf("from %d: row %d has n=%d, want %d", tc.offset, i, n, tc.first+i)
			}
		}
	}
	for _, tc := range []struct {
		offset int
		msg    string
	}{{301, "offset 301 is past the end of the log (300)"}, {-1, "offset -1"}} {
		status, _, lines := scanPlain(t, e.url, from(tc.offset))
		var out struct{ Code, Message string }
		if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &out) != nil {
			t.Fatalf("from %d: status %d, answer %q: want one JSON error", tc.offset, status, lines)
		}
		if status != 400 || out.Code != "out_of_range" || !strings.Contains(out.Message, tc.msg) {
			t.Fatalf("from %d: status %d, %+v; want 400, out_of_range, %q", tc.offset, status, out, tc.msg)
		}
	}
}

// A plain JSON Scan may come gzipped, as a unary call may.
func TestScanOverPlainJSONGzipped(t *testing.T) {
	e := ordersWithRows(t, 10)
	var body bytes.Buffer
	zw := gzip.NewWriter(&body)
	_, _ = zw.Write([]byte(`{"table":"shop.orders","columns":["id"]}`))
	_ = zw.Close()
	req, _ := http.NewRequest(http.MethodPost, e.url+"/fluss.v1.ReadService/Scan", &body)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Encoding", "gzip")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || strings.Count(string(raw), `"id":`) != 10 {
		t.Fatalf("status %d: %s, want the 10 rows", res.StatusCode, raw)
	}
}

// A plain JSON Scan over max_request_bytes is refused before it is read
// whole.
func TestScanOverPlainJSONLimit(t *testing.T) {
	e := newEnv(t, rpc.Limits{MaxRequestBytes: 64})
	res, err := http.Post(e.url+"/fluss.v1.ReadService/Scan", "application/json", strings.NewReader(`{"table":"shop.orders","filter":"`+strings.Repeat("x", 100)+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(raw), `"resource_exhausted"`) {
		t.Fatalf("status %d: %s, want 429 resource_exhausted", res.StatusCode, raw)
	}
}
