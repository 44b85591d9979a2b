package client

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"connectrpc.com/connect"
)

// Lookuper looks up single keys of one primary-key table for many
// goroutines at once. Lookups that arrive while MaxInflight requests are
// already out wait in a queue, and the next request carries all of them
// (up to MaxBatch keys): the batching Fluss's own client does for lookups.
// A lookup that finds a free request slot goes out at once, alone if it is
// alone, so batching only happens under load, where it saves a request per
// key on both sides; after answering a request, a slot waits up to Linger
// for its goroutines to look up again, so that a loop of lookers shares
// one request.
//
// A key the server refuses (invalid_argument) fails only its own lookup: a
// batch refused that way is split and its keys are sent alone. Every other
// error of a batch is every lookup's in it. A Lookuper is safe for
// concurrent use.
type Lookuper struct {
	c       *Client
	table   string
	columns []string
	b       *batcher[[]byte, []byte]
}

// LookuperOptions tune a Lookuper. Zero fields take the defaults.
type LookuperOptions struct {
	// Columns projects the returned rows (nil: all columns).
	Columns []string
	// MaxBatch is the most keys in one request. Default 128 (Fluss's
	// client.lookup.max-batch-size).
	MaxBatch int
	// MaxInflight is the most requests out at once; more lookups queue.
	// Default 2: one request on the wire while the next one fills.
	MaxInflight int
	// Linger is how long a request slot, after answering a request, waits
	// for as many lookups to be made again before it sends what is queued
	// (see AppenderOptions.Linger). Default 1 ms; negative: no wait.
	Linger time.Duration
}

// NewLookuper returns a Lookuper of table (db.table).
func (c *Client) NewLookuper(table string, o LookuperOptions) *Lookuper {
	l := &Lookuper{c: c, table: table, columns: o.Columns}
	l.b = newBatcher(cmp.Or(max(o.MaxBatch, 0), 128), cmp.Or(max(o.MaxInflight, 0), 2), lingerOf(o.Linger), l.lookup)
	return l
}

// Lookup returns the current row of key, one JSON object holding the
// primary-key columns (`{"id":1}`): the row as a JSON object, or nil when
// the key has no row.
func (l *Lookuper) Lookup(ctx context.Context, key []byte) ([]byte, error) {
	key = bytes.TrimSpace(key)
	if len(key) == 0 || key[0] != '{' || !json.Valid(key) {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("lookup key %q: want one JSON object of primary-key columns", key))
	}
	// Copied: a caller whose context ends returns while its key may still
	// wait in the queue, and may reuse its buffer.
	return l.b.do(ctx, bytes.Clone(key))
}

// lookup sends one Lookup of keys and returns one row per key (nil for
// null).
func (l *Lookuper) lookup(ctx context.Context, keys [][]byte) ([][]byte, error) {
	out, err := l.c.Lookup(ctx, l.table, JSONArray(keys), l.columns)
	if err != nil {
		return nil, err
	}
	rows, err := splitJSONArray(out)
	if err != nil {
		return nil, fmt.Errorf("lookup response: %w", err)
	}
	for i, r := range rows {
		if string(r) == "null" {
			rows[i] = nil
		}
	}
	return rows, nil
}
