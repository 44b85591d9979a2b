package arrowipc

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

var eosModern = []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}

// legacyStream re-frames every message of a modern stream in the legacy
// framing and ends it with the legacy 4-byte EOS.
func legacyStream(t testing.TB, schemaMsg []byte, batches [][]byte) []byte {
	out := toLegacy(t, schemaMsg)
	for _, b := range batches {
		out = append(out, toLegacy(t, b)...)
	}
	return append(out, 0, 0, 0, 0)
}

func TestSplitAppendRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 2))
	schema := arrow.NewSchema(flatFields, nil)
	for _, c := range compressions {
		for _, nrec := range []int{0, 1, 3} {
			var recs []arrow.RecordBatch
			for range nrec {
				recs = append(recs, randomRecord(t, rng, schema, 1+rng.IntN(200), 20))
			}
			stream := writeStream(t, schema, c.opts, recs...)
			schemaMsg, batches, err := SplitStream(stream)
			if err != nil {
				t.Fatalf("%s/%d: SplitStream: %v", c.name, nrec, err)
			}
			if len(batches) != nrec {
				t.Fatalf("%s/%d: %d batches, want %d", c.name, nrec, len(batches), nrec)
			}
			for i, b := range batches {
				if n, err := BatchLength(b); err != nil || n != recs[i].NumRows() {
					t.Fatalf("BatchLength(batch %d) = %d, %v; want %d", i, n, err, recs[i].NumRows())
				}
			}
			// Modern: re-assembling gives arrow-go's exact bytes back.
			if got := AppendStream(nil, schemaMsg, batches...); !bytes.Equal(got, stream) {
				t.Fatalf("%s/%d: AppendStream(SplitStream(s)) != s", c.name, nrec)
			}
			// Legacy framing: arrow-go reads it (so the test input is valid),
			// SplitStream splits it, AppendStream re-frames it to modern.
			legacy := legacyStream(t, schemaMsg, batches)
			checkRecords(t, legacy, schema, recs)
			lSchema, lBatches, err := SplitStream(legacy)
			if err != nil {
				t.Fatalf("%s/%d: SplitStream(legacy): %v", c.name, nrec, err)
			}
			if len(lBatches) != nrec {
				t.Fatalf("legacy: %d batches, want %d", len(lBatches), nrec)
			}
			modern := AppendStream([]byte("pre"), lSchema, lBatches...)
			if string(modern[:3]) != "pre" {
				t.Fatalf("AppendStream clobbered dst")
			}
			checkRecords(t, modern[3:], schema, recs)
			if _, mb, err := SplitStream(modern[3:]); err != nil || len(mb) != nrec {
				t.Fatalf("re-split modern: %d batches, %v", len(mb), err)
			} else {
				for i := range mb {
					if le.Uint32(mb[i]) != continuation || len(mb[i])%8 != 0 || !bytes.Equal(msgBody(t, mb[i]), msgBody(t, batches[i])) {
						t.Fatalf("re-framed batch %d is not modern, 8-aligned, same body", i)
					}
				}
			}
			// Without an EOS marker (end of input) the split is the same.
			noEOS := stream[:len(stream)-8]
			if _, b, err := SplitStream(noEOS); err != nil || len(b) != nrec {
				t.Fatalf("no EOS: %d batches, %v", len(b), err)
			}
			// Bytes after EOS are ignored.
			if _, b, err := SplitStream(append(bytes.Clone(stream), 1, 2, 3)); err != nil || len(b) != nrec {
				t.Fatalf("trailing garbage after EOS: %d batches, %v", len(b), err)
			}
			for _, r := range recs {
				r.Release()
			}
		}
	}
}

func checkRecords(t *testing.T, stream []byte, schema *arrow.Schema, want []arrow.RecordBatch) {
	t.Helper()
	gotSchema, got := readStream(t, stream)
	if !gotSchema.Equal(schema) {
		t.Fatalf("schema = %v, want %v", gotSchema, schema)
	}
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range got {
		if !array.RecordEqual(got[i], want[i]) {
			t.Fatalf("record %d differs", i)
		}
		got[i].Release()
	}
}

func TestSplitStreamErrors(t *testing.T) {
	schema := arrow.NewSchema(flatFields[:2], nil)
	rec := randomRecord(t, rand.New(rand.NewPCG(5, 5)), schema, 20, 10)
	defer rec.Release()
	stream := writeStream(t, schema, nil, rec, rec)
	schemaMsg, batches, err := SplitStream(stream)
	if err != nil {
		t.Fatal(err)
	}

	// A dictionary batch in place of the schema.
	dictType := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
	oneDict := arrow.NewSchema([]arrow.Field{{Name: "d", Type: dictType}}, nil)
	db := array.NewDictionaryBuilder(memory.DefaultAllocator, dictType).(*array.BinaryDictionaryBuilder)
	defer db.Release()
	if err := db.AppendString("x"); err != nil {
		t.Fatal(err)
	}
	darr := db.NewArray()
	defer darr.Release()
	drec := array.NewRecordBatch(oneDict, []arrow.Array{darr}, 1)
	defer drec.Release()
	dictStream := writeStream(t, oneDict, nil, drec)
	_, n, _, err := parseMessage(dictStream)
	if err != nil {
		t.Fatal(err)
	}
	dictStream = dictStream[n:]

	tests := []struct {
		name   string
		stream []byte
		want   error
	}{
		{"empty", nil, ErrMalformed},
		{"only EOS", eosModern, ErrMalformed},
		{"legacy EOS only", []byte{0, 0, 0, 0}, ErrMalformed},
		{"batch first", AppendStream(nil, batches[0], batches[1]), ErrMalformed},
		{"two schemas", AppendStream(nil, schemaMsg, schemaMsg), ErrMalformed},
		{"truncated body", stream[:len(schemaMsg)+len(batches[0])-1], ErrMalformed},
		{"truncated prefix", stream[:len(schemaMsg)+6], ErrMalformed},
		{"truncated metadata", stream[:len(schemaMsg)+20], ErrMalformed},
		{"short", []byte{1, 2}, ErrMalformed},
		{"negative metadata length", []byte{0xff, 0xff, 0xff, 0xff, 0xf0, 0xff, 0xff, 0xff}, ErrMalformed},
		{"dictionary batch first", dictStream, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, b, err := SplitStream(tt.stream)
			if !errors.Is(err, tt.want) {
				t.Fatalf("SplitStream error = %v, want %v", err, tt.want)
			}
			if s != nil || b != nil {
				t.Fatalf("SplitStream returned data with an error")
			}
		})
	}

	if _, err := BatchLength(schemaMsg); !errors.Is(err, ErrMalformed) {
		t.Fatalf("BatchLength(schema) = %v, want ErrMalformed", err)
	}
}

func TestSchemaMessage(t *testing.T) {
	schema := arrow.NewSchema(flatFields, nil)
	a, err := SchemaMessage(schema)
	if err != nil {
		t.Fatal(err)
	}
	b, err := SchemaMessage(arrow.NewSchema(flatFields, nil))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("SchemaMessage is not deterministic; it cannot be cached")
	}
	if le.Uint32(a) != continuation || len(a)%8 != 0 {
		t.Fatalf("schema message is not modern framed and 8-aligned (len %d)", len(a))
	}
	got, recs := readStream(t, AppendStream(nil, a))
	if !got.Equal(schema) || len(recs) != 0 {
		t.Fatalf("arrow-go reads schema %v and %d records", got, len(recs))
	}
}
