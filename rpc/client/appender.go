package client

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"

	"connectrpc.com/connect"

	"github.com/fluss-node/fluss-node/proto/flussv1"
)

// Appender appends single rows to one log table for many goroutines at
// once, as Fluss's append writer does: rows appended while MaxInflight
// requests are already out wait in a queue, and the next request carries
// all of them (up to MaxBatch rows). Nothing waits for a timer: a row that
// finds a free request slot goes out at once, alone if it is alone.
//
// Append returns once its row is stored: committed by a quorum of its
// bucket's replicas, like Client.Append. Each request is one write of its
// own writer id and sequence, retried on `unavailable` with the same pair,
// so a retry never stores a row twice. Rows of one goroutine are stored in
// the order it appended them (it waits for each); rows of different
// goroutines are not ordered, and one request's rows go to one bucket
// unless the table has a bucket key. A row the server refuses
// (invalid_argument; the server stores nothing of a request it refuses)
// fails only its own Append: the request is split and its rows sent alone.
// Every other error of a request is every row's in it. An Appender is safe
// for concurrent use.
type Appender struct {
	c     *Client
	table string
	b     *batcher[[]byte, struct{}]
}

// AppenderOptions tune an Appender. Zero fields take the defaults.
type AppenderOptions struct {
	// MaxBatch is the most rows in one request. Default 256.
	MaxBatch int
	// MaxInflight is the most requests out at once; more rows queue.
	// Default 2: one request on the wire while the next one fills.
	MaxInflight int
}

// NewAppender returns an Appender of table (db.table).
func (c *Client) NewAppender(table string, o AppenderOptions) *Appender {
	a := &Appender{c: c, table: table}
	a.b = newBatcher(cmp.Or(max(o.MaxBatch, 0), 256), cmp.Or(max(o.MaxInflight, 0), 2), a.append)
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
	if _, err := a.c.AppendRequest(ctx, &flussv1.AppendRequest{Table: a.table, Rows: JSONArray(rows)}); err != nil {
		return nil, err
	}
	return make([]struct{}, len(rows)), nil
}
