package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/proto/flussv1/flussv1connect"
	"github.com/fluss-node/fluss-node/rpc"
)

// fakeCluster is a set of fake nodes sharing one layout: bucket → leader
// node id of the one table "db.t", and a tiny primary-key store keyed by
// the JSON of the "id" column.
type fakeCluster struct {
	mu      sync.Mutex
	leaders map[int32]int32 // bucket → node id
	nodes   []*fakeNode
	kv      map[string]json.RawMessage
}

// fakeNode is one httptest server implementing the three services. It
// records every call it gets and can be told to fail the next calls of a
// procedure with a code.
type fakeNode struct {
	flussv1connect.UnimplementedAdminServiceHandler
	flussv1connect.UnimplementedWriteServiceHandler
	flussv1connect.UnimplementedReadServiceHandler

	id      int32
	cluster *fakeCluster
	srv     *httptest.Server
	addr    string // host:port

	mu    sync.Mutex
	calls []string // procedure names, in order
	reqs  []any    // the request messages, in order
	fail  map[string][]connect.Code
	hook  func(procedure string) // called on every call, if set

	cutOff atomic.Bool // its layouts name no leader, as a node cut off from the others serves them
}

func newFakeCluster(t *testing.T, n int) *fakeCluster {
	t.Helper()
	c := &fakeCluster{leaders: map[int32]int32{}, kv: map[string]json.RawMessage{}}
	for i := 1; i <= n; i++ {
		f := &fakeNode{id: int32(i), cluster: c, fail: map[string][]connect.Code{}}
		mux := http.NewServeMux()
		opts := []connect.HandlerOption{connect.WithCodec(rpc.Codecs()[0]), connect.WithCodec(rpc.Codecs()[1])}
		mux.Handle(flussv1connect.NewAdminServiceHandler(f, opts...))
		mux.Handle(flussv1connect.NewWriteServiceHandler(f, opts...))
		mux.Handle(flussv1connect.NewReadServiceHandler(f, opts...))
		f.srv = httptest.NewUnstartedServer(mux)
		var p http.Protocols
		p.SetHTTP1(true)
		p.SetUnencryptedHTTP2(true)
		f.srv.Config.Protocols = &p
		f.srv.Start()
		f.addr = strings.TrimPrefix(f.srv.URL, "http://")
		t.Cleanup(f.srv.Close)
		c.nodes = append(c.nodes, f)
	}
	return c
}

func (c *fakeCluster) node(id int32) *fakeNode { return c.nodes[id-1] }

func (c *fakeCluster) setLeader(bucket, node int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.leaders[bucket] = node
}

// record notes a call and returns the error the test asked for, if any.
func (f *fakeNode) record(procedure string, req any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, procedure)
	f.reqs = append(f.reqs, req)
	if f.hook != nil {
		f.hook(procedure)
	}
	if q := f.fail[procedure]; len(q) > 0 {
		f.fail[procedure] = q[1:]
		return connect.NewError(q[0], fmt.Errorf("injected %v on node %d", q[0], f.id))
	}
	return nil
}

// failNext makes the next calls of procedure fail with codes, in order.
func (f *fakeNode) failNext(procedure string, codes ...connect.Code) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[procedure] = append(f.fail[procedure], codes...)
}

// got returns the calls of procedure the node received (request messages).
func (f *fakeNode) got(procedure string) []any {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []any
	for i, c := range f.calls {
		if c == procedure {
			out = append(out, f.reqs[i])
		}
	}
	return out
}

func (f *fakeNode) GetTableLayout(_ context.Context, req *connect.Request[flussv1.GetTableLayoutRequest]) (*connect.Response[flussv1.GetTableLayoutResponse], error) {
	if err := f.record("GetTableLayout", req.Msg); err != nil {
		return nil, err
	}
	if req.Msg.Table != "db.t" {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("table %q does not exist", req.Msg.Table))
	}
	f.cluster.mu.Lock()
	defer f.cluster.mu.Unlock()
	res := &flussv1.GetTableLayoutResponse{}
	for b := int32(0); b < 4; b++ {
		l := &flussv1.BucketLayout{Bucket: b, Leader: f.cluster.leaders[b]}
		if f.cutOff.Load() {
			l.Leader = 0
		}
		res.Buckets = append(res.Buckets, l)
	}
	return connect.NewResponse(res), nil
}

// GetTable describes every table as having 4 buckets; "db.keyed" has a
// bucket key.
func (f *fakeNode) GetTable(_ context.Context, req *connect.Request[flussv1.GetTableRequest]) (*connect.Response[flussv1.GetTableResponse], error) {
	if err := f.record("GetTable", req.Msg); err != nil {
		return nil, err
	}
	res := &flussv1.GetTableResponse{BucketCount: 4}
	if req.Msg.Table == "db.keyed" {
		res.BucketKeys = []string{"id"}
	}
	return connect.NewResponse(res), nil
}

func (f *fakeNode) DescribeCluster(_ context.Context, req *connect.Request[flussv1.DescribeClusterRequest]) (*connect.Response[flussv1.DescribeClusterResponse], error) {
	if err := f.record("DescribeCluster", req.Msg); err != nil {
		return nil, err
	}
	res := &flussv1.DescribeClusterResponse{ClusterId: "fake"}
	for _, n := range f.cluster.nodes {
		res.Nodes = append(res.Nodes, &flussv1.NodeInfo{Id: n.id, ClientAddr: n.addr})
	}
	return connect.NewResponse(res), nil
}

// Append answers one result. Like a server refusing a bad row, it refuses
// JSON rows of which one has a "refuse" member, and then stores nothing.
func (f *fakeNode) Append(_ context.Context, req *connect.Request[flussv1.AppendRequest]) (*connect.Response[flussv1.AppendResponse], error) {
	if err := f.record("Append", req.Msg); err != nil {
		return nil, err
	}
	if rows := req.Msg.GetRows(); len(rows) > 0 {
		var objs []map[string]json.RawMessage
		if err := json.Unmarshal(rows, &objs); err != nil {
			return nil, connect.NewError(connect.CodeInvalidArgument, err)
		}
		for i, o := range objs {
			if _, ok := o["refuse"]; ok {
				return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("row %d refused", i))
			}
		}
	}
	return connect.NewResponse(&flussv1.AppendResponse{Results: []*flussv1.AppendResult{{Bucket: req.Msg.GetBucket(), Count: 1}}}), nil
}

func (f *fakeNode) Scan(_ context.Context, req *connect.Request[flussv1.ScanRequest], stream *connect.ServerStream[flussv1.ScanResponse]) error {
	if err := f.record("Scan", req.Msg); err != nil {
		return err
	}
	return stream.Send(&flussv1.ScanResponse{Rows: []byte(fmt.Sprintf(`[{"node":%d}]`, f.id))})
}

func (f *fakeNode) Fetch(_ context.Context, req *connect.Request[flussv1.FetchRequest]) (*connect.Response[flussv1.FetchResponse], error) {
	if err := f.record("Fetch", req.Msg); err != nil {
		return nil, err
	}
	return connect.NewResponse(&flussv1.FetchResponse{Rows: []byte(fmt.Sprintf(`[{"node":%d}]`, f.id)), NextOffset: req.Msg.Offset + 1, HighWatermark: req.Msg.Offset + 1}), nil
}

// rowsOf splits a JSON array of objects and returns each with its "id".
func rowsOf(b []byte) ([]json.RawMessage, []string, error) {
	var rows []json.RawMessage
	if err := json.Unmarshal(b, &rows); err != nil {
		return nil, nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(r, &m); err != nil || m["id"] == nil {
			return nil, nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("row %d has no id", i))
		}
		ids[i] = string(m["id"])
	}
	return rows, ids, nil
}

func (f *fakeNode) Upsert(_ context.Context, req *connect.Request[flussv1.UpsertRequest]) (*connect.Response[flussv1.UpsertResponse], error) {
	if err := f.record("Upsert", req.Msg); err != nil {
		return nil, err
	}
	rows, ids, err := rowsOf(req.Msg.Rows)
	if err != nil {
		return nil, err
	}
	f.cluster.mu.Lock()
	defer f.cluster.mu.Unlock()
	for i, id := range ids {
		f.cluster.kv[id] = rows[i]
	}
	return connect.NewResponse(&flussv1.UpsertResponse{Results: []*flussv1.WriteResult{{Bucket: 0, Count: int32(len(rows))}}}), nil
}

func (f *fakeNode) Delete(_ context.Context, req *connect.Request[flussv1.DeleteRequest]) (*connect.Response[flussv1.DeleteResponse], error) {
	if err := f.record("Delete", req.Msg); err != nil {
		return nil, err
	}
	_, ids, err := rowsOf(req.Msg.Keys)
	if err != nil {
		return nil, err
	}
	f.cluster.mu.Lock()
	defer f.cluster.mu.Unlock()
	for _, id := range ids {
		delete(f.cluster.kv, id)
	}
	return connect.NewResponse(&flussv1.DeleteResponse{Results: []*flussv1.WriteResult{{Bucket: 0, Count: int32(len(ids))}}}), nil
}

func (f *fakeNode) Lookup(_ context.Context, req *connect.Request[flussv1.LookupRequest]) (*connect.Response[flussv1.LookupResponse], error) {
	if err := f.record("Lookup", req.Msg); err != nil {
		return nil, err
	}
	_, ids, err := rowsOf(req.Msg.Keys)
	if err != nil {
		return nil, err
	}
	f.cluster.mu.Lock()
	defer f.cluster.mu.Unlock()
	out := make([]json.RawMessage, len(ids))
	for i, id := range ids {
		if r, ok := f.cluster.kv[id]; ok {
			out[i] = r
		} else {
			out[i] = json.RawMessage("null")
		}
	}
	b, _ := json.Marshal(out)
	return connect.NewResponse(&flussv1.LookupResponse{Rows: b}), nil
}

func (f *fakeNode) PrefixLookup(_ context.Context, req *connect.Request[flussv1.PrefixLookupRequest]) (*connect.Response[flussv1.PrefixLookupResponse], error) {
	if err := f.record("PrefixLookup", req.Msg); err != nil {
		return nil, err
	}
	var prefixes []map[string]json.RawMessage
	if err := json.Unmarshal(req.Msg.Prefixes, &prefixes); err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	res := &flussv1.PrefixLookupResponse{}
	for _, p := range prefixes {
		res.Results = append(res.Results, &flussv1.PrefixLookupResult{Rows: []byte(fmt.Sprintf(`[{"user_id":%s,"n":1},{"user_id":%s,"n":2}]`, p["user_id"], p["user_id"]))})
	}
	return connect.NewResponse(res), nil
}

func (f *fakeNode) LimitScan(_ context.Context, req *connect.Request[flussv1.LimitScanRequest]) (*connect.Response[flussv1.LimitScanResponse], error) {
	if err := f.record("LimitScan", req.Msg); err != nil {
		return nil, err
	}
	var rows []string
	for i := int32(0); i < req.Msg.Limit; i++ {
		rows = append(rows, fmt.Sprintf(`{"node":%d,"i":%d}`, f.id, i))
	}
	return connect.NewResponse(&flussv1.LimitScanResponse{Rows: []byte("[" + strings.Join(rows, ",") + "]")}), nil
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// fastRetry keeps retry sleeps short in tests.
var fastRetry = WithRetry(Retry{Attempts: 5, Base: time.Millisecond, Max: 5 * time.Millisecond})

// appendTo appends to bucket of db.t and returns the request message the
// client sent (as the receiving node saw it), failing on error.
func appendTo(t *testing.T, ctx context.Context, c *Client, bucket int32) {
	t.Helper()
	res, err := c.AppendArrow(ctx, "db.t", bucket, []byte("arrow"))
	if err != nil {
		t.Fatalf("append to bucket %d: %v", bucket, err)
	}
	if len(res) != 1 || res[0].Bucket != bucket {
		t.Fatalf("append to bucket %d: results %v", bucket, res)
	}
}

// counts returns how many calls of procedure each node got, by node id.
func counts(c *fakeCluster, procedure string) map[int32]int {
	out := map[int32]int{}
	for _, n := range c.nodes {
		if k := len(n.got(procedure)); k > 0 {
			out[n.id] = k
		}
	}
	return out
}

func sameCounts(a, b map[int32]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestRoutingSendsBucketCallsToLeader(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
		// want maps procedure → node id → calls, after one append to
		// bucket 0, one to bucket 1, one without bucket, and a fetch of
		// bucket 1, with bucket 0 led by node 2 and bucket 1 by node 3.
		wantAppend, wantFetch map[int32]int
	}{
		{"no routing: all to the seed", nil, map[int32]int{1: 3}, map[int32]int{1: 1}},
		{"routing, Connect proto", []Option{WithRouting()}, map[int32]int{2: 1, 3: 1, 1: 1}, map[int32]int{3: 1}},
		{"routing, Connect JSON", []Option{WithRouting(), WithJSON()}, map[int32]int{2: 1, 3: 1, 1: 1}, map[int32]int{3: 1}},
		{"routing, gRPC", []Option{WithGRPC(), WithRouting()}, map[int32]int{2: 1, 3: 1, 1: 1}, map[int32]int{3: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			fc := newFakeCluster(t, 3)
			fc.setLeader(0, 2)
			fc.setLeader(1, 3)
			c := New(fc.node(1).srv.URL, append(tc.opts, fastRetry)...)
			appendTo(t, ctx, c, 0)
			appendTo(t, ctx, c, 1)
			if _, err := c.Append(ctx, "db.t", []byte(`[{"id":1}]`)); err != nil {
				t.Fatal(err)
			}
			res, err := c.Fetch(ctx, &flussv1.FetchRequest{Table: "db.t", Bucket: 1, Offset: 7})
			if err != nil {
				t.Fatal(err)
			}
			if res.NextOffset != 8 {
				t.Errorf("fetch next offset %d, want 8", res.NextOffset)
			}
			if got := counts(fc, "Append"); !sameCounts(got, tc.wantAppend) {
				t.Errorf("appends per node %v, want %v", got, tc.wantAppend)
			}
			if got := counts(fc, "Fetch"); !sameCounts(got, tc.wantFetch) {
				t.Errorf("fetches per node %v, want %v", got, tc.wantFetch)
			}
			// The layout is read once for the table, not per call.
			if n := len(fc.node(1).got("GetTableLayout")); tc.opts != nil && n != 1 {
				t.Errorf("GetTableLayout called %d times, want 1 (cached)", n)
			}
		})
	}
}

func TestRoutingFollowsLayoutChange(t *testing.T) {
	ctx := testCtx(t)
	fc := newFakeCluster(t, 3)
	fc.setLeader(0, 2)
	// Refresh before every call: the client sees every layout change.
	c := New(fc.node(1).srv.URL, WithRoutingRefresh(0), fastRetry)
	if got, want := c.RoutedAddr(ctx, "db.t", "", 0), fc.node(2).addr; got != want {
		t.Fatalf("routed to %q, want node 2 %q", got, want)
	}
	appendTo(t, ctx, c, 0)
	fc.setLeader(0, 3)
	appendTo(t, ctx, c, 0)
	fc.setLeader(0, 1) // the seed itself: no separate endpoint
	appendTo(t, ctx, c, 0)
	fc.setLeader(0, 0) // no leader: the seed, which forwards
	appendTo(t, ctx, c, 0)
	if got, want := counts(fc, "Append"), map[int32]int{2: 1, 3: 1, 1: 2}; !sameCounts(got, want) {
		t.Errorf("appends per node %v, want %v", got, want)
	}
	// A changelog view routes by its table's layout.
	fc.setLeader(2, 3)
	if got, want := c.RoutedAddr(ctx, "db.t$changelog", "", 2), fc.node(3).addr; got != want {
		t.Errorf("db.t$changelog bucket 2 routed to %q, want node 3 %q", got, want)
	}
	// An unknown table or bucket goes to the seed.
	if got := c.RoutedAddr(ctx, "db.nope", "", 0); got != "" {
		t.Errorf("unknown table routed to %q, want the seed", got)
	}
	if got := c.RoutedAddr(ctx, "db.t", "p1", 0); got != "" {
		t.Errorf("unknown partition routed to %q, want the seed", got)
	}
}

func TestRoutingRetriesAfterLeaderFailure(t *testing.T) {
	for _, tc := range []struct {
		name string
		// prepare breaks node 2 (the cached leader of bucket 0).
		prepare func(fc *fakeCluster)
		// wantLeader is where the retry lands.
		want map[int32]int
	}{
		{
			name: "leader gone, layout moved: retry on the new leader",
			prepare: func(fc *fakeCluster) {
				fc.node(2).srv.Close()
				fc.setLeader(0, 3)
			},
			want: map[int32]int{3: 1},
		},
		{
			name: "leader gone, layout unchanged: retry on the seed",
			prepare: func(fc *fakeCluster) {
				fc.node(2).srv.Close()
			},
			want: map[int32]int{1: 1},
		},
		{
			name: "leader answers unavailable: retry on the seed",
			prepare: func(fc *fakeCluster) {
				fc.node(2).failNext("Append", connect.CodeUnavailable)
			},
			// node 2 got the failed attempt, the seed the retry.
			want: map[int32]int{2: 1, 1: 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			fc := newFakeCluster(t, 3)
			fc.setLeader(0, 2)
			c := New(fc.node(1).srv.URL, WithRouting(), fastRetry)
			if got, want := c.RoutedAddr(ctx, "db.t", "", 0), fc.node(2).addr; got != want {
				t.Fatalf("routed to %q, want node 2 %q", got, want)
			}
			tc.prepare(fc)
			appendTo(t, ctx, c, 0)
			if got := counts(fc, "Append"); !sameCounts(got, tc.want) {
				t.Errorf("appends per node %v, want %v", got, tc.want)
			}
			// Every attempt carried the same writer id and sequence.
			var seen []*flussv1.AppendRequest
			for _, n := range fc.nodes {
				for _, r := range n.got("Append") {
					seen = append(seen, r.(*flussv1.AppendRequest))
				}
			}
			for _, r := range seen {
				if r.WriterId != c.WriterID() || r.BatchSequence != seen[0].BatchSequence || r.BatchSequence == 0 {
					t.Errorf("attempt carried writer %d seq %d, want writer %d seq %d", r.WriterId, r.BatchSequence, c.WriterID(), seen[0].BatchSequence)
				}
			}
		})
	}
}

// A seed that cannot serve a bucket's calls (cut off from the other
// nodes, or gone) does not hold the client up: once it failed a call, the
// client reads the layout from another node it knows and goes there.
func TestRoutingAroundAnUnavailableSeed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		prepare func(fc *fakeCluster) // breaks node 1, the seed
		want    map[int32]int         // appends per node
	}{
		{
			name: "seed cut off: answers unavailable, names no leader",
			prepare: func(fc *fakeCluster) {
				fc.node(1).cutOff.Store(true)
				fc.node(1).failNext("Append", connect.CodeUnavailable, connect.CodeUnavailable, connect.CodeUnavailable)
			},
			want: map[int32]int{1: 1, 3: 1},
		},
		{
			name:    "seed gone",
			prepare: func(fc *fakeCluster) { fc.node(1).srv.Close() },
			want:    map[int32]int{3: 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			fc := newFakeCluster(t, 3)
			fc.setLeader(0, 1)
			c := New(fc.node(1).srv.URL, WithRouting(), fastRetry)
			if got := c.RoutedAddr(ctx, "db.t", "", 0); got != "" {
				t.Fatalf("routed to %q, want the seed (it leads)", got)
			}
			tc.prepare(fc)
			fc.setLeader(0, 3) // the others elected node 3
			appendTo(t, ctx, c, 0)
			if got := counts(fc, "Append"); !sameCounts(got, tc.want) {
				t.Errorf("appends per node %v, want %v", got, tc.want)
			}
			if len(fc.node(2).got("GetTableLayout")) == 0 {
				t.Error("the layout was not asked of node 2, the first node other than the seed")
			}
		})
	}
}

// clockedClient is a routing client of fc's node 1 whose router reads the
// time from *now, which the test moves.
func clockedClient(fc *fakeCluster) (*Client, *time.Time) {
	c := New(fc.node(1).srv.URL, WithRouting(), fastRetry)
	now := time.Now()
	c.route.now = func() time.Time { return now }
	return c, &now
}

// Calls that name no bucket (the server spreads them over the buckets) go
// to the seed, and to another node for a while after the seed answered one
// `unavailable`.
func TestRoutingUnaddressedCallsAvoidAnUnavailableSeed(t *testing.T) {
	ctx := testCtx(t)
	fc := newFakeCluster(t, 3)
	c, now := clockedClient(fc)

	fc.node(1).failNext("Upsert", connect.CodeUnavailable)
	if _, err := c.Upsert(ctx, "db.t", []byte(`[{"id":1}]`), nil); err != nil {
		t.Fatal(err)
	}
	if got, want := counts(fc, "Upsert"), map[int32]int{1: 1, 2: 1}; !sameCounts(got, want) {
		t.Errorf("upserts per node %v, want %v (the seed failed, node 2 took the retry)", got, want)
	}
	if _, err := c.Lookup(ctx, "db.t", []byte(`[{"id":1}]`), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Append(ctx, "db.t", []byte(`[{"v":1}]`)); err != nil {
		t.Fatal(err)
	}
	if got, want := counts(fc, "Lookup"), map[int32]int{2: 1}; !sameCounts(got, want) {
		t.Errorf("lookups per node %v, want %v (the seed is avoided for a while)", got, want)
	}
	if got, want := counts(fc, "Append"), map[int32]int{2: 1}; !sameCounts(got, want) {
		t.Errorf("appends per node %v, want %v (the seed is avoided for a while)", got, want)
	}
	if _, err := c.GetTable(ctx, "db.t"); err != nil {
		t.Fatal(err)
	}
	if got, want := counts(fc, "GetTable"), map[int32]int{2: 1}; !sameCounts(got, want) {
		t.Errorf("GetTable calls per node %v, want %v (admin reads avoid the seed too)", got, want)
	}

	*now = now.Add(routingFailureBackoff)
	if _, err := c.Delete(ctx, "db.t", []byte(`[{"id":1}]`)); err != nil {
		t.Fatal(err)
	}
	if got, want := counts(fc, "Delete"), map[int32]int{1: 1}; !sameCounts(got, want) {
		t.Errorf("deletes per node %v, want %v (back to the seed after the backoff)", got, want)
	}

	// An admin read the seed fails is retried elsewhere.
	fc.node(1).failNext("GetTable", connect.CodeUnavailable)
	if _, err := c.GetTable(ctx, "db.t"); err != nil {
		t.Fatal(err)
	}
	if got, want := counts(fc, "GetTable"), map[int32]int{1: 1, 2: 2}; !sameCounts(got, want) {
		t.Errorf("GetTable calls per node %v, want %v (the seed's failure retried on node 2)", got, want)
	}

	// A Scan that fails before its first message is retried elsewhere too.
	*now = now.Add(routingFailureBackoff)
	fc.node(1).failNext("Scan", connect.CodeUnavailable)
	var rows []string
	if err := c.Scan(ctx, &flussv1.ScanRequest{Table: "db.t"}, func(m *flussv1.ScanResponse) error {
		rows = append(rows, string(m.GetRows()))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got, want := counts(fc, "Scan"), map[int32]int{1: 1, 2: 1}; !sameCounts(got, want) || len(rows) != 1 || rows[0] != `[{"node":2}]` {
		t.Errorf("scans per node %v, rows %q; want %v and node 2's row", got, rows, want)
	}
}

// A client that only writes by key (it loads no table layout) learns the
// nodes too, once per routing refresh, so it has somewhere to go when the
// seed fails.
func TestRoutingKeyedWriterLearnsTheNodes(t *testing.T) {
	ctx := testCtx(t)
	fc := newFakeCluster(t, 3)
	c, now := clockedClient(fc)
	upsert := func() {
		t.Helper()
		if _, err := c.Upsert(ctx, "db.t", []byte(`[{"id":1}]`), nil); err != nil {
			t.Fatal(err)
		}
	}
	upsert()
	fc.node(1).failNext("Upsert", connect.CodeUnavailable)
	upsert()
	if got, want := counts(fc, "Upsert"), map[int32]int{1: 2, 2: 1}; !sameCounts(got, want) {
		t.Errorf("upserts per node %v, want %v (the seed's failure retried on node 2)", got, want)
	}
	if got, want := counts(fc, "DescribeCluster"), map[int32]int{1: 1}; !sameCounts(got, want) {
		t.Errorf("DescribeCluster calls per node %v, want %v (once per refresh)", got, want)
	}
	*now = now.Add(DefaultRoutingRefresh)
	upsert()
	if got, want := counts(fc, "DescribeCluster"), map[int32]int{1: 2}; !sameCounts(got, want) {
		t.Errorf("DescribeCluster calls per node %v after a refresh, want %v", got, want)
	}
}

func TestRoutingLayoutErrorFallsBackToSeed(t *testing.T) {
	ctx := testCtx(t)
	fc := newFakeCluster(t, 2)
	fc.setLeader(0, 2)
	fc.node(1).failNext("GetTableLayout", connect.CodeUnavailable)
	c := New(fc.node(1).srv.URL, WithRouting(), fastRetry)
	appendTo(t, ctx, c, 0)
	if got, want := counts(fc, "Append"), map[int32]int{1: 1}; !sameCounts(got, want) {
		t.Errorf("appends per node %v, want %v (the seed while the layout is unknown)", got, want)
	}
}

func TestRoutingLimitScanOfBucket(t *testing.T) {
	ctx := testCtx(t)
	fc := newFakeCluster(t, 2)
	fc.setLeader(3, 2)
	c := New(fc.node(1).srv.URL, WithRouting(), fastRetry)
	b := int32(3)
	rows, err := c.LimitScan(ctx, "db.t", &b, 2)
	if err != nil {
		t.Fatal(err)
	}
	if want := `[{"node":2,"i":0},{"node":2,"i":1}]`; string(rows) != want {
		t.Errorf("limit scan of bucket 3 = %s, want %s", rows, want)
	}
	rows, err = c.LimitScan(ctx, "db.t", nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := `[{"node":1,"i":0}]`; string(rows) != want {
		t.Errorf("limit scan of every bucket = %s, want %s (the seed)", rows, want)
	}
}

func TestReachable(t *testing.T) {
	r := &router{seedAddr: "10.0.0.5:9123"}
	for _, tc := range []struct{ in, want string }{
		{"10.0.0.7:9123", "10.0.0.7:9123"},
		{"node-b:9123", "node-b:9123"},
		{"http://10.0.0.7:9123", "10.0.0.7:9123"},
		{"0.0.0.0:9200", "10.0.0.5:9200"},
		{"[::]:9200", "10.0.0.5:9200"},
		{":9200", "10.0.0.5:9200"},
		{"[::1]:9200", "[::1]:9200"},
		{"10.0.0.7:0", ""},
		{"no-port", ""},
		{"", ""},
	} {
		if got := r.reachable(tc.in); got != tc.want {
			t.Errorf("reachable(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestRoutingConcurrent runs appends and fetches from many goroutines while
// the layout moves, under -race: every call must succeed.
func TestRoutingConcurrent(t *testing.T) {
	ctx := testCtx(t)
	fc := newFakeCluster(t, 3)
	for b := int32(0); b < 4; b++ {
		fc.setLeader(b, b%3+1)
	}
	c := New(fc.node(1).srv.URL, WithRoutingRefresh(0), fastRetry)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				b := int32((g + i) % 4)
				if _, err := c.AppendArrow(ctx, "db.t", b, []byte("x")); err != nil {
					errs <- err
					return
				}
				if _, err := c.Fetch(ctx, &flussv1.FetchRequest{Table: "db.t", Bucket: b}); err != nil {
					errs <- err
					return
				}
				if g == 0 {
					fc.setLeader(b, int32(i%3+1))
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	total := 0
	for _, n := range counts(fc, "Append") {
		total += n
	}
	if total != 200 {
		t.Errorf("%d appends arrived, want 200", total)
	}
}

// BenchmarkRoutedEndpoint measures what routing adds to a call: the cached
// leader lookup and the outcome callback.
func BenchmarkRoutedEndpoint(b *testing.B) {
	r := &router{
		seedAddr: "127.0.0.1:1", scheme: "http", refresh: time.Hour, now: time.Now,
		dial:   func(string) *endpoint { return &endpoint{} },
		tables: map[string]*tableRoute{"db.t": {leaders: map[bucketRef]int32{{"", 3}: 2}, expires: time.Now().Add(time.Hour)}},
		nodes:  map[int32]string{2: "127.0.0.1:2"},
		ends:   map[string]*endpoint{},
		down:   map[string]time.Time{},
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		ep, done := r.endpoint(ctx, "db.t", "", 3)
		if ep == nil {
			b.Fatal("no endpoint")
		}
		done(nil)
	}
}
