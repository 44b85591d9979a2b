package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"connectrpc.com/connect"
)

// Lookuper looks up single keys of one primary-key table for many
// goroutines at once. Lookups that arrive while MaxInflight requests are
// already out wait in a queue, and the next request carries all of them
// (up to MaxBatch keys): the batching Fluss's own client does for lookups.
// Nothing waits for a timer: a lookup that finds a free request slot goes
// out at once, alone if it is alone, so batching only happens under load,
// where it saves a request per key on both sides.
//
// A key the server refuses (invalid_argument, not_found) fails only its own
// lookup: a batch refused that way is split and its keys are sent alone.
// Every other error of a batch is every lookup's in it. A Lookuper is safe
// for concurrent use.
type Lookuper struct {
	c           *Client
	table       string
	columns     []string
	maxBatch    int
	maxInflight int

	mu       sync.Mutex
	queue    []*lookupCall
	inflight int // requests out, each sent by a goroutine holding a slot
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
}

// lookupCall is one queued lookup; done is closed once row or err is set.
type lookupCall struct {
	ctx  context.Context
	key  []byte
	row  []byte
	err  error
	done chan struct{}
}

// NewLookuper returns a Lookuper of table (db.table).
func (c *Client) NewLookuper(table string, o LookuperOptions) *Lookuper {
	if o.MaxBatch <= 0 {
		o.MaxBatch = 128
	}
	if o.MaxInflight <= 0 {
		o.MaxInflight = 2
	}
	return &Lookuper{c: c, table: table, columns: o.Columns, maxBatch: o.MaxBatch, maxInflight: o.MaxInflight}
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
	call := &lookupCall{ctx: ctx, key: bytes.Clone(key), done: make(chan struct{})}
	l.mu.Lock()
	l.queue = append(l.queue, call)
	send := l.inflight < l.maxInflight
	if send {
		l.inflight++
	}
	l.mu.Unlock()
	if send {
		l.drive(call)
	}
	select {
	case <-call.done:
		return call.row, call.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// drive holds one request slot: it sends queued batches until the queue is
// empty, or, when own is set (the caller's lookup), until own is answered;
// a queue left then is handed to a new goroutine with the slot.
func (l *Lookuper) drive(own *lookupCall) {
	for {
		l.mu.Lock()
		if len(l.queue) == 0 {
			l.inflight--
			l.mu.Unlock()
			return
		}
		if own != nil && isDone(own) {
			l.mu.Unlock()
			go l.drive(nil)
			return
		}
		n := min(len(l.queue), l.maxBatch)
		batch := l.queue[:n:n]
		l.queue = l.queue[n:]
		l.mu.Unlock()
		l.send(batch)
	}
}

func isDone(c *lookupCall) bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// send looks up batch in one request and answers every call in it.
func (l *Lookuper) send(batch []*lookupCall) {
	live := batch[:0:0]
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.finish(nil, err) // the caller is gone: not worth a key
			continue
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := batchContext(live)
	defer cancel()
	rows, err := l.lookup(ctx, live)
	if err != nil && len(live) > 1 && refusesKey(err) {
		// One key may have spoiled the batch: ask for each alone.
		for _, c := range live {
			rows, err := l.lookup(ctx, []*lookupCall{c})
			if err != nil {
				c.finish(nil, err)
				continue
			}
			c.finish(rows[0], nil)
		}
		return
	}
	for i, c := range live {
		if err != nil {
			c.finish(nil, err)
			continue
		}
		c.finish(rows[i], nil)
	}
}

// lookup sends one Lookup of calls' keys and returns one row per key (nil
// for null).
func (l *Lookuper) lookup(ctx context.Context, calls []*lookupCall) ([][]byte, error) {
	size := 2
	for _, c := range calls {
		size += len(c.key) + 1
	}
	keys := make([]byte, 0, size)
	keys = append(keys, '[')
	for i, c := range calls {
		if i > 0 {
			keys = append(keys, ',')
		}
		keys = append(keys, c.key...)
	}
	keys = append(keys, ']')
	out, err := l.c.Lookup(ctx, l.table, keys, l.columns)
	if err != nil {
		return nil, err
	}
	var rows []json.RawMessage
	if err := json.Unmarshal(out, &rows); err != nil {
		return nil, fmt.Errorf("lookup response: %w", err)
	}
	if len(rows) != len(calls) {
		return nil, fmt.Errorf("lookup response has %d rows for %d keys", len(rows), len(calls))
	}
	res := make([][]byte, len(rows))
	for i, r := range rows {
		if string(r) != "null" {
			res[i] = r
		}
	}
	return res, nil
}

// refusesKey reports whether err is the server refusing something in the
// request (a key) rather than failing to serve it.
func refusesKey(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeInvalidArgument, connect.CodeNotFound, connect.CodeFailedPrecondition:
		return true
	}
	return false
}

// batchContext bounds a batch request by the latest deadline among its
// callers, or none when one has none: a caller that gives up early only
// stops waiting; it does not cut the others' request short.
func batchContext(calls []*lookupCall) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, c := range calls {
		d, ok := c.ctx.Deadline()
		if !ok {
			return context.WithCancel(context.Background())
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(context.Background(), latest)
}

func (c *lookupCall) finish(row []byte, err error) {
	c.row, c.err = row, err
	close(c.done)
}
