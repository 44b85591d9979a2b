package replica

import (
	"encoding/binary"
	"fmt"

	"github.com/fluss-node/fluss-node/logstore/record"
)

// The replica reads a few fixed header fields of record batches directly
// (logstore/record/FORMAT.md: little-endian, fixed offsets) so that the FSM
// and the OffsetFunc never parse stats or check CRCs on the apply path;
// TestHeaderOffsetsMatchRecord pins these offsets to record.AppendBatch.
const (
	offBaseOffset = 12 // i64
	offCount      = 20 // i32
	offCommitTs   = 24 // i64
	offWriterID   = 32 // i64
	offSeq        = 40 // i32
	offSchemaID   = 44 // i32
)

// batchHeader holds the header fields the replica uses.
type batchHeader struct {
	Base     int64
	Count    int32
	CommitTs int64
	WriterID int64
	Seq      int32
	SchemaID int32
}

// peekBatch reads the header of the batch at the start of b without checking
// its CRC and returns the batch's total length. It never panics.
func peekBatch(b []byte) (batchHeader, int, error) {
	n, err := record.BatchLen(b)
	if err != nil {
		return batchHeader{}, 0, err
	}
	if n > len(b) {
		return batchHeader{}, 0, fmt.Errorf("%w: batch is %d bytes, only %d present", record.ErrTruncatedBatch, n, len(b))
	}
	h := batchHeader{
		Base:     int64(binary.LittleEndian.Uint64(b[offBaseOffset:])),
		Count:    int32(binary.LittleEndian.Uint32(b[offCount:])),
		CommitTs: int64(binary.LittleEndian.Uint64(b[offCommitTs:])),
		WriterID: int64(binary.LittleEndian.Uint64(b[offWriterID:])),
		Seq:      int32(binary.LittleEndian.Uint32(b[offSeq:])),
		SchemaID: int32(binary.LittleEndian.Uint32(b[offSchemaID:])),
	}
	if h.Count < 0 {
		return batchHeader{}, 0, fmt.Errorf("%w: negative record count %d", record.ErrCorruptBatch, h.Count)
	}
	return h, n, nil
}

// checkBatch fully validates one client batch (record.CheckBatch: lengths,
// CRC, stats) and returns its header and length.
func checkBatch(b []byte) (batchHeader, int, error) {
	bt, n, err := record.CheckBatch(b)
	if err != nil {
		return batchHeader{}, 0, err
	}
	return batchHeader{
		Base: bt.BaseOffset, Count: bt.RecordCount, CommitTs: bt.CommitTimestamp,
		WriterID: bt.WriterID, Seq: bt.BatchSequence, SchemaID: bt.SchemaID,
	}, n, nil
}

// stampBatch writes writer id and sequence, then base offset and commit
// timestamp (record.Restamp, which recomputes the CRC over all of them) into
// the one batch b.
func stampBatch(b []byte, base, commitTs, writerID int64, seq int32) {
	binary.LittleEndian.PutUint64(b[offWriterID:], uint64(writerID))
	binary.LittleEndian.PutUint32(b[offSeq:], uint32(seq))
	record.Restamp(b, base, commitTs)
}
