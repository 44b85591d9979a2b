package client

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"connectrpc.com/connect"

	"github.com/fluss-node/fluss-node/proto/flussv1"
)

// appenderFixture is a fake node and an Appender of it with one request
// slot whose first request the test can hold on the server, so that the
// rows appended meanwhile queue up.
type appenderFixture struct {
	t       *testing.T
	node    *fakeNode
	a       *Appender
	holding chan struct{} // closed when the held request reached the server
	release chan struct{} // close to let it through
}

func newAppenderFixture(t *testing.T) *appenderFixture {
	f := &appenderFixture{t: t, node: newFakeCluster(t, 1).node(1)}
	f.holding, f.release = holdFirstCall(f.node, "Append")
	f.a = New(f.node.srv.URL, fastRetry).NewAppender("db.log", AppenderOptions{MaxInflight: 1})
	return f
}

// append starts an Append of row in the background.
func (f *appenderFixture) append(ctx context.Context, row string) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f.a.Append(ctx, []byte(row)) }()
	return ch
}

// holdFirst starts an Append and waits until the server holds it.
func (f *appenderFixture) holdFirst() <-chan error {
	ch := f.append(testCtx(f.t), `{"n":0}`)
	<-f.holding
	return ch
}

// waitQueued waits until n rows wait in the queue.
func (f *appenderFixture) waitQueued(n int) { waitQueued(f.t, f.a.b, n) }

// sent returns the rows of each Append the server got.
func (f *appenderFixture) sent() [][]json.RawMessage {
	var out [][]json.RawMessage
	for _, r := range f.node.got("Append") {
		var rows []json.RawMessage
		if err := json.Unmarshal(r.(*flussv1.AppendRequest).Rows, &rows); err != nil {
			f.t.Fatal(err)
		}
		out = append(out, rows)
	}
	return out
}

func rowCounts(reqs [][]json.RawMessage) string {
	var n []int
	for _, r := range reqs {
		n = append(n, len(r))
	}
	return fmt.Sprint(n)
}

// TestAppenderBatchesWhileBusy: rows appended while the request slot is
// taken go out together in the next request, each once, as one write of
// its own (writer id, sequence); a lone row goes out alone.
func TestAppenderBatchesWhileBusy(t *testing.T) {
	f := newAppenderFixture(t)
	first := f.holdFirst()
	var rest []<-chan error
	for n := 1; n < 20; n++ {
		rest = append(rest, f.append(testCtx(t), fmt.Sprintf(`{"n":%d}`, n)))
	}
	f.waitQueued(19)
	close(f.release)
	for i, ch := range append([]<-chan error{first}, rest...) {
		if err := <-ch; err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	if err := <-f.append(testCtx(t), `{"n":20}`); err != nil {
		t.Fatal(err)
	}
	reqs := f.sent()
	if got := rowCounts(reqs); got != "[1 19 1]" {
		t.Fatalf("rows per request %s, want [1 19 1]", got)
	}
	seen := map[string]bool{}
	for _, rows := range reqs {
		for _, r := range rows {
			if seen[string(r)] {
				t.Errorf("row %s sent twice", r)
			}
			seen[string(r)] = true
		}
	}
	if len(seen) != 21 {
		t.Errorf("%d distinct rows sent, want 21", len(seen))
	}
	type pair struct {
		w int64
		s int32
	}
	pairs := map[pair]bool{}
	for _, r := range f.node.got("Append") {
		req := r.(*flussv1.AppendRequest)
		p := pair{req.WriterId, req.BatchSequence}
		if req.WriterId == 0 || pairs[p] {
			t.Errorf("request with writer %d sequence %d: want a fresh non-zero pair each", p.w, p.s)
		}
		pairs[p] = true
	}
}

// TestAppenderBoundsRequestBytes: queued rows are cut into requests of at
// most MaxBatchBytes; a row larger than that goes alone.
func TestAppenderBoundsRequestBytes(t *testing.T) {
	f := newAppenderFixture(t)
	f.a = New(f.node.srv.URL, fastRetry).NewAppender("db.log", AppenderOptions{MaxInflight: 1, MaxBatchBytes: 100})
	first := f.holdFirst()
	var rest []<-chan error
	pad := func(n int) string { return fmt.Sprintf(`{"pad":"%0*d"}`, n-10, 0) } // a row of n bytes
	for _, n := range []int{40, 40, 40, 150, 30} {
		rest = append(rest, f.append(testCtx(t), pad(n)))
		f.waitQueued(len(rest))
	}
	close(f.release)
	for i, ch := range append([]<-chan error{first}, rest...) {
		if err := <-ch; err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	// [first], then 40+40 (41+41 bytes with commas; a third would pass
	// 100), 40 alone before the 150-byte row, which goes alone, then 30.
	if got := rowCounts(f.sent()); got != "[1 2 1 1 1]" {
		t.Fatalf("rows per request %s, want [1 2 1 1 1]", got)
	}
}

// TestAppenderIsolatesRefusedRow: a row the server refuses fails only its
// own Append, not the others batched with it.
func TestAppenderIsolatesRefusedRow(t *testing.T) {
	f := newAppenderFixture(t)
	first := f.holdFirst()
	a := f.append(testCtx(t), `{"n":1}`)
	f.waitQueued(1)
	bad := f.append(testCtx(t), `{"refuse":true}`)
	f.waitQueued(2)
	b := f.append(testCtx(t), `{"n":2}`)
	f.waitQueued(3)
	close(f.release)
	for _, ch := range []<-chan error{first, a, b} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	if err := <-bad; connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("refused row: %v, want invalid_argument", err)
	}
	// [first], [a bad b] refused, then a, bad, b alone.
	if got := rowCounts(f.sent()); got != "[1 3 1 1 1]" {
		t.Fatalf("rows per request %s, want [1 3 1 1 1]", got)
	}
}

// TestAppenderRejectsMalformedRow: a row that is not one JSON object is
// refused before anything is sent.
func TestAppenderRejectsMalformedRow(t *testing.T) {
	f := newAppenderFixture(t)
	for _, row := range []string{``, `[{"n":1}]`, `{"n":`, `1`} {
		if err := f.a.Append(testCtx(t), []byte(row)); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("row %q: %v, want invalid_argument", row, err)
		}
	}
	if got := f.sent(); len(got) != 0 {
		t.Fatalf("%d requests sent for malformed rows", len(got))
	}
}

// TestAppenderSpreadsOverLeaders: with routing, an Appender of a table
// without a bucket key picks each request's bucket in turn and sends it to
// that bucket's leader; for a table with a bucket key it leaves the bucket
// to the server.
func TestAppenderSpreadsOverLeaders(t *testing.T) {
	fc := newFakeCluster(t, 2)
	for b := int32(0); b < 4; b++ {
		fc.setLeader(b, 1+b%2)
	}
	c := New(fc.node(1).srv.URL, WithRouting(), fastRetry)
	a := c.NewAppender("db.t", AppenderOptions{})
	for i := range 8 {
		if err := a.Append(testCtx(t), fmt.Appendf(nil, `{"n":%d}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	got := map[int32][]int32{} // node → buckets it was sent
	for _, id := range []int32{1, 2} {
		for _, r := range fc.node(id).got("Append") {
			req := r.(*flussv1.AppendRequest)
			if req.Bucket == nil {
				t.Fatalf("node %d got an Append without a bucket", id)
			}
			got[id] = append(got[id], req.GetBucket())
		}
	}
	if fmt.Sprint(got[1]) != "[2 0 2 0]" || fmt.Sprint(got[2]) != "[1 3 1 3]" {
		t.Fatalf("buckets sent to node 1 %v and node 2 %v, want [2 0 2 0] and [1 3 1 3] (each to its leader, in turn)", got[1], got[2])
	}

	k := c.NewAppender("db.keyed", AppenderOptions{})
	if err := k.Append(testCtx(t), []byte(`{"id":1}`)); err != nil {
		t.Fatal(err)
	}
	reqs := fc.node(1).got("Append")
	if last := reqs[len(reqs)-1].(*flussv1.AppendRequest); last.Table != "db.keyed" || last.Bucket != nil {
		t.Fatalf("append to a table with a bucket key: table %s bucket %v, want db.keyed and no bucket", last.Table, last.Bucket)
	}
}
