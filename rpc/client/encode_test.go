package client

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/fluss-node/fluss-node/logstore/record"
	"github.com/fluss-node/fluss-node/logstore/record/arrowipc"
)

// EncodeArrowStream compresses batches of SmallBatchRows rows and more,
// and sends smaller ones as they are; either way the stream reads back as
// the record.
func TestEncodeArrowStreamSmallBatches(t *testing.T) {
	for _, rows := range []int{1, SmallBatchRows - 1, SmallBatchRows, 1000} {
		rec := record.SampleRecord(rows, 1)
		plain, err := arrowipc.EncodeStream(nil, rec, arrowipc.CodecNone, 0)
		if err != nil {
			t.Fatal(err)
		}
		got, err := EncodeArrowStream([]byte("keep"), rec, true)
		if err != nil || string(got[:4]) != "keep" {
			t.Fatalf("%d rows: %v", rows, err)
		}
		got = got[4:]
		if small := rows < SmallBatchRows; small != bytes.Equal(got, plain) {
			t.Errorf("%d rows: stream equals the uncompressed one: %v, want %v", rows, !small, small)
		}
		if rows >= SmallBatchRows && len(got) >= len(plain) {
			t.Errorf("%d rows: %d bytes compressed, %d uncompressed", rows, len(got), len(plain))
		}
		r, err := ipc.NewReader(bytes.NewReader(got))
		if err != nil {
			t.Fatalf("%d rows: %v", rows, err)
		}
		if !r.Next() || !array.RecordEqual(r.RecordBatch(), rec) {
			t.Fatalf("%d rows: the stream does not read back as the record (%v)", rows, r.Err())
		}
		r.Release()
		rec.Release()
	}
}
