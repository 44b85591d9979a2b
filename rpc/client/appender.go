package client

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/fluss-node/fluss-node/proto/flussv1"
)

// Appender appends single rows to one log table for many goroutines at
// once, as Fluss's append writer does: rows appended while MaxInflight
// requests (default one) are already out wait in a queue, and the next
// request carries all of them (up to MaxBatch rows). A row that finds a
// free request slot goes out at once, alone if it is alone; after
// answering a request, a slot waits up to Linger for its goroutines to
// append again, so that a loop of appenders shares one request instead of
// splitting into many.
//
// Append returns once its row is stored: committed by a quorum of its
// bucket's replicas, like Client.Append. Each request is one write of its
// own writer id and sequence, retried on `unavailable` with the same pair,
// so a retry never stores a row twice. Rows of one goroutine are stored in
// the order it appended them (it waits for each); rows of different
// goroutines are not ordered, and one request's rows go to one bucket
// unless the table has a bucket key. With routing (WithRouting) and a table
// without a bucket key, the Appender picks each request's bucket itself,
// in turn, so that requests go straight to the buckets' leaders instead of
// all through the base URL's node. A row the server refuses
// (invalid_argument; the server stores nothing of a request it refuses)
// fails only its own Append: the request is split and its rows sent alone.
// Every other error of a request is every row's in it. An Appender is safe
// for concurrent use.
type Appender struct {
	c     *Client
	table string
	b     *batcher[[]byte, struct{}]

	spread atomic.Pointer[spread] // with routing: how to pick buckets; nil until learned
	next   atomic.Uint32          // the bucket turn
}

// spread is what an Appender knows of its table's buckets.
type spread struct {
	buckets int32     // buckets to pick from; 0: leave the bucket to the server
	expires time.Time // learn again at or after this time
}

// spreadFor is how long an Appender trusts what it learned of its table
// (a dropped and recreated table may have other buckets).
const spreadFor = 30 * time.Second

// AppenderOptions tune an Appender. Zero fields take the defaults.
type AppenderOptions struct {
	// MaxBatch is the most rows in one request. Default 256.
	MaxBatch int
	// MaxBatchBytes is the most bytes of rows in one request (a larger row
	// goes alone). Default 2 MiB (Fluss's client.writer.batch-size), well
	// under the server's max_batch_bytes.
	MaxBatchBytes int
	// MaxInflight is the most requests out at once; more rows queue.
	// Default 1: every goroutine appending meanwhile shares the next
	// request, and fewer, larger requests cost the servers less per row
	// (each is a raft entry). Measured with 64 appending goroutines and
	// Linger's default: 1 carries ~64 rows per request, 2 ~30, and 1
	// acknowledged more rows per second on one node (+10%) and on three
	// (+40%; docs/BENCHMARKS.md). More pays when more goroutines append
	// than MaxBatch holds, so that whole requests wait.
	MaxInflight int
	// Linger is how long a request slot, after answering a request, waits
	// for as many rows to be appended again as it answered (their
	// goroutines' next rows, when they append in a loop) before it sends
	// what is queued; it waits no longer than that. Like Kafka's
	// linger.ms, but only after a request, and not after a lone row with
	// nothing queued: a lone goroutine's rows never wait. Default 1 ms;
	// negative: no wait. (64 appending goroutines, one request out, three
	// nodes: ~45 rows per request without it, ~64 with it, and ~35% more
	// rows acknowledged per second; docs/BENCHMARKS.md.)
	Linger time.Duration
}

// defaultLinger is the Appender's and the Lookuper's default Linger.
const defaultLinger = time.Millisecond

// lingerOf maps an options' Linger to the batcher's linger.
func lingerOf(d time.Duration) time.Duration {
	if d == 0 {
		return defaultLinger
	}
	return max(d, 0)
}

// NewAppender returns an Appender of table (db.table).
func (c *Client) NewAppender(table string, o AppenderOptions) *Appender {
	a := &Appender{c: c, table: table}
	a.b = newBatcher(cmp.Or(max(o.MaxBatch, 0), 256), cmp.Or(max(o.MaxInflight, 0), 1), lingerOf(o.Linger), a.append)
	a.b.size = func(row []byte) int { return len(row) + 1 } // and its comma
	a.b.maxBytes = cmp.Or(max(o.MaxBatchBytes, 0), 2<<20)
	return a
}

// Append stores row, one JSON object (`{"id":1,"name":"a"}`), and returns
// once it is acknowledged.
func (a *Appender) Append(ctx context.Context, row []byte) error {
	row = bytes.TrimSpace(row)
	if len(row) == 0 || row[0] != '{' || !json.Valid(row) {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("append row %q: want one JSON object", row))
	}
	// Copied: a caller whose context ends returns while its row may still
	// wait in the queue, and may reuse its buffer.
	_, err := a.b.do(ctx, bytes.Clone(row))
	return err
}

// append sends rows in one Append request.
func (a *Appender) append(ctx context.Context, rows [][]byte) ([]struct{}, error) {
	req := &flussv1.AppendRequest{Table: a.table, Rows: JSONArray(rows)}
	if n := a.buckets(ctx); n > 0 {
		b := int32(a.next.Add(1) % uint32(n))
		req.Bucket = &b
	}
	if _, err := a.c.AppendRequest(ctx, req); err != nil {
		switch connect.CodeOf(err) {
		case connect.CodeNotFound, connect.CodeInvalidArgument:
			if req.Bucket != nil {
				a.spread.Store(nil) // the table may have changed: learn it again
			}
		}
		return nil, err
	}
	return make([]struct{}, len(rows)), nil
}

// buckets returns how many buckets the Appender picks from, or 0 when the
// server picks: without routing, for a table with a bucket or partition
// key, or while the table cannot be read.
func (a *Appender) buckets(ctx context.Context) int32 {
	if a.c.route == nil {
		return 0
	}
	now := a.c.route.now()
	if sp := a.spread.Load(); sp != nil && now.Before(sp.expires) {
		return sp.buckets
	}
	sp := &spread{expires: now.Add(spreadFor)}
	t, err := a.c.GetTable(ctx, a.table)
	switch {
	case err != nil:
		sp.expires = now.Add(time.Second) // try again soon
	case len(t.GetBucketKeys()) == 0 && len(t.GetPartitionKeys()) == 0:
		sp.buckets = t.GetBucketCount()
	}
	a.spread.Store(sp)
	return sp.buckets
}
