package client

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"connectrpc.com/connect"

	"github.com/fluss-node/fluss-node/proto/flussv1"
)

// CreateDatabase records the call: DDL is not safe to repeat, so the
// seed tests count where it went.
func (f *fakeNode) CreateDatabase(_ context.Context, req *connect.Request[flussv1.CreateDatabaseRequest]) (*connect.Response[flussv1.CreateDatabaseResponse], error) {
	if err := f.record("CreateDatabase", req.Msg); err != nil {
		return nil, err
	}
	return connect.NewResponse(&flussv1.CreateDatabaseResponse{}), nil
}

// hostLog is an HTTP client that records the host of every request it
// sends on, in order.
type hostLog struct {
	next connect.HTTPClient

	mu    sync.Mutex
	hosts []string
}

func (h *hostLog) Do(r *http.Request) (*http.Response, error) {
	h.mu.Lock()
	h.hosts = append(h.hosts, r.URL.Host)
	h.mu.Unlock()
	return h.next.Do(r)
}

// count returns how many requests went to host.
func (h *hostLog) count(host string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, got := range h.hosts {
		if got == host {
			n++
		}
	}
	return n
}

// scanRows scans db.t (the fake nodes answer one message naming the
// node) and returns the messages' rows.
func scanRows(ctx context.Context, c *Client) ([]string, error) {
	var rows []string
	err := c.Scan(ctx, &flussv1.ScanRequest{Table: "db.t"}, func(m *flussv1.ScanResponse) error {
		rows = append(rows, string(m.GetRows()))
		return nil
	})
	return rows, err
}

// A seed that refuses the connection is passed over within the call, even
// for a call that is not retried, and calls stay with the seed that
// answered.
func TestSeedsPassOverARefusingSeed(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
		h2c  bool
	}{
		{name: "proto"},
		{name: "json", opts: []Option{WithJSON()}},
		{name: "grpc", opts: []Option{WithGRPC()}, h2c: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			fc := newFakeCluster(t, 3)
			dead := fc.node(1)
			dead.srv.Close()
			log := &hostLog{next: DefaultHTTPClient(tc.h2c)}
			opts := append([]Option{WithHTTPClient(log), WithRetry(Retry{Attempts: 1})}, tc.opts...)
			c := New(dead.addr+", "+fc.node(2).addr+","+fc.node(3).addr, opts...)

			if err := c.CreateDatabase(ctx, "shop", false); err != nil {
				t.Fatalf("create database with the first seed down: %v", err)
			}
			if _, err := c.GetTable(ctx, "db.t"); err != nil {
				t.Fatalf("get table: %v", err)
			}
			rows, err := scanRows(ctx, c)
			if err != nil || len(rows) != 1 || rows[0] != `[{"node":2}]` {
				t.Fatalf("scan: rows %q, err %v; want node 2's one message", rows, err)
			}
			if got := counts(fc, "CreateDatabase"); !sameCounts(got, map[int32]int{2: 1}) {
				t.Errorf("create database calls per node %v, want one on node 2", got)
			}
			if got := counts(fc, "GetTable"); !sameCounts(got, map[int32]int{2: 1}) {
				t.Errorf("get table calls per node %v, want one on node 2", got)
			}
			if n := log.count(dead.addr); n != 1 {
				t.Errorf("the refusing seed was tried %d times, want once (calls stay with the seed that answered)", n)
			}
		})
	}
}

// A seed that answers `unavailable` is passed over by the calls after it:
// a retried call succeeds elsewhere, a call that is not retried is sent
// once and fails.
func TestSeedsPassOverAnUnavailableSeed(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{name: "proto"},
		{name: "json", opts: []Option{WithJSON()}},
		{name: "grpc", opts: []Option{WithGRPC()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testSeedsPassOverAnUnavailableSeed(t, tc.opts...)
		})
	}
}

func testSeedsPassOverAnUnavailableSeed(t *testing.T, opts ...Option) {
	ctx := testCtx(t)
	fc := newFakeCluster(t, 2)
	c := New(fc.node(1).addr+","+fc.node(2).addr, append([]Option{fastRetry}, opts...)...)

	fc.node(1).failNext("GetTable", connect.CodeUnavailable)
	if _, err := c.GetTable(ctx, "db.t"); err != nil {
		t.Fatalf("get table, the first seed unavailable once: %v", err)
	}
	if got := counts(fc, "GetTable"); !sameCounts(got, map[int32]int{1: 1, 2: 1}) {
		t.Fatalf("get table calls per node %v, want the refused one on node 1 and the retry on node 2", got)
	}

	// A stream's `unavailable` (Connect: its last message; gRPC: the
	// trailers) passes the seed over too: the retried Scan goes to node 1.
	fc.node(2).failNext("Scan", connect.CodeUnavailable)
	rows, err := scanRows(ctx, c)
	if err != nil || len(rows) != 1 || rows[0] != `[{"node":1}]` {
		t.Fatalf("scan, the current seed unavailable once: rows %q, err %v; want node 1's one message", rows, err)
	}
	if got := counts(fc, "Scan"); !sameCounts(got, map[int32]int{1: 1, 2: 1}) {
		t.Fatalf("scan calls per node %v, want the refused one on node 2 and the retry on node 1", got)
	}

	fc.node(1).failNext("CreateDatabase", connect.CodeUnavailable)
	err = c.CreateDatabase(ctx, "shop", false)
	if connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("create database on an unavailable seed: %v, want the unavailable answer (DDL is not retried)", err)
	}
	if got := counts(fc, "CreateDatabase"); !sameCounts(got, map[int32]int{1: 1}) {
		t.Fatalf("create database calls per node %v, want one, on node 1 (the seed that answered last)", got)
	}
	if err := c.CreateDatabase(ctx, "shop", false); err != nil {
		t.Fatalf("create database again: %v", err)
	}
	if got := counts(fc, "CreateDatabase"); !sameCounts(got, map[int32]int{1: 1, 2: 1}) {
		t.Errorf("create database calls per node %v, want the second on node 2 (node 1 is passed over)", got)
	}
}

func TestSeedsAllRefusing(t *testing.T) {
	ctx := testCtx(t)
	fc := newFakeCluster(t, 2)
	fc.node(1).srv.Close()
	fc.node(2).srv.Close()
	c := New(fc.node(1).addr+","+fc.node(2).addr, WithRetry(Retry{Attempts: 1}))
	_, err := c.ListDatabases(ctx)
	if connect.CodeOf(err) != connect.CodeUnavailable || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("list databases with every seed down: %v, want unavailable: connection refused", err)
	}
}

// With routing, the seed list serves the calls to the base URL and the
// layout reads; calls routed to a leader go to its address.
func TestSeedsWithRouting(t *testing.T) {
	ctx := testCtx(t)
	fc := newFakeCluster(t, 3)
	fc.setLeader(0, 3)
	fc.node(1).srv.Close()
	c := New(fc.node(1).addr+","+fc.node(2).addr, WithRouting(), fastRetry)
	appendTo(t, ctx, c, 0)
	if got := counts(fc, "Append"); !sameCounts(got, map[int32]int{3: 1}) {
		t.Errorf("appends per node %v, want one on node 3, the leader", got)
	}
	if len(fc.node(2).got("GetTableLayout")) == 0 {
		t.Error("the layout was not read from node 2, the seed that answers")
	}
}

func TestParseSeeds(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string // URLs; nil: an error naming the bad part
		bad  string
	}{
		{in: "127.0.0.1:9123", want: []string{"http://127.0.0.1:9123"}},
		{in: "http://a:1/", want: []string{"http://a:1"}},
		{in: " a:1, https://b:2/prefix/ ,,", want: []string{"http://a:1", "https://b:2/prefix"}},
		{in: "", bad: "no server address"},
		{in: " , ", bad: "no server address"},
		{in: "a:1,ftp://b:2", bad: `"ftp://b:2"`},
		{in: "a:1,http://b:x", bad: `"http://b:x"`},
		{in: "http://", bad: `"http://"`},
	} {
		seeds, err := parseSeeds(tc.in)
		if tc.bad != "" {
			if err == nil || !strings.Contains(err.Error(), tc.bad) {
				t.Errorf("parseSeeds(%q) = %v, %v; want an error naming %s", tc.in, seeds, err, tc.bad)
			}
			continue
		}
		var got []string
		for _, u := range seeds {
			got = append(got, u.String())
		}
		if err != nil || strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("parseSeeds(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// A client given a bad list fails every call with the reason, and sends
// nothing.
func TestSeedsBadListFailsCalls(t *testing.T) {
	c := New("127.0.0.1:9123,ftp://elsewhere")
	_, err := c.ListDatabases(testCtx(t))
	if err == nil || !strings.Contains(err.Error(), "ftp://elsewhere") {
		t.Fatalf("list databases: %v, want an error naming the bad server", err)
	}
}

// A seed with a path prefix (behind a proxy) gets the call's procedure
// under its own prefix.
func TestSeedsKeepPathPrefixes(t *testing.T) {
	seeds, err := parseSeeds("http://a:1/x,https://b:2/y/z")
	if err != nil {
		t.Fatal(err)
	}
	s := newSeedList(nil, seeds)
	r, err := http.NewRequest(http.MethodPost, "http://a:1/x/fluss.v1.AdminService/GetTable", http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	got := s.at(r, 1)
	if got.URL.String() != "https://b:2/y/z/fluss.v1.AdminService/GetTable" || got.Host != "b:2" {
		t.Errorf("addressed to seed 1: %s (Host %s)", got.URL, got.Host)
	}
	if r.URL.String() != "http://a:1/x/fluss.v1.AdminService/GetTable" {
		t.Errorf("the original request changed: %s", r.URL)
	}
}

// envelope is one Connect streaming envelope.
func envelope(flags byte, payload string) []byte {
	b := []byte{flags, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(len(payload)))
	return append(b, payload...)
}

// watchSees feeds body to a connectStreamWatch in pieces of the given
// sizes (cycled) and returns how often it reported `unavailable`.
func watchSees(body []byte, sizes []int) int {
	n := 0
	w := &connectStreamWatch{ReadCloser: io.NopCloser(bytes.NewReader(body)), unavailable: func() { n++ }}
	for i := 0; len(body) > 0; i++ {
		k := min(max(sizes[i%len(sizes)], 1), len(body))
		w.scan(body[:k])
		body = body[k:]
	}
	return n
}

func TestConnectStreamWatch(t *testing.T) {
	msg := envelope(0, "\x0a\x03abc")
	for name, tc := range map[string]struct {
		body []byte
		want int
	}{
		"unavailable":          {slices.Concat(msg, msg, envelope(2, `{"error":{"code":"unavailable","message":"node is cut off"}}`)), 1},
		"other error":          {slices.Concat(msg, envelope(2, `{"error":{"code":"not_found"}}`)), 0},
		"success":              {slices.Concat(msg, envelope(2, `{}`)), 0},
		"empty end":            {envelope(2, ``), 0},
		"compressed end":       {envelope(3, `{"error":{"code":"unavailable"}}`), 0},
		"code in a message":    {envelope(0, `{"error":{"code":"unavailable"}}`), 0},
		"cut off before end":   {slices.Concat(msg, envelope(2, `{"error":{"code":"unavailable"}}`)[:20]), 0},
		"metadata and error":   {envelope(2, `{"metadata":{"x":["y"]},"error":{"code":"unavailable"}}`), 1},
		"empty message before": {slices.Concat(envelope(0, ""), envelope(2, `{"error":{"code":"unavailable"}}`)), 1},
	} {
		for _, sizes := range [][]int{{1 << 20}, {1}, {2, 3}, {5}, {7, 1}} {
			if got := watchSees(tc.body, sizes); got != tc.want {
				t.Errorf("%s, read in pieces of %v: unavailable reported %d times, want %d", name, sizes, got, tc.want)
			}
		}
	}

	// Read passes the bytes through unchanged.
	body := slices.Concat(msg, envelope(2, `{"error":{"code":"unavailable"}}`))
	n := 0
	w := &connectStreamWatch{ReadCloser: io.NopCloser(bytes.NewReader(body)), unavailable: func() { n++ }}
	got, err := io.ReadAll(w)
	if err != nil || !bytes.Equal(got, body) || n != 1 {
		t.Fatalf("ReadAll: %d bytes (want %d, same), err %v, unavailable %d times", len(got), len(body), err, n)
	}
}

// FuzzConnectStreamWatch: any body, cut anywhere, neither panics nor
// depends on how the reads cut it.
func FuzzConnectStreamWatch(f *testing.F) {
	f.Add(slices.Concat(envelope(0, "ab"), envelope(2, `{"error":{"code":"unavailable"}}`)), uint8(3))
	f.Add(envelope(2, `{"error":{"code":"internal"}}`), uint8(1))
	f.Add([]byte{2, 0xff, 0xff, 0xff, 0xff, '{'}, uint8(2))
	f.Fuzz(func(t *testing.T, body []byte, piece uint8) {
		whole := watchSees(body, []int{len(body) + 1})
		if cut := watchSees(body, []int{int(piece), 1}); cut != whole {
			t.Fatalf("read whole: unavailable %d times; in pieces of %d and 1: %d", whole, piece, cut)
		}
	})
}
