// Package arrowipc reads and rewrites raw Arrow IPC messages without decoding
// their columns, so the fetch path can prune columns of stored, possibly
// compressed, record batches at the buffer level (DESIGN.md §7).
//
// arrow-go keeps its flatbuffer types internal, so this package carries its
// own small, bounds-checked reader of the Message, Schema, Field and
// RecordBatch flatbuffers (fb.go) and writes new RecordBatch messages with
// github.com/google/flatbuffers/go. Everything is tested against arrow-go's
// ipc reader and writer.
//
// Usage:
//
//	schemaMsg, batches, err := arrowipc.SplitStream(stream) // or SchemaMessage(schema)
//	layout, err := arrowipc.LayoutOf(schemaMsg)            // once per schema version
//	out, err = arrowipc.Project(out[:0], batches[0], []int{1, 4}, layout)
//	resp := arrowipc.AppendStream(nil, projectedSchemaMsg, out)
//
// The projected batch decodes with the schema projected the same way; build
// its message with SchemaMessage(schema with only the kept fields).
//
// Invariants:
//
//   - No function panics or reads out of bounds on arbitrary input: every
//     flatbuffer offset, vector length and buffer range is checked against
//     its message before use, nested field walks are depth- and
//     count-bounded, and errors wrap ErrMalformed, ErrUnsupported,
//     ErrTooLarge or ErrInvalidProjection.
//
//   - Project never decompresses: kept buffers are copied byte for byte with
//     the BodyCompression (codec, method) unchanged, each placed at an
//     8-aligned offset and zero-padded to a multiple of 8, so the new body
//     length is exactly the sum of the kept buffers' padded lengths. Kept field
//     nodes, the record count, the metadata version and the message's custom
//     metadata are copied unchanged. Kept dictionary batches are copied the
//     same way, with only their id renumbered.
//
//   - Project needs each message's buffer lengths to sum to at most its body
//     length (true for every honest writer: buffers do not overlap), so its
//     output is never larger than its input plus 7 bytes per buffer and a
//     rebuilt flatbuffer header per message.
//
//   - Output is always in the modern framing (0xFFFFFFFF, int32 metadata
//     length, flatbuffer padded so the body starts 8-aligned, body); input may
//     be modern or legacy (pre-0.15, without the 0xFFFFFFFF marker).
//
//   - Slices returned by SplitStream alias its input (but the bodies it
//     assembles for streams with dictionaries, at most twice the stream
//     plus 16 MiB in all); Project and AppendStream append to the caller's
//     buffer; Layout is immutable and safe for concurrent use.
//
//   - Compress and Decompress convert a batch body between
//     uncompressed and Arrow BodyCompression (LZ4_FRAME or ZSTD, method
//     BUFFER) with process-wide codecs safe for concurrent use (a zstd
//     encoder per speed used through EncodeAll, one zstd decoder used
//     through DecodeAll, pooled LZ4 frame writers and readers): no codec is
//     built or reset per buffer. Field nodes, record count, version and
//     custom metadata are kept; buffers are re-laid out 8-aligned. The zstd
//     encoders entropy-code the literals of blocks without matches at every
//     level, as the reference zstd does. CompressStream and EncodeStream do
//     the same for a whole stream, for producers (the Go client).
//
//   - Decompress never allocates or decodes more than its limit: declared
//     uncompressed sizes are summed against it, and checked against the
//     codec's maximum expansion of the stored bytes, before anything is
//     allocated, and every buffer must decode to exactly its declared size.
//
// Supported field types: Null, Bool, Int, FloatingPoint, Decimal, Date, Time,
// Timestamp, Interval, Duration, FixedSizeBinary, Binary, Utf8, LargeBinary,
// LargeUtf8, and nested List, LargeList, FixedSizeList, Map and Struct (a
// top-level field spans all of its descendants' nodes and buffers), and
// top-level dictionary-encoded fields.
//
// A batch body is a record-batch message after the dictionary batches of
// its dictionary-encoded fields, if any (logstore/record/FORMAT.md):
// Compress, Decompress, Project and BatchLength take bodies, and SplitStream
// returns one self-contained body per record batch of a stream. Delta
// dictionaries, dictionaries nested in other fields, tensors, unions,
// run-end encoded and view types, and big-endian schemas fail with
// ErrUnsupported.
package arrowipc
