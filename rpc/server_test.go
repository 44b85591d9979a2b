package rpc_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/fluss-node/fluss-node/rpc"
)

// TestResponseCompressionThreshold: a client that accepts gzip gets small
// responses (an Append result) uncompressed and large ones (a Fetch of many
// rows) gzipped.
func TestResponseCompressionThreshold(t *testing.T) {
	e := ordersWithRows(t, 200)
	for _, tc := range []struct {
		name, proc, body string
		wantGzip         bool
	}{
		{"small append", "/fluss.v1.WriteService/Append", `{"table":"shop.orders","rows":[{"id":1,"n":1}]}`, false},
		{"large fetch", "/fluss.v1.ReadService/Fetch", `{"table":"shop.orders","bucket":0,"offset":0}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, e.url+tc.proc, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept-Encoding", "gzip") // set explicitly: the transport does not decompress
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			raw, _ := io.ReadAll(res.Body)
			if res.StatusCode != 200 {
				t.Fatalf("status %d: %q", res.StatusCode, raw)
			}
			if gz := res.Header.Get("Content-Encoding") == "gzip"; gz != tc.wantGzip {
				t.Fatalf("Content-Encoding %q for a %d-byte body, want gzip=%v", res.Header.Get("Content-Encoding"), len(raw), tc.wantGzip)
			}
		})
	}
}

// TestUnaryAnswersCarryLength: over HTTP/1.1 a unary answer over net/http's
// 2 KiB of its own buffering still comes with a Content-Length (and so does
// an error), one over the 64 KiB the server holds back comes chunked, and
// both arrive whole.
func TestUnaryAnswersCarryLength(t *testing.T) {
	e := ordersWithRows(t, 2000)
	for _, tc := range []struct {
		name, proc, body string
		wantStatus       int
		wantLength       bool
		minBytes         int
	}{
		{"small", "/fluss.v1.ReadService/Fetch", `{"table":"shop.orders","bucket":0,"offset":0,"maxRecords":40}`, 200, true, 2 << 10},
		{"large", "/fluss.v1.ReadService/Fetch", `{"table":"shop.orders","bucket":0,"offset":0}`, 200, false, 64 << 10},
		{"error", "/fluss.v1.ReadService/Fetch", `{"table":"shop.nope","bucket":0,"offset":0}`, 404, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, e.url+tc.proc, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept-Encoding", "identity") // else the transport unzips and drops the length
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			raw, err := io.ReadAll(res.Body)
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != tc.wantStatus || len(raw) < tc.minBytes || !json.Valid(raw) {
				t.Fatalf("status %d, %d bytes (valid JSON %v); want status %d, >= %d bytes of JSON", res.StatusCode, len(raw), json.Valid(raw), tc.wantStatus, tc.minBytes)
			}
			if tc.wantLength && res.ContentLength != int64(len(raw)) {
				t.Fatalf("Content-Length %d (transfer encoding %v) for %d bytes", res.ContentLength, res.TransferEncoding, len(raw))
			}
			if !tc.wantLength && res.ContentLength != -1 {
				t.Fatalf("Content-Length %d for %d bytes, want chunked", res.ContentLength, len(raw))
			}
		})
	}
}

// ordersWithRows returns an env whose shop.orders holds n rows.
func ordersWithRows(t *testing.T, n int) *env {
	e := newEnv(t, rpc.Limits{})
	e.setupOrders(t)
	var rows []string
	for i := range n {
		rows = append(rows, fmt.Sprintf(`{"id":%d,"city":"city-%d","amount":"1.25","ts":1714564800000,"n":%d}`, i, i, i))
	}
	e.mustPost(t, "/fluss.v1.WriteService/Append", `{"table":"shop.orders","rows":[`+strings.Join(rows, ",")+`]}`)
	return e
}
