package arrowipc

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// flatFields are one field of every flat type the project uses.
var flatFields = []arrow.Field{
	{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "i8", Type: arrow.PrimitiveTypes.Int8, Nullable: true},
	{Name: "i16", Type: arrow.PrimitiveTypes.Int16, Nullable: true},
	{Name: "i32", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "i64", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "f32", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
	{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "dec", Type: &arrow.Decimal128Type{Precision: 18, Scale: 4}, Nullable: true},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "bin", Type: arrow.BinaryTypes.Binary, Nullable: true},
	{Name: "d32", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
	{Name: "t32", Type: arrow.FixedWidthTypes.Time32ms, Nullable: true},
	{Name: "t64", Type: arrow.FixedWidthTypes.Time64us, Nullable: true},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true},
	{Name: "tsltz", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}, Nullable: false},
}

// nestedFields exercise the recursive walk.
var nestedFields = []arrow.Field{
	{Name: "st", Type: arrow.StructOf(
		arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		arrow.Field{Name: "y", Type: arrow.BinaryTypes.String, Nullable: true},
	), Nullable: true},
	{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
	{Name: "n", Type: arrow.Null, Nullable: true},
	{Name: "ls", Type: arrow.LargeListOf(arrow.BinaryTypes.String), Nullable: true},
	{Name: "fsl", Type: arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Int16), Nullable: true},
	{Name: "m", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Float64), Nullable: true},
	{Name: "i", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
}

// randomRecord builds a record of rows random rows; nullable fields get
// about nullPct% nulls.
func randomRecord(t testing.TB, rng *rand.Rand, schema *arrow.Schema, rows, nullPct int) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i, f := range schema.Fields() {
		fillRandom(t, rng, b.Field(i), f.Type, f.Nullable, rows, nullPct)
	}
	return b.NewRecordBatch()
}

func randString(rng *rand.Rand) string {
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
	n := rng.IntN(12)
	var buf [12]byte
	for i := range n {
		buf[i] = letters[rng.IntN(len(letters))]
	}
	return string(buf[:n])
}

func fillRandom(t testing.TB, rng *rand.Rand, bld array.Builder, dt arrow.DataType, nullable bool, rows, nullPct int) {
	t.Helper()
	for range rows {
		if nullable && rng.IntN(100) < nullPct {
			bld.AppendNull()
			continue
		}
		switch b := bld.(type) {
		case *array.BooleanBuilder:
			b.Append(rng.IntN(2) == 0)
		case *array.Int8Builder:
			b.Append(int8(rng.Uint32()))
		case *array.Int16Builder:
			b.Append(int16(rng.Uint32()))
		case *array.Int32Builder:
			b.Append(int32(rng.Uint32()))
		case *array.Int64Builder:
			b.Append(int64(rng.Uint64()))
		case *array.Float32Builder:
			b.Append(rng.Float32() * 1000)
		case *array.Float64Builder:
			b.Append(rng.NormFloat64() * 1e6)
		case *array.Decimal128Builder:
			b.Append(decimal128.FromI64(rng.Int64N(1e15)))
		case *array.StringBuilder:
			b.Append(randString(rng))
		case *array.BinaryBuilder:
			b.Append([]byte(randString(rng)))
		case *array.Date32Builder:
			b.Append(arrow.Date32(rng.Int32N(30000)))
		case *array.Time32Builder:
			b.Append(arrow.Time32(rng.Int32N(86400000)))
		case *array.Time64Builder:
			b.Append(arrow.Time64(rng.Int64N(86400000000)))
		case *array.TimestampBuilder:
			b.Append(arrow.Timestamp(rng.Int64N(1 << 50)))
		case *array.NullBuilder:
			b.AppendNull()
		case *array.StructBuilder:
			b.Append(true)
			st := dt.(*arrow.StructType)
			for i, f := range st.Fields() {
				fillRandom(t, rng, b.FieldBuilder(i), f.Type, f.Nullable, 1, nullPct)
			}
		case *array.ListBuilder:
			b.Append(true)
			fillRandom(t, rng, b.ValueBuilder(), dt.(*arrow.ListType).Elem(), true, rng.IntN(4), nullPct)
		case *array.LargeListBuilder:
			b.Append(true)
			fillRandom(t, rng, b.ValueBuilder(), dt.(*arrow.LargeListType).Elem(), true, rng.IntN(4), nullPct)
		case *array.FixedSizeListBuilder:
			b.Append(true)
			fillRandom(t, rng, b.ValueBuilder(), dt.(*arrow.FixedSizeListType).Elem(), true, 2, nullPct)
		case *array.MapBuilder:
			b.Append(true)
			n := rng.IntN(3)
			for j := range n {
				b.KeyBuilder().(*array.StringBuilder).Append(fmt.Sprintf("k%d", j))
			}
			fillRandom(t, rng, b.ItemBuilder(), arrow.PrimitiveTypes.Float64, true, n, nullPct)
		default:
			t.Fatalf("fillRandom: no generator for %T", bld)
		}
	}
}

type compression struct {
	name string
	opts []ipc.Option
}

var compressions = []compression{
	{"none", nil},
	{"lz4", []ipc.Option{ipc.WithLZ4()}},
	{"zstd", []ipc.Option{ipc.WithZstd()}},
}

// writeStream writes recs with arrow-go's writer.
func writeStream(t testing.TB, schema *arrow.Schema, opts []ipc.Option, recs ...arrow.RecordBatch) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, append([]ipc.Option{ipc.WithSchema(schema)}, opts...)...)
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatalf("arrow-go write: %v", err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatalf("arrow-go close: %v", err)
	}
	return buf.Bytes()
}

// readStream decodes a stream with arrow-go's reader.
func readStream(t testing.TB, stream []byte) (*arrow.Schema, []arrow.RecordBatch) {
	t.Helper()
	r, err := ipc.NewReader(bytes.NewReader(stream))
	if err != nil {
		t.Fatalf("arrow-go reader: %v", err)
	}
	defer r.Release()
	var recs []arrow.RecordBatch
	for r.Next() {
		rec := r.RecordBatch()
		rec.Retain()
		recs = append(recs, rec)
	}
	if err := r.Err(); err != nil {
		t.Fatalf("arrow-go read: %v", err)
	}
	return r.Schema(), recs
}

// toLegacy re-frames a modern message in the pre-0.15 framing: int32
// metadata length (padded so the body stays 8-aligned), no marker.
func toLegacy(t testing.TB, msg []byte) []byte {
	t.Helper()
	if le.Uint32(msg) != continuation {
		t.Fatalf("toLegacy: message is not in modern framing")
	}
	metaLen := le.Uint32(msg[4:])
	out := le.AppendUint32(nil, metaLen+4)
	out = append(out, msg[8:8+metaLen]...)
	out = append(out, 0, 0, 0, 0)
	return append(out, msg[8+metaLen:]...)
}

// msgBody returns the body of a valid message.
func msgBody(t testing.TB, msg []byte) []byte {
	t.Helper()
	m, _, _, err := parseMessage(msg)
	if err != nil {
		t.Fatalf("parse message: %v", err)
	}
	return m.body
}

// bufferLengths returns the buffer lengths listed in a batch header.
func bufferLengths(t testing.TB, msg []byte) []int64 {
	t.Helper()
	m, err := parseOne(msg, hdrRecordBatch)
	if err != nil {
		t.Fatal(err)
	}
	v, err := m.hdr.vector(rbBuffers, structSize)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int64, v.n)
	for i := range out {
		out[i] = v.i64At(i, 1)
	}
	return out
}
