package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/fluss-node/fluss-node/logstore/record/arrowipc"
)

// ErrBadBody wraps failures to decode an Arrow body.
var ErrBadBody = errors.New("bad arrow body")

// ErrRecordMismatch reports an Arrow record that does not fit a table schema.
var ErrRecordMismatch = errors.New("record does not match the table schema")

// sliceSink is an io.Writer appending to a byte slice.
type sliceSink struct{ b []byte }

func (s *sliceSink) Write(p []byte) (int, error) {
	s.b = append(s.b, p...)
	return len(p), nil
}

// bodyEncoder is an open uncompressed arrow-go stream writer for a schema:
// its first Write emitted the schema message, every later Write emits one
// record-batch message, which EncodeBody cuts out of the sink.
type bodyEncoder struct {
	sink sliceSink
	w    *ipc.Writer
}

// encoderPools caches uncompressed stream writers per *arrow.Schema.
var encoderPools Memo[*arrow.Schema, *sync.Pool]

func encoderPool(s *arrow.Schema) *sync.Pool {
	return encoderPools.Get(s, func() *sync.Pool { return &sync.Pool{} })
}

func checkCompression(c Compression, zstdLevel int) error {
	if c > CompressionZSTD {
		return fmt.Errorf("%w: compression %d", ErrBadCompression, c)
	}
	if c == CompressionZSTD && (zstdLevel < 0 || zstdLevel > arrowipc.MaxZSTDLevel) {
		return fmt.Errorf("%w: zstd level %d, want 1..%d", ErrBadCompression, zstdLevel, arrowipc.MaxZSTDLevel)
	}
	return nil
}

// EncodeBody encodes rec as one encapsulated Arrow IPC record-batch message
// (FORMAT.md §1 Body) with its buffers compressed by c. zstdLevel is the
// table's zstd level 1..22 (0 = 3, Fluss's default), ignored unless c is
// ZSTD. arrow-go writes the message uncompressed and arrowipc.Compress
// compresses its buffers with shared codecs. The result is a fresh slice
// owned by the caller.
func EncodeBody(rec arrow.Record, c Compression, zstdLevel int) ([]byte, error) {
	return appendBody(nil, rec, c, zstdLevel, true)
}

// appendBody appends the body of rec to dst (see EncodeBody). With exact
// and dst nil, the result has no spare capacity.
func appendBody(dst []byte, rec arrow.Record, c Compression, zstdLevel int, exact bool) ([]byte, error) {
	if err := checkCompression(c, zstdLevel); err != nil {
		return dst, err
	}
	if stored := StoredSchema(rec.Schema()); stored != rec.Schema() {
		return appendDictionaryBody(dst, rec, stored, c, zstdLevel)
	}
	// Flat columns (every table type): build the message directly.
	if c == CompressionNone {
		if out, ok := appendPlainBody(dst, rec); ok {
			return out, nil
		}
	} else {
		sp := decompressScratch.Get().(*[]byte)
		plain, ok := appendPlainBody((*sp)[:0], rec)
		if ok {
			return compressPlain(dst, sp, plain, c, zstdLevel)
		}
		decompressScratch.Put(sp)
	}
	return appendArrowGoBody(dst, rec, c, zstdLevel, exact)
}

// compressPlain appends the body of compression c made from plain, an
// uncompressed message built in the scratch buffer sp (which it returns to
// decompressScratch).
func compressPlain(dst []byte, sp *[]byte, plain []byte, c Compression, zstdLevel int) ([]byte, error) {
	if dst == nil {
		dst = make([]byte, 0, len(plain)/2+256)
	}
	out, err := arrowipc.Compress(dst, plain, arrowipc.Codec(c), zstdLevel)
	*sp = plain
	if cap(plain) <= 8<<20 {
		decompressScratch.Put(sp)
	}
	if err != nil {
		return out, fmt.Errorf("encode arrow body: %w", err)
	}
	return out, nil
}

// appendArrowGoBody is appendBody with arrow-go's stream writer.
func appendArrowGoBody(dst []byte, rec arrow.Record, c Compression, zstdLevel int, exact bool) ([]byte, error) {
	pool := encoderPool(rec.Schema())
	e, _ := pool.Get().(*bodyEncoder)
	fresh := e == nil
	if fresh {
		e = &bodyEncoder{}
		e.w = ipc.NewWriter(&e.sink, ipc.WithSchema(rec.Schema()))
	}
	if err := e.w.Write(rec); err != nil {
		// A failed writer is sticky: drop it.
		return dst, fmt.Errorf("encode arrow body: %w", err)
	}
	msg := e.sink.b
	var err error
	if fresh {
		// The first Write of a stream writer emits the schema message
		// first.
		if msg, err = afterSchemaMessage(msg); err != nil {
			return dst, err
		}
	}
	switch {
	case c == CompressionNone && exact && dst == nil:
		dst = bytes.Clone(msg)
	case c == CompressionNone:
		dst = append(dst, msg...)
	default:
		if dst == nil {
			dst = make([]byte, 0, len(msg)/2+256)
		}
		dst, err = arrowipc.Compress(dst, msg, arrowipc.Codec(c), zstdLevel)
	}
	e.sink.b = e.sink.b[:0]
	// Keep big scratch buffers out of the pool.
	if cap(e.sink.b) <= 8<<20 {
		pool.Put(e)
	}
	if err != nil {
		return dst, fmt.Errorf("encode arrow body: %w", err)
	}
	return dst, nil
}

// afterSchemaMessage returns what an arrow-go stream writer wrote after
// its schema message (which has no body): its 8-byte prefix and metadata
// are skipped.
func afterSchemaMessage(stream []byte) ([]byte, error) {
	if len(stream) < 8 {
		return nil, fmt.Errorf("encode arrow body: short schema message")
	}
	skip := 8 + int(binary.LittleEndian.Uint32(stream[4:]))
	if skip > len(stream) {
		return nil, fmt.Errorf("encode arrow body: bad schema message")
	}
	return stream[skip:], nil
}

// SchemaMessage returns the encapsulated Arrow IPC schema message of
// StoredSchema(schema), the schema of bodies EncodeBody writes for records
// of schema (cached per *arrow.Schema; callers must not modify it).
func SchemaMessage(schema *arrow.Schema) []byte {
	return schemaMsgs.Get(schema, func() []byte {
		var sink sliceSink
		w := ipc.NewWriter(&sink, ipc.WithSchema(StoredSchema(schema)))
		_ = w.Close() // writes the schema message, then the 8-byte end-of-stream marker
		msg := sink.b
		if len(msg) >= 8 {
			msg = msg[:len(msg)-8]
		}
		return msg
	})
}

var schemaMsgs Memo[*arrow.Schema, []byte]

// StreamPrefix is the schema message; StreamSuffix ends an IPC stream.
// [StreamPrefix][body]…[StreamSuffix] is a complete Arrow IPC stream.
var StreamSuffix = []byte{0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0}

// MaxDecodedBody bounds the decompressed size of one body in DecodeBody:
// larger declared sizes fail before anything is decompressed.
var MaxDecodedBody int64 = arrowipc.DefaultMaxDecompressed

var decompressScratch = sync.Pool{New: func() any { return new([]byte) }}

// DecodeBody decodes a body written for schema (whose dictionary-encoded
// columns come back decoded, as schema says). The record is built with
// mem (nil = Go allocator) and owned by the caller (Release it). The body
// bytes are copied, so body may be reused afterwards.
func DecodeBody(schema *arrow.Schema, body []byte, mem memory.Allocator) (arrow.Record, error) {
	if len(body) < 8 || binary.LittleEndian.Uint32(body) != 0xFFFFFFFF {
		return nil, fmt.Errorf("%w: does not start with an Arrow IPC message", ErrBadBody)
	}
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	// Decompress with the shared codecs (bounded by MaxDecodedBody) so
	// arrow-go reads an uncompressed message and never builds a codec.
	sp := decompressScratch.Get().(*[]byte)
	defer func() {
		if cap(*sp) <= 8<<20 {
			decompressScratch.Put(sp)
		}
	}()
	plain, err := arrowipc.Decompress((*sp)[:0], body, MaxDecodedBody)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadBody, err)
	}
	*sp = plain
	rec, err := readRecord(schema, plain, mem)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadBody, err)
	}
	return rec, nil
}

// readRecord reads the one record batch message of plain with arrow-go and
// checks it. The message comes from a client: arrowipc.Decompress has
// checked its structure, and a panic arrow-go may still raise on it is an
// error, not a crash of the request.
func readRecord(schema *arrow.Schema, plain []byte, mem memory.Allocator) (rec arrow.Record, err error) {
	defer func() {
		if p := recover(); p != nil {
			if rec != nil {
				rec.Release()
			}
			rec, err = nil, fmt.Errorf("invalid record: %v", p)
		}
	}()
	stored := StoredSchema(schema)
	r, err := ipc.NewReader(io.MultiReader(bytes.NewReader(SchemaMessage(schema)), bytes.NewReader(plain)),
		ipc.WithAllocator(mem), ipc.WithSchema(stored))
	if err != nil {
		return nil, err
	}
	defer r.Release()
	if !r.Next() {
		if err := r.Err(); err != nil {
			return nil, err
		}
		return nil, errors.New("no record batch message")
	}
	rec = r.RecordBatch()
	rec.Retain()
	// arrow-go accepts columns longer than the record (it reads the first
	// NumRows values); an IPC writer never writes them, and the values past
	// the record's rows would still count in its statistics and filters.
	for i, col := range rec.Columns() {
		if int64(col.Len()) != rec.NumRows() {
			rec.Release()
			return nil, fmt.Errorf("record batch has %d rows but column %d (%s) has %d values", rec.NumRows(), i, rec.ColumnName(i), col.Len())
		}
	}
	// arrow-go does not check buffer sizes and offsets against the row
	// count: do it before anyone indexes into the arrays.
	if err := array.ValidateRecordFull(rec); err != nil {
		rec.Release()
		return nil, fmt.Errorf("invalid record: %w", err)
	}
	if stored != schema {
		plainRec, err := decodeDictionaries(rec, schema, mem)
		rec.Release()
		if err != nil {
			return nil, fmt.Errorf("invalid record: %w", err)
		}
		rec = plainRec
	}
	return rec, nil
}

// ValidateRecord checks that rec fits table schema s: the same column
// names in the same order with the same Arrow types, and no nulls in NOT
// NULL columns. Errors wrap ErrRecordMismatch and name the column.
func ValidateRecord(s *Schema, rec arrow.Record) error {
	if int(rec.NumCols()) != len(s.Columns) {
		return fmt.Errorf("%w: record has %d columns, table has %d", ErrRecordMismatch, rec.NumCols(), len(s.Columns))
	}
	rs := rec.Schema()
	for i, c := range s.Columns {
		f := rs.Field(i)
		if f.Name != c.Name {
			return fmt.Errorf("%w: column %d is named %q, table column %d is %q", ErrRecordMismatch, i, f.Name, i, c.Name)
		}
		if want := c.Type.ArrowType(); !arrow.TypeEqual(f.Type, want) {
			return fmt.Errorf("%w: column %q has Arrow type %s, %s needs %s", ErrRecordMismatch, c.Name, f.Type, c.Type, want)
		}
		if !c.Nullable {
			if n := rec.Column(i).NullN(); n > 0 {
				return fmt.Errorf("%w: column %q is NOT NULL but has %d null values", ErrRecordMismatch, c.Name, n)
			}
		}
		if c.Type.Length > 0 {
			if err := checkLengths(c, rec.Column(i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkLengths checks every value of a VARCHAR(n) or VARBINARY(n) column
// against its length.
func checkLengths(c Column, a arrow.Array) error {
	check := func(row int) string { return "" }
	switch a := a.(type) {
	case *array.String:
		check = func(row int) string { return c.Type.checkLengthString(a.Value(row)) }
	case *array.Binary:
		check = func(row int) string { return c.Type.checkLength(a.Value(row)) }
	}
	for row := range a.Len() {
		if a.IsNull(row) {
			continue
		}
		if msg := check(row); msg != "" {
			return fmt.Errorf("%w: row %d, column %q: %s", ErrRecordMismatch, row, c.Name, msg)
		}
	}
	return nil
}
