package record

import (
	"bytes"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/fluss-node/fluss-node/logstore/record/arrowipc"
)

// dictSampleSchema is SampleSchema with its two low-cardinality strings
// (and the BYTES-typed copy of none) dictionary-encoded.
func dictSampleSchema() *Schema {
	s := SampleSchema()
	s.Columns[3].Dictionary = true // event_type
	s.Columns[4].Dictionary = true // country, nullable
	return s
}

// dictSample returns n sample rows as a record of dictSampleSchema.
func dictSample(t testing.TB, s *Schema, n int, seed int64) arrow.Record {
	t.Helper()
	rec := SampleRecord(n, seed)
	defer rec.Release()
	return array.NewRecordBatch(s.ArrowSchema(), rec.Columns(), rec.NumRows())
}

func TestDictionarySchema(t *testing.T) {
	s := dictSampleSchema()
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	stored := StoredSchema(s.ArrowSchema())
	for i, f := range stored.Fields() {
		dt, ok := f.Type.(*arrow.DictionaryType)
		if ok != s.Columns[i].Dictionary {
			t.Fatalf("stored field %d (%s) is %s", i, f.Name, f.Type)
		}
		if ok && (!arrow.TypeEqual(dt.ValueType, s.Columns[i].Type.ArrowType()) || !arrow.TypeEqual(dt.IndexType, dictionaryIndexType)) {
			t.Fatalf("stored field %s is %s", f.Name, dt)
		}
	}
	if plain := SampleSchema().ArrowSchema(); StoredSchema(plain) != plain {
		t.Fatal("a schema without dictionary columns is stored as another schema")
	}

	for _, typ := range []Type{{Kind: KindInt}, {Kind: KindTimestamp, Precision: 3}, {Kind: KindDecimal, Precision: 5, Scale: 1}} {
		bad := &Schema{Columns: []Column{{Name: "c", Type: typ, Dictionary: true}}}
		if err := bad.Validate(); !errors.Is(err, ErrBadSchema) {
			t.Errorf("Validate(%+v) = %v, want ErrBadSchema", bad.Columns, err)
		}
	}
	pk := &Schema{Columns: []Column{{Name: "k", Type: Type{Kind: KindString}, Dictionary: true}, {Name: "v", Type: Type{Kind: KindBytes, Length: 8}, Nullable: true, Dictionary: true}}, PrimaryKey: []string{"k"}}
	if err := pk.Validate(); err != nil {
		t.Errorf("a primary-key table with dictionary columns: %v", err)
	}
}

// TestDictionaryBodyRoundTrip writes records of a schema with dictionary
// columns (from Arrow and from JSON) and checks the stored body: arrow-go
// reads dictionary arrays of the right values from it, DecodeBody gives the
// plain record back, and ZSTD bodies are smaller than without dictionaries.
func TestDictionaryBodyRoundTrip(t *testing.T) {
	s := dictSampleSchema()
	for _, n := range []int{0, 1, 7, 1000} {
		rec := dictSample(t, s, n, 11)
		defer rec.Release()
		for _, c := range []Compression{CompressionNone, CompressionLZ4Frame, CompressionZSTD} {
			body, err := EncodeBody(rec, c, 3)
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeBody(s.ArrowSchema(), body, nil)
			if err != nil {
				t.Fatalf("%d rows, %s: DecodeBody: %v", n, c, err)
			}
			if !array.RecordEqual(got, rec) || !got.Schema().Equal(s.ArrowSchema()) {
				t.Fatalf("%d rows, %s: decoded\n%v\nwant\n%v", n, c, got, rec)
			}
			got.Release()

			// What a client reads: dictionary arrays with the same values.
			stream := append(append(append([]byte(nil), SchemaMessage(s.ArrowSchema())...), body...), StreamSuffix...)
			r, err := ipc.NewReader(bytes.NewReader(stream))
			if err != nil {
				t.Fatal(err)
			}
			if !r.Next() {
				t.Fatalf("arrow-go read nothing: %v", r.Err())
			}
			arrowRec := r.RecordBatch()
			for _, ci := range []int{3, 4} {
				d, ok := arrowRec.Column(ci).(*array.Dictionary)
				if !ok {
					t.Fatalf("column %d read as %T", ci, arrowRec.Column(ci))
				}
				want := rec.Column(ci).(*array.String)
				dict := d.Dictionary().(*array.String)
				for row := range n {
					if d.IsNull(row) != want.IsNull(row) || (!want.IsNull(row) && dict.Value(d.GetValueIndex(row)) != want.Value(row)) {
						t.Fatalf("column %d row %d differs", ci, row)
					}
				}
			}
			r.Release()
		}

		// JSON rows are stored the same way.
		rows, err := DecodeJSON(s, SampleJSON(n, 11))
		if err != nil {
			t.Fatal(err)
		}
		raw, err := rows.AppendBatch(nil, BatchHeader{RecordCount: int32(n), SchemaID: 1}, CompressionZSTD, 3)
		rows.Release()
		if err != nil {
			t.Fatal(err)
		}
		b, _, err := ParseBatch(raw)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := arrowipc.LayoutOf(SchemaMessage(s.ArrowSchema())); err != nil {
			t.Fatal(err)
		}
		got, err := DecodeBody(s.ArrowSchema(), b.Body, nil)
		if err != nil {
			t.Fatalf("%d JSON rows: DecodeBody: %v", n, err)
		}
		if !array.RecordEqual(got, rec) {
			t.Fatalf("%d JSON rows decoded\n%v\nwant\n%v", n, got, rec)
		}
		got.Release()
	}

	// A dictionary column of nulls only has an empty dictionary.
	nulls := dictSample(t, s, 5, 2)
	defer nulls.Release()
	cols := append([]arrow.Array(nil), nulls.Columns()...)
	cols[4] = array.MakeArrayOfNull(memory.DefaultAllocator, arrow.BinaryTypes.String, 5)
	defer cols[4].Release()
	allNull := array.NewRecordBatch(s.ArrowSchema(), cols, 5)
	defer allNull.Release()
	for _, c := range []Compression{CompressionNone, CompressionZSTD} {
		body, err := EncodeBody(allNull, c, 3)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeBody(s.ArrowSchema(), body, nil)
		if err != nil || !array.RecordEqual(got, allNull) {
			t.Fatalf("all-null dictionary column, %s: %v\n%v", c, err, got)
		}
		got.Release()
	}

	plain := SampleRecord(1000, 11)
	defer plain.Release()
	dict := dictSample(t, s, 1000, 11)
	defer dict.Release()
	pb, err := EncodeBody(plain, CompressionZSTD, 3)
	if err != nil {
		t.Fatal(err)
	}
	db, err := EncodeBody(dict, CompressionZSTD, 3)
	if err != nil {
		t.Fatal(err)
	}
	// event_type and country take ~6.1 of ~30 bytes per row plain, ~2
	// encoded with their dictionary batches (26.0 against 29.9 in all).
	if len(db) > len(pb)*90/100 {
		t.Fatalf("ZSTD body with dictionaries is %d bytes, without %d: want at least 10%% smaller", len(db), len(pb))
	}
	t.Logf("1000 sample rows, ZSTD level 3: %d bytes plain, %d with dictionaries", len(pb), len(db))
}

// TestDecodeBodyChecksDictionaryIndexes feeds DecodeBody a client's body
// whose indices point past its dictionary.
func TestDecodeBodyChecksDictionaryIndexes(t *testing.T) {
	s := &Schema{ID: 1, Columns: []Column{{Name: "c", Type: Type{Kind: KindString}, Dictionary: true}}}
	mem := memory.DefaultAllocator
	vb := array.NewStringBuilder(mem)
	vb.AppendValues([]string{"a", "b"}, nil)
	vals := vb.NewArray()
	defer vals.Release()
	ib := array.NewInt32Builder(mem)
	ib.AppendValues([]int32{0, 1, 5}, nil)
	idx := ib.NewArray()
	defer idx.Release()
	stored := StoredSchema(s.ArrowSchema())
	d := array.NewDictionaryArray(stored.Field(0).Type, idx, vals)
	defer d.Release()
	rec := array.NewRecordBatch(stored, []arrow.Array{d}, 3)
	defer rec.Release()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(stored))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	msgs := buf.Bytes()[len(SchemaMessage(s.ArrowSchema())) : buf.Len()-8]
	if _, err := DecodeBody(s.ArrowSchema(), msgs, nil); !errors.Is(err, ErrBadBody) {
		t.Fatalf("DecodeBody with an index past the dictionary = %v, want ErrBadBody", err)
	}
}

func FuzzDecodeDictionaryBody(f *testing.F) {
	s := dictSampleSchema()
	rec := dictSample(f, s, 5, 3)
	defer rec.Release()
	for _, c := range []Compression{CompressionNone, CompressionLZ4Frame, CompressionZSTD} {
		body, err := EncodeBody(rec, c, 1)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(body)
	}
	schema := s.ArrowSchema()
	f.Fuzz(func(t *testing.T, body []byte) { checkDecodeBody(t, schema, body) })
}

// TestDecodeBodyAs reads bodies clients write for a table whose column 3
// is dictionary-encoded (and for one where it is not): plain, plain with
// the table's own (marked) Arrow schema, and dictionary-encoded with int8
// indices. Each gives the table's plain record.
func TestDecodeBodyAs(t *testing.T) {
	s := dictSampleSchema()
	want := dictSample(t, s, 40, 5)
	defer want.Release()
	plainSch := SampleSchema().ArrowSchema()

	int8Dict := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
	fields := plainSch.Fields()
	fields[3].Type = int8Dict
	dictSch := arrow.NewSchema(fields, nil)
	db := array.NewDictionaryBuilder(memory.DefaultAllocator, int8Dict).(*array.BinaryDictionaryBuilder)
	defer db.Release()
	events := want.Column(3).(*array.String)
	for i := range events.Len() {
		if err := db.AppendString(events.Value(i)); err != nil {
			t.Fatal(err)
		}
	}
	d := db.NewArray()
	defer d.Release()
	cols := append([]arrow.Array(nil), want.Columns()...)
	cols[3] = d

	for _, tc := range []struct {
		name string
		rec  arrow.Record
	}{
		{"plain", array.NewRecordBatch(plainSch, want.Columns(), want.NumRows())},
		{"marked", array.NewRecordBatch(s.ArrowSchema(), want.Columns(), want.NumRows())},
		{"int8 dictionary", array.NewRecordBatch(dictSch, cols, want.NumRows())},
	} {
		defer tc.rec.Release()
		var buf bytes.Buffer
		w := ipc.NewWriter(&buf, ipc.WithSchema(tc.rec.Schema()))
		if err := w.Write(tc.rec); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		schemaMsg, bodies, err := arrowipc.SplitStream(buf.Bytes())
		if err != nil || len(bodies) != 1 {
			t.Fatalf("%s: SplitStream: %d bodies, %v", tc.name, len(bodies), err)
		}
		sent := readSchema(t, schemaMsg)
		for _, table := range []*arrow.Schema{s.ArrowSchema(), plainSch} {
			got, err := DecodeBodyAs(table, sent, bodies[0], nil)
			if err != nil {
				t.Fatalf("%s: DecodeBodyAs: %v", tc.name, err)
			}
			if !array.RecordEqual(got, want) || !got.Schema().Equal(table) {
				t.Fatalf("%s: got\n%v\nwant\n%v", tc.name, got, want)
			}
			got.Release()
		}
	}
}

// readSchema decodes an encapsulated schema message with arrow-go.
func readSchema(t *testing.T, msg []byte) *arrow.Schema {
	t.Helper()
	r, err := ipc.NewReader(bytes.NewReader(append(append([]byte(nil), msg...), StreamSuffix...)))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	return r.Schema()
}
