package arrowipc

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

var (
	dictInt32  = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
	dictInt8   = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.Binary}
	dictSchema = arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "kind", Type: dictInt32},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "tag", Type: dictInt8, Nullable: true},
		{Name: "x", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
)

// dictRecord builds rows of dictSchema whose dictionary columns take their
// values from words, so that records built from different words carry
// different dictionaries.
func dictRecord(t testing.TB, rng *rand.Rand, rows int, words []string) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, dictSchema)
	defer b.Release()
	for i := range rows {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		if err := b.Field(1).(*array.BinaryDictionaryBuilder).AppendString(words[rng.IntN(len(words))]); err != nil {
			t.Fatal(err)
		}
		b.Field(2).(*array.StringBuilder).Append(fmt.Sprint("s-", rng.Int64()))
		if rng.IntN(5) == 0 {
			b.Field(3).AppendNull()
		} else if err := b.Field(3).(*array.BinaryDictionaryBuilder).Append([]byte(words[rng.IntN(len(words))])); err != nil {
			t.Fatal(err)
		}
		b.Field(4).(*array.Float64Builder).Append(rng.Float64())
	}
	return b.NewRecordBatch()
}

// TestDictionaryBodies splits streams whose dictionaries change from batch
// to batch into self-contained bodies, and checks that every body, alone,
// compressed, decompressed and projected, reads back with arrow-go as the
// record it was written from.
func TestDictionaryBodies(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	recs := []arrow.RecordBatch{
		dictRecord(t, rng, 50, []string{"view", "click"}),
		dictRecord(t, rng, 1, []string{"purchase"}),
		dictRecord(t, rng, 300, []string{"view", "search", "logout", "add_to_cart"}),
	}
	for _, r := range recs {
		defer r.Release()
	}
	keeps := [][]int{{0}, {1}, {3}, {1, 3}, {0, 2, 4}, {2, 3}, {0, 1, 2, 3, 4}}
	for _, c := range compressions {
		t.Run(c.name, func(t *testing.T) {
			schemaMsg, bodies, err := SplitStream(writeStream(t, dictSchema, c.opts, recs...))
			if err != nil {
				t.Fatal(err)
			}
			if len(bodies) != len(recs) {
				t.Fatalf("%d bodies, want %d", len(bodies), len(recs))
			}
			layout, err := LayoutOf(schemaMsg)
			if err != nil {
				t.Fatal(err)
			}
			for f, want := range []int64{-1, 0, -1, 1, -1} {
				id, ok := layout.DictionaryID(f)
				if ok != (want >= 0) || (ok && id != want) {
					t.Fatalf("DictionaryID(%d) = %d, %v; want %d", f, id, ok, want)
				}
			}
			wantRecords(t, AppendStream(nil, schemaMsg, bodies...), recs)
			for i, body := range bodies {
				wantRecords(t, AppendStream(nil, schemaMsg, body), recs[i:i+1])
				plain, err := Decompress(nil, body, 0)
				if err != nil {
					t.Fatalf("Decompress body %d: %v", i, err)
				}
				wantRecords(t, AppendStream(nil, schemaMsg, plain), recs[i:i+1])
				for _, codec := range []Codec{CodecNone, CodecLZ4Frame, CodecZSTD} {
					comp, err := Compress(nil, plain, codec, 0)
					if err != nil {
						t.Fatalf("Compress body %d with %s: %v", i, codec, err)
					}
					wantRecords(t, AppendStream(nil, schemaMsg, comp), recs[i:i+1])
				}
				for _, keep := range keeps {
					out, err := Project(nil, body, keep, layout)
					if err != nil {
						t.Fatalf("Project body %d to %v: %v", i, keep, err)
					}
					want := projectRecord(t, recs[i], keep)
					msg, err := SchemaMessage(want.Schema())
					if err != nil {
						t.Fatal(err)
					}
					wantRecords(t, AppendStream(nil, msg, out), []arrow.RecordBatch{want})
					want.Release()
				}
			}
		})
	}
}

// wantRecords reads stream with arrow-go and compares it with want.
func wantRecords(t *testing.T, stream []byte, want []arrow.RecordBatch) {
	t.Helper()
	_, got := readStream(t, stream)
	defer func() {
		for _, r := range got {
			r.Release()
		}
	}()
	if len(got) != len(want) {
		t.Fatalf("read %d records, want %d", len(got), len(want))
	}
	for i := range got {
		if !array.RecordEqual(got[i], want[i]) {
			t.Fatalf("record %d:\n got %v\nwant %v", i, got[i], want[i])
		}
	}
}

func TestDictionaryBodyErrors(t *testing.T) {
	r1 := wordsRecord(t, "a", "b")
	defer r1.Release()
	r2 := wordsRecord(t, "a", "b", "c", "d")
	defer r2.Release()

	// arrow-go writes the second record's new words as delta batches.
	delta := writeStream(t, dictSchema, []ipc.Option{ipc.WithDictionaryDeltas(true)}, r1, r2)
	if _, _, err := SplitStream(delta); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("SplitStream of a stream with deltas = %v, want ErrUnsupported", err)
	}
	var msgs [][]byte
	for off := 0; ; {
		m, n, eos, err := parseMessage(delta[off:])
		if err != nil {
			t.Fatal(err)
		}
		if eos {
			break
		}
		msgs = append(msgs, m.raw)
		off += n
	}
	schemaMsg, _, err := SplitStream(writeStream(t, dictSchema, nil, r1))
	if err != nil {
		t.Fatal(err)
	}
	layout, err := LayoutOf(schemaMsg)
	if err != nil {
		t.Fatal(err)
	}
	// msgs: schema, 2 dictionaries, batch, then the deltas and batch 2.
	deltaBody := append(append([]byte(nil), msgs[4]...), msgs[len(msgs)-1]...)
	if _, err := Project(nil, deltaBody, []int{1}, layout); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Project of a delta = %v, want ErrUnsupported", err)
	}

	// A schema with the same buffers whose field 3 is not dictionary-encoded
	// has no dictionary 1.
	plainTag := arrow.NewSchema(append(append([]arrow.Field(nil), dictSchema.Fields()[:3]...),
		arrow.Field{Name: "tag", Type: arrow.PrimitiveTypes.Int8, Nullable: true}, dictSchema.Field(4)), nil)
	msg, err := SchemaMessage(plainTag)
	if err != nil {
		t.Fatal(err)
	}
	other, err := LayoutOf(msg)
	if err != nil {
		t.Fatal(err)
	}
	body := append(append(append([]byte(nil), msgs[1]...), msgs[2]...), msgs[3]...)
	if _, err := Project(nil, body, []int{0, 1}, other); !errors.Is(err, ErrMalformed) {
		t.Fatalf("Project with a dictionary the schema lacks = %v, want ErrMalformed", err)
	}
	// CheckBody: a whole body passes; one dictionary short, or one twice,
	// does not.
	whole := append(append(append([]byte(nil), msgs[1]...), msgs[2]...), msgs[3]...)
	if err := CheckBody(whole, layout); err != nil {
		t.Fatalf("CheckBody of a whole body: %v", err)
	}
	short := append(append([]byte(nil), msgs[1]...), msgs[3]...)
	twice := append(append(append([]byte(nil), msgs[1]...), msgs[1]...), msgs[3]...)
	for name, b := range map[string][]byte{"a dictionary short": short, "a dictionary twice": twice} {
		if err := CheckBody(b, layout); !errors.Is(err, ErrMalformed) {
			t.Fatalf("CheckBody with %s = %v, want ErrMalformed", name, err)
		}
		if _, err := Project(nil, b, []int{0}, layout); !errors.Is(err, ErrMalformed) {
			t.Fatalf("Project with %s = %v, want ErrMalformed", name, err)
		}
	}

	// Dictionaries only, no record batch.
	if _, err := Decompress(nil, append(append([]byte(nil), msgs[1]...), msgs[2]...), 0); !errors.Is(err, ErrMalformed) {
		t.Fatalf("Decompress of dictionaries without a batch = %v, want ErrMalformed", err)
	}
}

// wordsRecord builds a row of dictSchema per word, each dictionary holding
// exactly words in order.
func wordsRecord(t *testing.T, words ...string) arrow.RecordBatch {
	t.Helper()
	mem := memory.DefaultAllocator
	sb, bb := array.NewStringBuilder(mem), array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
	ib, i8b := array.NewInt32Builder(mem), array.NewInt8Builder(mem)
	idb, sdb, xb := array.NewInt64Builder(mem), array.NewStringBuilder(mem), array.NewFloat64Builder(mem)
	for i, w := range words {
		sb.Append(w)
		bb.Append([]byte(w))
		ib.Append(int32(i))
		i8b.Append(int8(i))
		idb.Append(int64(i))
		sdb.Append(w)
		xb.Append(float64(i))
	}
	arrs := []arrow.Array{sb.NewArray(), bb.NewArray(), ib.NewArray(), i8b.NewArray(), idb.NewArray(), sdb.NewArray(), xb.NewArray()}
	defer func() {
		for _, a := range arrs {
			a.Release()
		}
	}()
	kind := array.NewDictionaryArray(dictInt32, arrs[2], arrs[0])
	defer kind.Release()
	tag := array.NewDictionaryArray(dictInt8, arrs[3], arrs[1])
	defer tag.Release()
	return array.NewRecordBatch(dictSchema, []arrow.Array{arrs[4], kind, arrs[5], tag, arrs[6]}, int64(len(words)))
}

// TestSplitStreamBoundsRepeatedDictionaries: a stream of a big dictionary
// then many record batches would make SplitStream copy the dictionary into
// every body; past twice the stream plus 16 MiB it refuses.
func TestSplitStreamBoundsRepeatedDictionaries(t *testing.T) {
	big := make([]string, 1)
	big[0] = string(make([]byte, 1<<20))
	r := wordsRecord(t, big...)
	defer r.Release()
	schemaMsg, bodies, err := SplitStream(writeStream(t, dictSchema, nil, r))
	if err != nil {
		t.Fatal(err)
	}
	dicts, _, err := viewBody(bodies[0])
	if err != nil {
		t.Fatal(err)
	}
	// Schema, the dictionaries once, then the batch 40 times.
	stream := append([]byte(nil), schemaMsg...)
	for _, d := range dicts {
		stream = append(stream, d.m.raw...)
	}
	batch := bodies[0][len(bodies[0])-len(mustView(t, bodies[0]).m.raw):]
	for range 40 {
		stream = append(stream, batch...)
	}
	if _, _, err := SplitStream(stream); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("SplitStream of 40 batches after a 2 MiB dictionary = %v, want ErrTooLarge", err)
	}
	if _, b, err := SplitStream(stream[:len(stream)-35*len(batch)]); err != nil || len(b) != 5 {
		t.Fatalf("SplitStream of 5 batches = %d bodies, %v", len(b), err)
	}
}

func mustView(t *testing.T, body []byte) batchView {
	t.Helper()
	_, v, err := viewBody(body)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
