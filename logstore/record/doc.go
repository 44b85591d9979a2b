// Package record defines the data of fluss-node: table schemas and column
// types, the record batch format stored in the log and replicated through
// Raft, the Arrow IPC bodies of batches, JSON row conversion in both
// directions, batch statistics and bucketing. FORMAT.md is the byte-level
// contract; this package follows it.
//
// Invariants:
//   - A batch is self-describing in length (BatchLen) and self-checking:
//     its CRC-32C covers every byte but the CRC field itself, including the
//     leader-stamped base offset and commit timestamp (Restamp recomputes it).
//   - ParseBatch, CheckBatch, DecodeBody, DecodeJSONRows and DecodeJSON take
//     untrusted bytes: they never panic, never read past their input, and
//     bound allocations by the input size. Their errors wrap
//     ErrCorruptBatch, ErrBadBody and ErrBadRow.
//   - A batch body is exactly one encapsulated Arrow IPC record-batch
//     message: the table's schema message in front of it makes a stream any
//     Arrow reader accepts.
//   - JSON conversion is exact: decode → encode → decode is the identity for
//     every type; BIGINT and DECIMAL never pass through float64.
//   - Parsed batches alias the input (Body, string stats); records returned
//     by this package are owned by the caller and must be released.
//   - BucketOf is a pure function of the key values (FORMAT.md §3): clients
//     and every server compute the same bucket.
//   - A *Schema is immutable once used: its Arrow schema and column index
//     are cached per *Schema (ArrowSchema returns the
//     same *arrow.Schema every time; replacing Columns gives a fresh cache
//     entry, editing a Column in place is not supported).
//   - Bodies of flat columns are written by a direct encoder (plainipc.go):
//     a valid Arrow IPC record-batch message, byte layout not identical to
//     arrow-go's; anything else goes through arrow-go's writer.
//   - A batch encoded from decoded JSON rows (JSONRows.AppendBatch) is byte
//     for byte the batch of the record those rows make (AppendRecordBatch):
//     both compute stats from column buffers (bufferStats) and write the
//     same message.
package record
