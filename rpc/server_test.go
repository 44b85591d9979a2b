package rpc_test

import (
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
	e := newEnv(t, rpc.Limits{})
	e.setupOrders(t)
	var rows []string
	for i := range 200 {
		rows = append(rows, fmt.Sprintf(`{"id":%d,"city":"city-%d","amount":"1.25","ts":1714564800000,"n":%d}`, i, i, i))
	}
	e.mustPost(t, "/fluss.v1.WriteService/Append", `{"table":"shop.orders","rows":[`+strings.Join(rows, ",")+`]}`)
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
