package replica

import (
	"fmt"

	"github.com/hashicorp/raft"
)

// Command bytes: the first byte of the Data of every raft.LogCommand entry
// of a bucket group.
const (
	// cmdAppend is followed by one or more concatenated record batches with
	// consecutive base offsets, all stamped with one commit timestamp.
	cmdAppend byte = 1
)

// EntryOffsets is the logstore.OffsetFunc of a bucket log: it reports the
// data offsets a raft entry holds (first batch's base offset, total record
// count, max commit timestamp). ok is false for entries that hold no records
// (noop, configuration, barrier) and for malformed entries. Pure; reads
// headers only (the log frame CRC protects stored bytes).
func EntryOffsets(l *raft.Log) (base int64, count int32, maxTs int64, ok bool) {
	if l == nil || l.Type != raft.LogCommand || len(l.Data) < 2 || l.Data[0] != cmdAppend {
		return 0, 0, 0, false
	}
	first := true
	err := forEachBatch(l.Data[1:], func(h batchHeader, _ []byte) error {
		if first {
			base, maxTs, first = h.Base, h.CommitTs, false
		}
		count += h.Count
		maxTs = max(maxTs, h.CommitTs)
		return nil
	})
	if err != nil || first {
		return 0, 0, 0, false
	}
	return base, count, maxTs, true
}

// forEachBatch calls fn for each batch of the concatenation b, in order. The
// batch slice aliases b. It stops at the first error (fn's or a malformed
// header).
func forEachBatch(b []byte, fn func(h batchHeader, batch []byte) error) error {
	for pos := 0; pos < len(b); {
		h, n, err := peekBatch(b[pos:])
		if err != nil {
			return fmt.Errorf("batch at byte %d of entry: %w", pos, err)
		}
		if err := fn(h, b[pos:pos+n]); err != nil {
			return err
		}
		pos += n
	}
	return nil
}
