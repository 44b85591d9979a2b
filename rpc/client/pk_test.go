package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"connectrpc.com/connect"

	"github.com/fluss-node/fluss-node/proto/flussv1"
)

func TestPKRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"Connect proto", nil},
		{"Connect JSON", []Option{WithJSON()}},
		{"gRPC", []Option{WithGRPC()}},
		{"proto with routing", []Option{WithRouting()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			fc := newFakeCluster(t, 1)
			c := New(fc.node(1).srv.URL, append(tc.opts, fastRetry)...)

			res, err := c.Upsert(ctx, "db.t", []byte(`[{"id":1,"name":"a"},{"id":2,"name":"b"},{"id":3,"name":"c"}]`), []string{"id", "name"})
			if err != nil {
				t.Fatal(err)
			}
			if len(res) != 1 || res[0].Count != 3 {
				t.Fatalf("upsert results %v, want one with count 3", res)
			}
			up := fc.node(1).got("Upsert")[0].(*flussv1.UpsertRequest)
			if up.Table != "db.t" || !slices.Equal(up.TargetColumns, []string{"id", "name"}) {
				t.Errorf("upsert request table %q target columns %v", up.Table, up.TargetColumns)
			}

			rows, err := c.Lookup(ctx, "db.t", []byte(`[{"id":2},{"id":9},{"id":1}]`), []string{"name"})
			if err != nil {
				t.Fatal(err)
			}
			assertJSON(t, "lookup", rows, `[{"id":2,"name":"b"},null,{"id":1,"name":"a"}]`)
			if lk := fc.node(1).got("Lookup")[0].(*flussv1.LookupRequest); !slices.Equal(lk.Columns, []string{"name"}) {
				t.Errorf("lookup columns %v, want [name]", lk.Columns)
			}

			dres, err := c.Delete(ctx, "db.t", []byte(`[{"id":2}]`))
			if err != nil {
				t.Fatal(err)
			}
			if len(dres) != 1 || dres[0].Count != 1 {
				t.Fatalf("delete results %v, want one with count 1", dres)
			}
			rows, err = c.Lookup(ctx, "db.t", []byte(`[{"id":2},{"id":3}]`), nil)
			if err != nil {
				t.Fatal(err)
			}
			assertJSON(t, "lookup after delete", rows, `[null,{"id":3,"name":"c"}]`)

			// Writes carry this client's writer id and fresh, increasing
			// sequences shared with Append.
			if _, err := c.Append(ctx, "db.t", []byte(`[{"id":1}]`)); err != nil {
				t.Fatal(err)
			}
			del := fc.node(1).got("Delete")[0].(*flussv1.DeleteRequest)
			app := fc.node(1).got("Append")[0].(*flussv1.AppendRequest)
			if up.WriterId != c.WriterID() || del.WriterId != c.WriterID() || app.WriterId != c.WriterID() {
				t.Errorf("writer ids %d %d %d, want %d", up.WriterId, del.WriterId, app.WriterId, c.WriterID())
			}
			if !(0 < up.BatchSequence && up.BatchSequence < del.BatchSequence && del.BatchSequence < app.BatchSequence) {
				t.Errorf("sequences upsert %d delete %d append %d, want increasing from 1", up.BatchSequence, del.BatchSequence, app.BatchSequence)
			}

			pres, err := c.PrefixLookup(ctx, "db.t", []byte(`[{"user_id":7},{"user_id":8}]`), []string{"n"})
			if err != nil {
				t.Fatal(err)
			}
			if len(pres) != 2 {
				t.Fatalf("prefix lookup: %d results, want 2", len(pres))
			}
			assertJSON(t, "prefix 7", pres[0].Rows, `[{"user_id":7,"n":1},{"user_id":7,"n":2}]`)
			assertJSON(t, "prefix 8", pres[1].Rows, `[{"user_id":8,"n":1},{"user_id":8,"n":2}]`)

			b := int32(2)
			rows, err = c.LimitScan(ctx, "db.t", &b, 3)
			if err != nil {
				t.Fatal(err)
			}
			assertJSON(t, "limit scan", rows, `[{"node":1,"i":0},{"node":1,"i":1},{"node":1,"i":2}]`)
			ls := fc.node(1).got("LimitScan")[0].(*flussv1.LimitScanRequest)
			if ls.Bucket == nil || *ls.Bucket != 2 || ls.Limit != 3 {
				t.Errorf("limit scan request bucket %v limit %d, want 2 and 3", ls.Bucket, ls.Limit)
			}
		})
	}
}

// assertJSON compares two JSON documents by value.
func assertJSON(t *testing.T, what string, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: reply %q is not JSON: %v", what, got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if string(gb) != string(wb) {
		t.Errorf("%s = %s, want %s", what, gb, wb)
	}
}

func TestPKRetries(t *testing.T) {
	for _, tc := range []struct {
		name      string
		procedure string
		codes     []connect.Code // injected failures, in order
		wantCalls int
		wantCode  connect.Code // 0: success
		call      func(c *Client) error
	}{
		{"upsert retried on unavailable", "Upsert", []connect.Code{connect.CodeUnavailable, connect.CodeUnavailable}, 3, 0,
			func(c *Client) error { _, err := c.Upsert(testCtx(t), "db.t", []byte(`[{"id":1}]`), nil); return err }},
		{"upsert not retried on invalid_argument", "Upsert", []connect.Code{connect.CodeInvalidArgument}, 1, connect.CodeInvalidArgument,
			func(c *Client) error { _, err := c.Upsert(testCtx(t), "db.t", []byte(`[{"id":1}]`), nil); return err }},
		{"upsert gives up after the attempts", "Upsert", slices.Repeat([]connect.Code{connect.CodeUnavailable}, 5), 5, connect.CodeUnavailable,
			func(c *Client) error { _, err := c.Upsert(testCtx(t), "db.t", []byte(`[{"id":1}]`), nil); return err }},
		{"delete retried on unavailable", "Delete", []connect.Code{connect.CodeUnavailable}, 2, 0,
			func(c *Client) error { _, err := c.Delete(testCtx(t), "db.t", []byte(`[{"id":1}]`)); return err }},
		{"delete not retried on failed_precondition", "Delete", []connect.Code{connect.CodeFailedPrecondition}, 1, connect.CodeFailedPrecondition,
			func(c *Client) error { _, err := c.Delete(testCtx(t), "db.t", []byte(`[{"id":1}]`)); return err }},
		{"lookup retried on unavailable", "Lookup", []connect.Code{connect.CodeUnavailable}, 2, 0,
			func(c *Client) error { _, err := c.Lookup(testCtx(t), "db.t", []byte(`[{"id":1}]`), nil); return err }},
		{"lookup not retried on not_found", "Lookup", []connect.Code{connect.CodeNotFound}, 1, connect.CodeNotFound,
			func(c *Client) error { _, err := c.Lookup(testCtx(t), "db.t", []byte(`[{"id":1}]`), nil); return err }},
		{"prefix lookup retried on unavailable", "PrefixLookup", []connect.Code{connect.CodeUnavailable}, 2, 0,
			func(c *Client) error {
				_, err := c.PrefixLookup(testCtx(t), "db.t", []byte(`[{"user_id":1}]`), nil)
				return err
			}},
		{"limit scan retried on unavailable", "LimitScan", []connect.Code{connect.CodeUnavailable}, 2, 0,
			func(c *Client) error { _, err := c.LimitScan(testCtx(t), "db.t", nil, 1); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := newFakeCluster(t, 1)
			n := fc.node(1)
			n.failNext(tc.procedure, tc.codes...)
			c := New(n.srv.URL, fastRetry)
			err := tc.call(c)
			switch {
			case tc.wantCode == 0 && err != nil:
				t.Fatalf("error %v, want success", err)
			case tc.wantCode != 0 && connect.CodeOf(err) != tc.wantCode:
				t.Fatalf("error %v, want code %v", err, tc.wantCode)
			}
			got := n.got(tc.procedure)
			if len(got) != tc.wantCalls {
				t.Fatalf("%d calls, want %d", len(got), tc.wantCalls)
			}
			// Every attempt of a write carries the same writer id and
			// sequence.
			type idSeq struct {
				w int64
				s int32
			}
			var seen []idSeq
			for _, r := range got {
				switch m := r.(type) {
				case *flussv1.UpsertRequest:
					seen = append(seen, idSeq{m.WriterId, m.BatchSequence})
				case *flussv1.DeleteRequest:
					seen = append(seen, idSeq{m.WriterId, m.BatchSequence})
				}
			}
			for _, s := range seen {
				if s != seen[0] || s.w != c.WriterID() || s.s == 0 {
					t.Errorf("attempt carried %+v, want writer %d and the first attempt's sequence %+v", s, c.WriterID(), seen[0])
				}
			}
		})
	}
}

func TestPKContextEndsRetries(t *testing.T) {
	fc := newFakeCluster(t, 1)
	n := fc.node(1)
	n.failNext("Upsert", slices.Repeat([]connect.Code{connect.CodeUnavailable}, 100)...)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	// The first attempt fails with unavailable and cancels the context
	// while the client would sleep ~18 minutes before the next.
	n.hook = func(string) { cancel() }
	c := New(n.srv.URL, WithRetry(Retry{Attempts: 100, Base: 1 << 40, Max: 1 << 40}))
	_, err := c.Upsert(ctx, "db.t", []byte(`[{"id":1}]`), nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want one wrapping context.Canceled", err)
	}
	if got := len(n.got("Upsert")); got != 1 {
		t.Fatalf("%d attempts, want 1", got)
	}
}

// TestConcurrentWritesKeepEachWriterInSequence: writes made from many
// goroutines through one Client reach the server, per writer id, in
// strictly increasing sequence order (what a bucket requires of a writer),
// and a client used by one goroutine keeps one writer id.
func TestConcurrentWritesKeepEachWriterInSequence(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := New(fc.node(1).srv.URL, fastRetry)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				var err error
				if i%2 == 0 {
					_, err = c.Append(testCtx(t), "db.log", fmt.Appendf(nil, `[{"g":%d,"i":%d}]`, g, i))
				} else {
					_, err = c.Upsert(testCtx(t), "db.t", fmt.Appendf(nil, `[{"id":%d}]`, g*100+i), nil)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	last := map[int64]int32{}
	node := fc.node(1)
	node.mu.Lock()
	reqs := slices.Clone(node.reqs)
	node.mu.Unlock()
	for _, r := range reqs {
		var w int64
		var s int32
		switch r := r.(type) {
		case *flussv1.AppendRequest:
			w, s = r.WriterId, r.BatchSequence
		case *flussv1.UpsertRequest:
			w, s = r.WriterId, r.BatchSequence
		default:
			continue
		}
		if s <= last[w] {
			t.Fatalf("writer %d: sequence %d arrived after %d", w, s, last[w])
		}
		last[w] = s
	}
	if len(last) < 2 || len(last) > 8 {
		t.Errorf("%d writer ids for 8 goroutines writing at once, want 2..8", len(last))
	}

	// One goroutine at a time: the same writer id, the next sequence.
	before := len(fc.node(1).got("Append"))
	for i := range 3 {
		if _, err := c.Append(testCtx(t), "db.log", fmt.Appendf(nil, `[{"seq":%d}]`, i)); err != nil {
			t.Fatal(err)
		}
	}
	got := fc.node(1).got("Append")[before:]
	a, b, d := got[0].(*flussv1.AppendRequest), got[1].(*flussv1.AppendRequest), got[2].(*flussv1.AppendRequest)
	if a.WriterId != b.WriterId || b.WriterId != d.WriterId || b.BatchSequence != a.BatchSequence+1 || d.BatchSequence != b.BatchSequence+1 {
		t.Errorf("sequential writes carried (%d,%d) (%d,%d) (%d,%d), want one writer and consecutive sequences",
			a.WriterId, a.BatchSequence, b.WriterId, b.BatchSequence, d.WriterId, d.BatchSequence)
	}
}
