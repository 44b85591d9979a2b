package arrowipc

import (
	"bytes"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

const (
	continuation = 0xFFFFFFFF

	// Message.header union tags (Message.fbs MessageHeader).
	hdrSchema          = 1
	hdrDictionaryBatch = 2
	hdrRecordBatch     = 3
	hdrTensor          = 4
	hdrSparseTensor    = 5

	// Message table slots.
	msgVersion        = 0
	msgHeaderType     = 1
	msgHeader         = 2
	msgBodyLength     = 3
	msgCustomMetadata = 4

	// DictionaryBatch table slots.
	dbID      = 0
	dbData    = 1
	dbIsDelta = 2
)

var headerNames = [...]string{"NONE", "Schema", "DictionaryBatch", "RecordBatch", "Tensor", "SparseTensor"}

func headerName(h uint8) string {
	if int(h) < len(headerNames) {
		return headerNames[h]
	}
	return fmt.Sprintf("header type %d", h)
}

// message is one parsed encapsulated message. Its slices alias the input.
type message struct {
	raw     []byte // the whole framed message: prefix, metadata, body
	body    []byte
	msg     fbTable // root Message table
	version int16
	hdrType uint8
	hdr     fbTable // the header table (Schema, RecordBatch, ...)
}

// parseMessage parses the encapsulated message at the start of b. It reports
// eos for an end-of-stream marker (modern or legacy) and n, the bytes used.
func parseMessage(b []byte) (m message, n int, eos bool, err error) {
	if len(b) < 4 {
		return m, 0, false, fmt.Errorf("%w: %d bytes is too short for a message prefix", ErrMalformed, len(b))
	}
	prefix := 4
	metaLen := int64(int32(le.Uint32(b)))
	if le.Uint32(b) == continuation {
		if len(b) < 8 {
			return m, 0, false, fmt.Errorf("%w: continuation marker without a metadata length", ErrMalformed)
		}
		prefix = 8
		metaLen = int64(int32(le.Uint32(b[4:])))
	}
	if metaLen == 0 {
		return m, prefix, true, nil
	}
	if metaLen < 4 || metaLen > int64(len(b)-prefix) {
		return m, 0, false, fmt.Errorf("%w: metadata length %d with %d bytes left", ErrMalformed, metaLen, len(b)-prefix)
	}
	metaEnd := prefix + int(metaLen)
	m.msg, err = fbRoot(b[prefix:metaEnd])
	if err != nil {
		return m, 0, false, fmt.Errorf("message: %w", err)
	}
	if m.version, err = m.msg.i16(msgVersion, 0); err != nil {
		return m, 0, false, fmt.Errorf("message version: %w", err)
	}
	if m.hdrType, err = m.msg.u8(msgHeaderType, 0); err != nil {
		return m, 0, false, fmt.Errorf("message header type: %w", err)
	}
	bodyLen, err := m.msg.i64(msgBodyLength, 0)
	if err != nil {
		return m, 0, false, fmt.Errorf("message body length: %w", err)
	}
	if bodyLen < 0 || bodyLen > int64(len(b)-metaEnd) {
		return m, 0, false, fmt.Errorf("%w: body length %d with %d bytes left", ErrMalformed, bodyLen, len(b)-metaEnd)
	}
	var ok bool
	m.hdr, ok, err = m.msg.table(msgHeader)
	if err != nil {
		return m, 0, false, fmt.Errorf("message header: %w", err)
	}
	if !ok {
		return m, 0, false, fmt.Errorf("%w: message without a header", ErrMalformed)
	}
	n = metaEnd + int(bodyLen)
	m.raw = b[:n:n]
	m.body = b[metaEnd:n:n]
	return m, n, false, nil
}

// parseOne parses a single message and checks its header type.
func parseOne(b []byte, want uint8) (message, error) {
	m, _, eos, err := parseMessage(b)
	if err != nil {
		return m, err
	}
	if eos {
		return m, fmt.Errorf("%w: end-of-stream marker where a %s message was expected", ErrMalformed, headerName(want))
	}
	if m.hdrType != want {
		return m, unexpectedHeader(m.hdrType, want)
	}
	return m, nil
}

func unexpectedHeader(got, want uint8) error {
	switch got {
	case hdrTensor, hdrSparseTensor:
		return fmt.Errorf("%w: %s messages (want %s)", ErrUnsupported, headerName(got), headerName(want))
	}
	return fmt.Errorf("%w: got a %s message, want %s", ErrMalformed, headerName(got), headerName(want))
}

// SplitStream splits an Arrow IPC stream into its schema message and one
// batch body per record batch. Both the modern framing (0xFFFFFFFF, int32
// metadata length) and the pre-0.15 legacy framing (int32 metadata length
// only) are accepted, per message. Splitting stops at an end-of-stream
// marker or at the end of input; bytes after the marker are ignored.
//
// A stream without dictionary batches yields the record-batch messages
// themselves, aliasing stream. With dictionary batches, each body is made
// self-contained: the dictionaries in force at its record batch (the last
// batch of each id so far, in the order the ids first appeared, modern
// framing) followed by the record-batch message, in a new slice, in all at
// most twice the stream's size plus 16 MiB (else ErrTooLarge); delta
// dictionary batches fail with ErrUnsupported, as do tensors, and anything
// else that is not a valid stream with ErrMalformed.
//
// Each message's frame and flatbuffer header are checked; batch contents are
// not checked against the schema (Project and LayoutOf do that).
func SplitStream(stream []byte) (schemaMsg []byte, batches [][]byte, err error) {
	var dictIDs []int64         // in order of first appearance
	dicts := map[int64][]byte{} // the dictionary batch in force, per id
	copied, maxCopied := 0, 2*len(stream)+16<<20
	off := 0
	for i := 0; off < len(stream); i++ {
		m, n, eos, err := parseMessage(stream[off:])
		if err != nil {
			return nil, nil, fmt.Errorf("stream message %d at byte %d: %w", i, off, err)
		}
		if eos {
			break
		}
		switch {
		case i == 0 && m.hdrType == hdrSchema:
			schemaMsg = m.raw
		case i > 0 && m.hdrType == hdrRecordBatch:
			// Checked in the framing it came in: re-framing a legacy
			// message pads its metadata, which can make a flatbuffer that
			// overruns the metadata look whole.
			if _, err := viewMessage(m); err != nil {
				return nil, nil, fmt.Errorf("stream message %d at byte %d: %w", i, off, err)
			}
			if len(dictIDs) == 0 {
				batches = append(batches, m.raw)
				break
			}
			var body []byte
			for _, id := range dictIDs {
				body = appendFramed(body, dicts[id])
			}
			body = appendFramed(body, m.raw)
			// Each body repeats the dictionaries in force: bound what
			// a stream of many batches after big dictionaries costs.
			if copied += len(body); copied > maxCopied {
				return nil, nil, fmt.Errorf("stream message %d at byte %d: %w: repeating the dictionaries for each record batch takes more than %d bytes; send fewer record batches per stream, or smaller dictionaries", i, off, ErrTooLarge, maxCopied)
			}
			batches = append(batches, body)
		case i > 0 && m.hdrType == hdrDictionaryBatch:
			v, err := viewMessage(m)
			if err != nil {
				return nil, nil, fmt.Errorf("stream message %d at byte %d: %w", i, off, err)
			}
			if v.dict.isDelta {
				return nil, nil, fmt.Errorf("stream message %d at byte %d: %w: delta dictionary batch %d; send whole dictionaries (replacements)", i, off, ErrUnsupported, v.dict.id)
			}
			if _, seen := dicts[v.dict.id]; !seen {
				if len(dictIDs) == maxBodyDictionaries {
					return nil, nil, fmt.Errorf("stream message %d at byte %d: %w: more than %d dictionaries", i, off, ErrMalformed, maxBodyDictionaries)
				}
				dictIDs = append(dictIDs, v.dict.id)
			}
			dicts[v.dict.id] = m.raw
		default:
			want := uint8(hdrRecordBatch)
			if i == 0 {
				want = hdrSchema
			}
			return nil, nil, fmt.Errorf("stream message %d at byte %d: %w", i, off, unexpectedHeader(m.hdrType, want))
		}
		off += n
	}
	if schemaMsg == nil {
		return nil, nil, fmt.Errorf("%w: stream has no schema message", ErrMalformed)
	}
	return schemaMsg, batches, nil
}

// AppendStream appends to dst a complete Arrow IPC stream: schemaMsg, then
// batches, then the end-of-stream marker, always in the modern framing
// (legacy-framed messages are re-framed and re-padded to 8 bytes).
//
// The messages are not validated: pass messages obtained from SplitStream,
// Project or SchemaMessage.
func AppendStream(dst []byte, schemaMsg []byte, batches ...[]byte) []byte {
	dst = appendFramed(dst, schemaMsg)
	for _, b := range batches {
		dst = appendFramed(dst, b)
	}
	return le.AppendUint64(dst, continuation) // 0xFFFFFFFF 0x00000000
}

// appendFramed appends one message in modern framing.
func appendFramed(dst, msg []byte) []byte {
	if len(msg) < 4 || le.Uint32(msg) == continuation {
		return append(dst, msg...)
	}
	// Legacy: int32 metadata length L where 4+L is a multiple of 8. The
	// modern prefix is 4 bytes longer, so 4 zero bytes of padding after the
	// flatbuffer keep the body 8-aligned.
	metaLen := le.Uint32(msg)
	end := 4 + uint64(metaLen)
	if end > uint64(len(msg)) {
		return append(dst, msg...) // not a message; documented as caller error
	}
	dst = le.AppendUint32(dst, continuation)
	dst = le.AppendUint32(dst, metaLen+4)
	dst = append(dst, msg[4:end]...)
	dst = append(dst, 0, 0, 0, 0)
	return append(dst, msg[end:]...)
}

// SchemaMessage returns the encapsulated schema message arrow-go writes for
// s (modern framing, 8-aligned). The bytes depend only on s, so callers
// should compute them once per schema version and cache them.
func SchemaMessage(s *arrow.Schema) ([]byte, error) {
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(s))
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("arrowipc: write schema message: %w", err)
	}
	schemaMsg, _, err := SplitStream(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("arrowipc: re-read schema message: %w", err)
	}
	return schemaMsg, nil
}

// EncodeStream appends to dst rec as a complete Arrow IPC stream (schema
// message, one record batch, end-of-stream marker) with its buffers
// compressed by codec (level: zstd 1..22, 0 = 3; see Compress). arrow-go
// writes the batch uncompressed and CompressStream compresses it with the
// shared codecs: what a producer should send instead of using arrow-go's
// codec options, whose zstd encoder rebuilds its tables for every buffer
// and stores literal-only blocks raw.
func EncodeStream(dst []byte, rec arrow.RecordBatch, codec Codec, level int) ([]byte, error) {
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(rec.Schema()))
	if err := w.Write(rec); err != nil {
		return dst, fmt.Errorf("arrowipc: encode stream: %w", err)
	}
	if err := w.Close(); err != nil {
		return dst, fmt.Errorf("arrowipc: encode stream: %w", err)
	}
	if codec == CodecNone {
		return append(dst, buf.Bytes()...), nil
	}
	return CompressStream(dst, buf.Bytes(), codec, level)
}

// BatchLength returns the record count of a batch body (a record-batch
// message after its dictionary batches, if any).
func BatchLength(body []byte) (int64, error) {
	_, v, err := viewBody(body)
	if err != nil {
		return 0, fmt.Errorf("batch length: %w", err)
	}
	n := v.length
	if n < 0 {
		return 0, fmt.Errorf("batch length: %w: negative record count %d", ErrMalformed, n)
	}
	return n, nil
}
