package client

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"connectrpc.com/connect"

	"github.com/fluss-node/fluss-node/proto/flussv1"
)

// lookuperFixture is a fake node holding rows id 0..n-1 and a Lookuper of
// it with one request slot whose first request the test can hold on the
// server, so that the lookups made meanwhile queue up.
type lookuperFixture struct {
	t       *testing.T
	node    *fakeNode
	l       *Lookuper
	holding chan struct{} // closed when the held request reached the server
	release chan struct{} // close to let it through
}

func newLookuperFixture(t *testing.T, n int) *lookuperFixture {
	fc := newFakeCluster(t, 1)
	f := &lookuperFixture{t: t, node: fc.node(1)}
	c := New(f.node.srv.URL, fastRetry)
	upsertNamed(t, c, n)
	f.holding, f.release = holdFirstCall(f.node, "Lookup")
	f.l = c.NewLookuper("db.t", LookuperOptions{MaxInflight: 1})
	return f
}

// upsertNamed stores rows {"id":i,"name":"ni"} for i in 0..n-1.
func upsertNamed(t *testing.T, c *Client, n int) {
	rows := []byte("[")
	for i := range n {
		if i > 0 {
			rows = append(rows, ',')
		}
		rows = fmt.Appendf(rows, `{"id":%d,"name":"n%d"}`, i, i)
	}
	if _, err := c.Upsert(testCtx(t), "db.t", append(rows, ']'), nil); err != nil {
		t.Fatal(err)
	}
}

type lookupResult struct {
	row []byte
	err error
}

// lookup starts a lookup of key in the background.
func (f *lookuperFixture) lookup(ctx context.Context, key string) <-chan lookupResult {
	ch := make(chan lookupResult, 1)
	go func() {
		row, err := f.l.Lookup(ctx, []byte(key))
		ch <- lookupResult{row, err}
	}()
	return ch
}

// holdFirst starts a lookup of id 0 and waits until the server holds it.
func (f *lookuperFixture) holdFirst() <-chan lookupResult {
	ch := f.lookup(testCtx(f.t), `{"id":0}`)
	<-f.holding
	return ch
}

// waitQueued waits until n lookups wait in the queue.
func (f *lookuperFixture) waitQueued(n int) { waitQueued(f.t, f.l.b, n) }

// keysSent returns the number of keys of each Lookup the server got.
func (f *lookuperFixture) keysSent() []int {
	var out []int
	for _, r := range f.node.got("Lookup") {
		var keys []json.RawMessage
		if err := json.Unmarshal(r.(*flussv1.LookupRequest).Keys, &keys); err != nil {
			f.t.Fatal(err)
		}
		out = append(out, len(keys))
	}
	return out
}

func wantRow(t *testing.T, got lookupResult, id int) {
	t.Helper()
	if got.err != nil {
		t.Fatalf("lookup id %d: %v", id, got.err)
	}
	want := fmt.Sprintf(`{"id":%d,"name":"n%d"}`, id, id)
	if string(got.row) != want {
		t.Fatalf("lookup id %d: row %s, want %s", id, got.row, want)
	}
}

// TestLookuperBatchesWhileBusy: lookups made while the request slot is
// taken go out together in the next request, and each caller gets its own
// row; a lone lookup goes out alone.
func TestLookuperBatchesWhileBusy(t *testing.T) {
	f := newLookuperFixture(t, 20)
	first := f.holdFirst()
	var rest []<-chan lookupResult
	for id := 1; id < 20; id++ {
		rest = append(rest, f.lookup(testCtx(t), fmt.Sprintf(`{"id":%d}`, id)))
	}
	f.waitQueued(19)
	close(f.release)
	wantRow(t, <-first, 0)
	for i, ch := range rest {
		wantRow(t, <-ch, i+1)
	}
	if got := f.keysSent(); len(got) != 2 || got[0] != 1 || got[1] != 19 {
		t.Fatalf("keys per request %v, want [1 19]", got)
	}
	// Idle again: the next lookup is sent at once, alone; a missing key
	// is a nil row.
	got := <-f.lookup(testCtx(t), `{"id":99}`)
	if got.err != nil || got.row != nil {
		t.Fatalf("lookup of a missing key: row %q err %v, want nil, nil", got.row, got.err)
	}
	if got := f.keysSent(); len(got) != 3 || got[2] != 1 {
		t.Fatalf("keys per request %v, want [1 19 1]", got)
	}
}

// TestLookuperIsolatesRefusedKey: a key the server refuses fails only its
// own lookup, not the others batched with it.
func TestLookuperIsolatesRefusedKey(t *testing.T) {
	f := newLookuperFixture(t, 5)
	first := f.holdFirst()
	a := f.lookup(testCtx(t), `{"id":1}`)
	f.waitQueued(1)
	bad := f.lookup(testCtx(t), `{"name":"no key"}`)
	f.waitQueued(2)
	b := f.lookup(testCtx(t), `{"id":2}`)
	f.waitQueued(3)
	close(f.release)
	wantRow(t, <-first, 0)
	wantRow(t, <-a, 1)
	wantRow(t, <-b, 2)
	if got := <-bad; connect.CodeOf(got.err) != connect.CodeInvalidArgument {
		t.Fatalf("refused key: row %q err %v, want invalid_argument", got.row, got.err)
	}
	// [first], [a bad b] refused, then a, bad, b alone.
	if got := f.keysSent(); fmt.Sprint(got) != "[1 3 1 1 1]" {
		t.Fatalf("keys per request %v, want [1 3 1 1 1]", got)
	}
}

// TestLookuperRejectsMalformedKey: a key that is not one JSON object is
// refused before anything is sent.
func TestLookuperRejectsMalformedKey(t *testing.T) {
	f := newLookuperFixture(t, 1)
	for _, key := range []string{``, `[{"id":1}]`, `{"id":`, `1`} {
		if _, err := f.l.Lookup(testCtx(t), []byte(key)); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("key %q: %v, want invalid_argument", key, err)
		}
	}
	if got := f.keysSent(); len(got) != 0 {
		t.Fatalf("%d requests sent for malformed keys", len(got))
	}
}

// TestLookuperCallerGivesUp: a queued caller whose context ends returns
// its error and is left out of the request; the others are answered.
func TestLookuperCallerGivesUp(t *testing.T) {
	f := newLookuperFixture(t, 3)
	first := f.holdFirst()
	ctx, cancel := context.WithCancel(testCtx(t))
	gone := f.lookup(ctx, `{"id":1}`)
	f.waitQueued(1)
	stay := f.lookup(testCtx(t), `{"id":2}`)
	f.waitQueued(2)
	cancel()
	if got := <-gone; got.err != context.Canceled {
		t.Fatalf("cancelled lookup: %v, want context.Canceled", got.err)
	}
	close(f.release)
	wantRow(t, <-first, 0)
	wantRow(t, <-stay, 2)
	if got := f.keysSent(); fmt.Sprint(got) != "[1 1]" {
		t.Fatalf("keys per request %v, want [1 1]", got)
	}
}

// TestLookuperConcurrent: many goroutines, several request slots; every
// lookup gets its own key's row (run with -race).
func TestLookuperConcurrent(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := New(fc.node(1).srv.URL, fastRetry)
	const n = 50
	upsertNamed(t, c, n)
	l := c.NewLookuper("db.t", LookuperOptions{MaxInflight: 3, MaxBatch: 4})
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 40 {
				id := (g*7 + i*3) % (n + 5) // some misses
				want := ""                  // a miss
				if id < n {
					want = fmt.Sprintf(`{"id":%d,"name":"n%d"}`, id, id)
				}
				if row, err := l.Lookup(testCtx(t), fmt.Appendf(nil, `{"id":%d}`, id)); err != nil || string(row) != want {
					t.Errorf("id %d: row %q, err %v; want %q", id, row, err, want)
					return
				}
			}
		})
	}
	wg.Wait()
	waitSlotsBack(t, l.b)
}
