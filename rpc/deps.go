package rpc

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/fluss-node/fluss-node/kvstore"
	"github.com/fluss-node/fluss-node/logstore/record"
	"github.com/fluss-node/fluss-node/logstore/record/arrowipc"
	"github.com/fluss-node/fluss-node/logstore/record/filter"
)

// extraInvalid lists the sentinels of the packages below rpc whose errors
// mean "the client's input is wrong" (→ invalid_argument).
var extraInvalid = []error{
	record.ErrBadRow, record.ErrRecordMismatch, record.ErrBadBody, record.ErrBadCompression,
	filter.ErrSyntax, filter.ErrUnknownColumn, filter.ErrType,
	arrowipc.ErrMalformed, arrowipc.ErrUnsupported,
	kvstore.ErrBadRow, kvstore.ErrNullKey, kvstore.ErrBadProperty, kvstore.ErrOverflow,
}

// appendJSONRows appends the rows sel of rec (columns cols, named names) as
// the members of an open JSON array: `{..},{..}` without brackets.
func appendJSONRows(dst []byte, rec arrow.Record, cols []int, names []string, sel []int32) []byte {
	rows := make([]int, len(sel))
	for i, r := range sel {
		rows[i] = int(r)
	}
	start := len(dst)
	dst = record.AppendJSONRows(dst, rec, 0, 0, &record.JSONOptions{Columns: cols, Names: names, Rows: rows})
	// Drop the array's brackets: "[...]" → "...".
	n := copy(dst[start:], dst[start+1:len(dst)-1])
	return dst[:start+n]
}

// splitByBucket splits rec by the hash of its key columns. The caller
// releases every returned record.
func splitByBucket(rec arrow.Record, keys []int, buckets int32) (map[int32]arrow.Record, error) {
	parts, err := record.SplitByBucket(rec, keys, buckets, memory.DefaultAllocator)
	if err != nil {
		return nil, err
	}
	out := make(map[int32]arrow.Record, len(parts))
	for b, p := range parts {
		if p != nil {
			out[int32(b)] = p
		}
	}
	return out, nil
}

// takeRows builds a record of the columns cols of rec, rows sel, with
// schema out. The caller releases it.
func takeRows(rec arrow.Record, cols []int, out *arrow.Schema, sel []int32) (arrow.Record, error) {
	idx := make([]int, len(sel))
	for i, r := range sel {
		idx[i] = int(r)
	}
	taken, err := record.TakeRows(rec, idx, memory.DefaultAllocator)
	if err != nil {
		return nil, fmt.Errorf("take rows: %v", err)
	}
	defer taken.Release()
	arrs := make([]arrow.Array, len(cols))
	for i, c := range cols {
		arrs[i] = taken.Column(c)
	}
	return array.NewRecord(out, arrs, int64(len(sel))), nil
}
