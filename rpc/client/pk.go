package client

import (
	"context"

	"github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/proto/flussv1/flussv1connect"
)

// ---------------------------------------------------------------- primary-key tables

// Upsert inserts or updates rows, a JSON array of objects
// (`[{"id":1,"name":"a"}]`), in a primary-key table. With targetColumns
// (which must include the primary key) only those columns are written: a
// partial update. The write carries a writer id of this client and its
// next batch sequence (withWriter) and is retried on `unavailable` with the
// same pair, so the server merges it once however often it is sent.
func (c *Client) Upsert(ctx context.Context, table string, rowsJSON []byte, targetColumns []string) (out []*flussv1.WriteResult, err error) {
	err = c.withWriter(func(id int64, seq int32) error {
		req := &flussv1.UpsertRequest{Table: table, Rows: rowsJSON, TargetColumns: targetColumns, WriterId: id, BatchSequence: seq}
		res, err := retried(ctx, c, c.writeAny, flussv1connect.WriteServiceClient.Upsert, req)
		out = res.GetResults()
		return err
	})
	return out, err
}

// Delete deletes the rows of keys, a JSON array of objects holding the
// primary-key columns (`[{"id":1}]`), from a primary-key table. Like Upsert
// it carries a writer id and its next batch sequence and is retried on
// `unavailable` with the same pair.
func (c *Client) Delete(ctx context.Context, table string, keysJSON []byte) (out []*flussv1.WriteResult, err error) {
	err = c.withWriter(func(id int64, seq int32) error {
		req := &flussv1.DeleteRequest{Table: table, Keys: keysJSON, WriterId: id, BatchSequence: seq}
		res, err := retried(ctx, c, c.writeAny, flussv1connect.WriteServiceClient.Delete, req)
		out = res.GetResults()
		return err
	})
	return out, err
}

// Lookup reads the current rows of keys, a JSON array of primary-key
// objects, and returns a JSON array with one entry per key in key order:
// the row (only columns, if given) or null where the key has no row. The
// returned slice is the caller's.
func (c *Client) Lookup(ctx context.Context, table string, keysJSON []byte, columns []string) ([]byte, error) {
	res, err := retried(ctx, c, c.readAny, flussv1connect.ReadServiceClient.Lookup, &flussv1.LookupRequest{Table: table, Keys: keysJSON, Columns: columns})
	return res.GetRows(), err
}

// PrefixLookup reads every row whose bucket-key columns equal one of
// prefixesJSON (a JSON array of objects); the table's bucket key must be a
// prefix of its primary key. The results are in prefix order, each a JSON
// array of rows.
func (c *Client) PrefixLookup(ctx context.Context, table string, prefixesJSON []byte, columns []string) ([]*flussv1.PrefixLookupResult, error) {
	res, err := retried(ctx, c, c.readAny, flussv1connect.ReadServiceClient.PrefixLookup,
		&flussv1.PrefixLookupRequest{Table: table, Prefixes: prefixesJSON, Columns: columns})
	return res.GetResults(), err
}

// LimitScan returns up to limit rows as a JSON array: the current values of
// a primary-key table, the latest rows of a log table. bucket nil reads
// every bucket; a bucket is read from its leader when routing is on.
func (c *Client) LimitScan(ctx context.Context, table string, bucket *int32, limit int32) ([]byte, error) {
	return c.LimitScanRequest(ctx, &flussv1.LimitScanRequest{Table: table, Bucket: bucket, Limit: limit})
}

// LimitScanRequest is LimitScan with every field of the request (a
// partitioned table's partition).
func (c *Client) LimitScanRequest(ctx context.Context, req *flussv1.LimitScanRequest) ([]byte, error) {
	pick := func(ctx context.Context) (flussv1connect.ReadServiceClient, func(error)) {
		if req.Bucket != nil {
			return c.readFor(ctx, req.GetTable(), req.GetPartition(), req.GetBucket())
		}
		return c.readAny(ctx)
	}
	res, err := retried(ctx, c, pick, flussv1connect.ReadServiceClient.LimitScan, req)
	return res.GetRows(), err
}
