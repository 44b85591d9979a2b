package arrowipc

import (
	"bytes"
	"errors"
	"flag"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

var seedFlag = flag.Uint64("seed", 0, "random seed for the randomized tests (0: time-based)")

func testSeed(t *testing.T) uint64 {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed=%d)", seed, seed)
	return seed
}

// randomKeep picks a random ascending subset of [0, n).
func randomKeep(rng *rand.Rand, n int) []int {
	keep := []int{}
	for i := range n {
		if rng.IntN(2) == 0 {
			keep = append(keep, i)
		}
	}
	return keep
}

func projectSchema(s *arrow.Schema, keep []int) *arrow.Schema {
	fields := make([]arrow.Field, len(keep))
	for i, k := range keep {
		fields[i] = s.Field(k)
	}
	md := s.Metadata()
	return arrow.NewSchema(fields, &md)
}

func projectRecord(t *testing.T, rec arrow.RecordBatch, keep []int) arrow.RecordBatch {
	cols := make([]arrow.Array, len(keep))
	for i, k := range keep {
		cols[i] = rec.Column(k)
	}
	return array.NewRecordBatch(projectSchema(rec.Schema(), keep), cols, rec.NumRows())
}

// TestProjectMatchesArrowGo is the main property: for random records of every
// supported type with nulls, every compression and random column subsets,
// arrow-go decodes the projected message (with the projected schema) to
// exactly the selected columns, and the projected body is byte-identical to
// arrow-go's own encoding of the projected record (so nothing was re-encoded
// and only the kept buffers were copied).
func TestProjectMatchesArrowGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 1))
	schemas := []struct {
		name   string
		fields []arrow.Field
	}{
		{"flat", flatFields},
		{"nested", nestedFields},
	}
	for _, sc := range schemas {
		for _, c := range compressions {
			t.Run(sc.name+"/"+c.name, func(t *testing.T) {
				schema := arrow.NewSchema(sc.fields, nil)
				for iter := range 12 {
					rows := []int{0, 1, 7, 100, 1000}[rng.IntN(5)]
					rec := randomRecord(t, rng, schema, rows, rng.IntN(60))
					stream := writeStream(t, schema, c.opts, rec)
					schemaMsg, batches, err := SplitStream(stream)
					if err != nil {
						t.Fatalf("SplitStream: %v", err)
					}
					layout, err := LayoutOf(schemaMsg)
					if err != nil {
						t.Fatalf("LayoutOf: %v", err)
					}
					keep := randomKeep(rng, len(sc.fields))
					if iter == 0 {
						keep = []int{} // no columns at all
					} else if iter == 1 {
						keep = []int{0, len(sc.fields) - 1}
					}
					dst := []byte("prefix")
					out, err := Project(dst, batches[0], keep, layout)
					if err != nil {
						t.Fatalf("Project(keep=%v): %v", keep, err)
					}
					if string(out[:6]) != "prefix" {
						t.Fatalf("Project clobbered dst's prefix: %q", out[:6])
					}
					projected := out[6:]
					// Into a reused buffer full of garbage: same bytes (padding is zeroed).
					dirty := bytes.Repeat([]byte{0xAA}, len(projected)+64)
					again, err := Project(dirty[:0], batches[0], keep, layout)
					if err != nil || !bytes.Equal(again, projected) {
						t.Fatalf("Project into a dirty buffer differs (err %v)", err)
					}
					if n, err := BatchLength(projected); err != nil || n != int64(rows) {
						t.Fatalf("BatchLength(projected) = %d, %v; want %d", n, err, rows)
					}

					want := projectRecord(t, rec, keep)
					psMsg, err := SchemaMessage(want.Schema())
					if err != nil {
						t.Fatalf("SchemaMessage: %v", err)
					}
					gotSchema, recs := readStream(t, AppendStream(nil, psMsg, projected))
					if !gotSchema.Equal(want.Schema()) {
						t.Fatalf("schema = %v, want %v", gotSchema, want.Schema())
					}
					if len(recs) != 1 {
						t.Fatalf("decoded %d records, want 1", len(recs))
					}
					if !array.RecordEqual(recs[0], want) {
						t.Fatalf("keep=%v rows=%d: decoded record differs from the selected columns", keep, rows)
					}

					// Byte-for-byte: arrow-go's own encoding of the projected
					// record has the same body (same buffers, same compressed bytes).
					_, refBatches, err := SplitStream(writeStream(t, want.Schema(), c.opts, want))
					if err != nil {
						t.Fatalf("SplitStream(reference): %v", err)
					}
					if !bytes.Equal(msgBody(t, projected), msgBody(t, refBatches[0])) {
						t.Fatalf("keep=%v: projected body (%d bytes) differs from arrow-go's (%d bytes)",
							keep, len(msgBody(t, projected)), len(msgBody(t, refBatches[0])))
					}
					// Only the kept buffers: body = sum of their padded lengths.
					lens := bufferLengths(t, batches[0])
					var wantBody int64
					for _, k := range keep {
						_, _, from, to := layout.Span(k)
						for _, n := range lens[from:to] {
							wantBody += pad8(n)
						}
					}
					if got := int64(len(msgBody(t, projected))); got != wantBody {
						t.Fatalf("keep=%v: projected body %d bytes, want sum of kept padded buffers %d", keep, got, wantBody)
					}
					// Projecting everything reproduces the original body.
					all, err := Project(nil, batches[0], seq(len(sc.fields)), layout)
					if err != nil {
						t.Fatalf("Project(all): %v", err)
					}
					if !bytes.Equal(msgBody(t, all), msgBody(t, batches[0])) {
						t.Fatalf("Project(all) body differs from the original")
					}
					rec.Release()
					want.Release()
				}
			})
		}
	}
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// TestProjectCompressedIsNotDecompressed checks buffers are copied verbatim:
// with ZSTD the kept columns' bytes are the compressed frames from the input.
func TestProjectCompressedIsNotDecompressed(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	schema := arrow.NewSchema(flatFields, nil)
	rec := randomRecord(t, rng, schema, 1000, 10)
	defer rec.Release()
	schemaMsg, batches, err := SplitStream(writeStream(t, schema, compressions[2].opts, rec))
	if err != nil {
		t.Fatal(err)
	}
	layout, err := LayoutOf(schemaMsg)
	if err != nil {
		t.Fatal(err)
	}
	keep := []int{4, 8} // i64, s
	out, err := Project(nil, batches[0], keep, layout)
	if err != nil {
		t.Fatal(err)
	}
	body := msgBody(t, out)
	origBody := msgBody(t, batches[0])
	m, err := parseOne(batches[0], hdrRecordBatch)
	if err != nil {
		t.Fatal(err)
	}
	bufs, _ := m.hdr.vector(rbBuffers, structSize)
	p := int64(0)
	for _, k := range keep {
		_, _, from, to := layout.Span(k)
		for i := from; i < to; i++ {
			off, n := bufs.i64At(i, 0), bufs.i64At(i, 1)
			if !bytes.Equal(body[p:p+n], origBody[off:off+n]) {
				t.Fatalf("buffer %d not copied verbatim", i)
			}
			if n >= 8 && int64(le.Uint64(origBody[off:])) == int64(n-8) {
				t.Fatalf("buffer %d looks uncompressed; test data should compress", i)
			}
			p += pad8(n)
		}
	}
}

func TestProjectErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	schema := arrow.NewSchema(flatFields[:3], nil)
	rec := randomRecord(t, rng, schema, 10, 20)
	defer rec.Release()
	schemaMsg, batches, err := SplitStream(writeStream(t, schema, nil, rec))
	if err != nil {
		t.Fatal(err)
	}
	layout, err := LayoutOf(schemaMsg)
	if err != nil {
		t.Fatal(err)
	}
	otherMsg, err := SchemaMessage(arrow.NewSchema(flatFields[:4], nil))
	if err != nil {
		t.Fatal(err)
	}
	otherLayout, err := LayoutOf(otherMsg)
	if err != nil {
		t.Fatal(err)
	}
	batch := batches[0]
	tests := []struct {
		name   string
		msg    []byte
		keep   []int
		layout *Layout
		want   error
	}{
		{"descending keep", batch, []int{1, 0}, layout, ErrInvalidProjection},
		{"duplicate keep", batch, []int{1, 1}, layout, ErrInvalidProjection},
		{"keep out of range", batch, []int{3}, layout, ErrInvalidProjection},
		{"negative keep", batch, []int{-1}, layout, ErrInvalidProjection},
		{"schema message", schemaMsg, []int{0}, layout, ErrMalformed},
		{"layout of another schema", batch, []int{0}, otherLayout, ErrMalformed},
		{"truncated", batch[:len(batch)-1], []int{0}, layout, ErrMalformed},
		{"empty", nil, []int{0}, layout, ErrMalformed},
		{"eos", []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}, []int{0}, layout, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := []byte("xyz")
			out, err := Project(dst, tt.msg, tt.keep, tt.layout)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Project error = %v, want %v", err, tt.want)
			}
			if string(out) != "xyz" {
				t.Fatalf("Project changed dst on error: %q", out)
			}
		})
	}
}

// TestProjectCorruptBufferRange flips a buffer offset so it points past the
// body and checks the range validation catches it.
func TestProjectCorruptBufferRange(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	schema := arrow.NewSchema(flatFields[8:9], nil) // one utf8 column
	rec := randomRecord(t, rng, schema, 50, 0)
	defer rec.Release()
	schemaMsg, batches, err := SplitStream(writeStream(t, schema, nil, rec))
	if err != nil {
		t.Fatal(err)
	}
	layout, err := LayoutOf(schemaMsg)
	if err != nil {
		t.Fatal(err)
	}
	msg := slices.Clone(batches[0])
	m, err := parseOne(msg, hdrRecordBatch)
	if err != nil {
		t.Fatal(err)
	}
	bufs, _ := m.hdr.vector(rbBuffers, structSize)
	for _, tc := range []struct {
		name     string
		off, len int64
	}{
		{"offset past body", int64(len(m.body)), 8},
		{"negative length", 0, -1},
		{"length past body", 0, int64(len(m.body)) + 1},
		{"overflowing range", 1 << 62, 1 << 62},
		{"overlap", 0, int64(len(m.body))}, // with the other buffers, sums past the body
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := slices.Clone(msg)
			p := bufs.start + 16*2 // the data buffer
			le.PutUint64(c[8+p:], uint64(tc.off))
			le.PutUint64(c[8+p+8:], uint64(tc.len))
			if _, err := Project(nil, c, []int{0}, layout); !errors.Is(err, ErrMalformed) {
				t.Fatalf("Project = %v, want ErrMalformed", err)
			}
		})
	}
}

func TestLayoutOf(t *testing.T) {
	tests := []struct {
		name      string
		fields    []arrow.Field
		wantNodes []int // per field
		wantBufs  []int
	}{
		{"flat", flatFields,
			[]int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
			[]int{2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 2, 2, 2, 2, 2}},
		// struct{int32, utf8}: 3 nodes, 1+2+3 buffers; list<int64>: 2, 2+2;
		// null: 1, 0; large_list<utf8>: 2, 2+3; fixed_size_list<int16>: 2, 1+2;
		// map<utf8,f64>: list<struct<k,v>> = 4 nodes, 2+1+3+2 buffers.
		{"nested", nestedFields, []int{3, 2, 1, 2, 2, 4, 1}, []int{6, 4, 0, 5, 3, 8, 2}},
		{"empty", nil, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, err := SchemaMessage(arrow.NewSchema(tt.fields, nil))
			if err != nil {
				t.Fatal(err)
			}
			l, err := LayoutOf(msg)
			if err != nil {
				t.Fatalf("LayoutOf: %v", err)
			}
			if l.NumFields() != len(tt.fields) {
				t.Fatalf("NumFields = %d, want %d", l.NumFields(), len(tt.fields))
			}
			var gotNodes, gotBufs []int
			for i := range l.NumFields() {
				n0, n1, b0, b1 := l.Span(i)
				gotNodes = append(gotNodes, n1-n0)
				gotBufs = append(gotBufs, b1-b0)
			}
			if !slices.Equal(gotNodes, tt.wantNodes) || !slices.Equal(gotBufs, tt.wantBufs) {
				t.Fatalf("nodes %v buffers %v, want %v %v", gotNodes, gotBufs, tt.wantNodes, tt.wantBufs)
			}
			// A legacy-framed schema message gives the same layout.
			ll, err := LayoutOf(toLegacy(t, msg))
			if err != nil || ll.NumNodes() != l.NumNodes() || ll.NumBuffers() != l.NumBuffers() {
				t.Fatalf("legacy LayoutOf = %v, %v", ll, err)
			}
		})
	}
}

func TestLayoutOfUnsupported(t *testing.T) {
	tests := []struct {
		name  string
		field arrow.Field
	}{
		{"string view", arrow.Field{Name: "sv", Type: arrow.BinaryTypes.StringView}},
		{"dense union", arrow.Field{Name: "u", Type: arrow.DenseUnionOf([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int8}}, []arrow.UnionTypeCode{0})}},
		{"run end encoded", arrow.Field{Name: "r", Type: arrow.RunEndEncodedOf(arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int64)}},
		{"dictionary inside struct", arrow.Field{Name: "s", Type: arrow.StructOf(arrow.Field{Name: "d", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, err := SchemaMessage(arrow.NewSchema([]arrow.Field{flatFields[0], tt.field}, nil))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := LayoutOf(msg); !errors.Is(err, ErrUnsupported) {
				t.Fatalf("LayoutOf = %v, want ErrUnsupported", err)
			}
		})
	}
	// A record-batch message is not a schema.
	schema := arrow.NewSchema(flatFields[:1], nil)
	rec := randomRecord(t, rand.New(rand.NewPCG(1, 1)), schema, 3, 0)
	defer rec.Release()
	_, batches, err := SplitStream(writeStream(t, schema, nil, rec))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LayoutOf(batches[0]); !errors.Is(err, ErrMalformed) {
		t.Fatalf("LayoutOf(batch) = %v, want ErrMalformed", err)
	}
}

func TestProjectNilLayout(t *testing.T) {
	for _, l := range []*Layout{nil, {}} {
		if _, err := Project(nil, nil, nil, l); !errors.Is(err, ErrInvalidProjection) {
			t.Fatalf("Project(layout %v) = %v, want ErrInvalidProjection", l, err)
		}
	}
}

// TestProjectKeepsBatchMetadata: record-batch custom metadata survives.
func TestProjectKeepsBatchMetadata(t *testing.T) {
	schema := arrow.NewSchema(flatFields[:4], nil)
	plain := randomRecord(t, rand.New(rand.NewPCG(9, 9)), schema, 30, 20)
	defer plain.Release()
	md := arrow.NewMetadata([]string{"writer", "k2"}, []string{"w-17", ""})
	rec := array.NewRecordBatchWithMetadata(schema, plain.Columns(), plain.NumRows(), md)
	defer rec.Release()
	schemaMsg, batches, err := SplitStream(writeStream(t, schema, compressions[1].opts, rec))
	if err != nil {
		t.Fatal(err)
	}
	layout, err := LayoutOf(schemaMsg)
	if err != nil {
		t.Fatal(err)
	}
	keep := []int{1, 3}
	out, err := Project(nil, batches[0], keep, layout)
	if err != nil {
		t.Fatal(err)
	}
	want := projectRecord(t, rec, keep)
	defer want.Release()
	psMsg, err := SchemaMessage(want.Schema())
	if err != nil {
		t.Fatal(err)
	}
	_, recs := readStream(t, AppendStream(nil, psMsg, out))
	if len(recs) != 1 || !array.RecordEqual(recs[0], want) {
		t.Fatalf("decoded records differ")
	}
	got, ok := recs[0].(arrow.RecordBatchWithMetadata)
	if !ok {
		t.Fatalf("decoded record %T carries no metadata", recs[0])
	}
	if !got.Metadata().Equal(md) {
		t.Fatalf("batch metadata = %v, want %v", got.Metadata(), md)
	}
}

// TestLayoutOfRefusesOverlongVectors: a schema message whose fields,
// children, custom metadata or features vector claims more elements than
// the message holds is ErrMalformed. arrow-go allocates by those lengths
// without checking them (a 600-byte message made it ask for 348 GB, a
// fatal out-of-memory), so LayoutOf must refuse every one of them before a
// client's schema reaches arrow-go.
func TestLayoutOfRefusesOverlongVectors(t *testing.T) {
	md := arrow.NewMetadata([]string{"k"}, []string{"v"})
	child := arrow.Field{Name: "c", Type: arrow.PrimitiveTypes.Int32, Metadata: md}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "s", Type: arrow.StructOf(child), Metadata: md},
	}, &md)
	msg, err := SchemaMessage(schema)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LayoutOf(msg); err != nil {
		t.Fatalf("LayoutOf of the intact message: %v", err)
	}
	m, err := parseOne(msg, hdrSchema)
	if err != nil {
		t.Fatal(err)
	}
	fields, err := m.hdr.vector(schemaFields, 4)
	if err != nil {
		t.Fatal(err)
	}
	field, err := fields.tableAt(0)
	if err != nil {
		t.Fatal(err)
	}
	children, err := field.vector(fieldChildren, 4)
	if err != nil {
		t.Fatal(err)
	}
	grandchild, err := children.tableAt(0)
	if err != nil {
		t.Fatal(err)
	}
	kvs, err := m.hdr.vector(schemaCustomMetadata, 4)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := kvs.tableAt(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		t    fbTable
		slot int
	}{
		{"schema fields", m.hdr, schemaFields},
		{"schema custom metadata", m.hdr, schemaCustomMetadata},
		{"field children", field, fieldChildren},
		{"field custom metadata", field, fieldCustomMetadata},
		{"child custom metadata", grandchild, fieldCustomMetadata},
		{"metadata key", kv, keyValueKey},
		{"metadata value", kv, keyValueValue},
		{"field name", grandchild, fieldName},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, ok, err := tc.t.deref(tc.slot)
			if err != nil || !ok {
				t.Fatalf("slot %d not present: %v", tc.slot, err)
			}
			// The tables read the flatbuffer, a subslice of msg after its
			// prefix: patch a copy of msg at the same place.
			base := cap(msg) - cap(tc.t.buf)
			bad := slices.Clone(msg)
			le.PutUint32(bad[base+int(p):], 0x7FFFFFFF)
			if _, err := LayoutOf(bad); !errors.Is(err, ErrMalformed) {
				t.Fatalf("LayoutOf with an overlong %s = %v, want ErrMalformed", tc.name, err)
			}
		})
	}
}
