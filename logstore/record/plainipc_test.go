package record

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestPlainBodyMatchesArrowGo(t *testing.T) {
	for _, rows := range []int{1, 2, 9, 64, 500} {
		t.Run(fmt.Sprint(rows), func(t *testing.T) {
			rec := SampleRecord(rows, int64(rows))
			defer rec.Release()
			plain, ok := appendPlainBody([]byte("x"), rec)
			if !ok {
				t.Fatal("SampleRecord not encoded by the plain encoder")
			}
			plain = plain[1:]
			ref, err := appendArrowGoBody(nil, rec, CompressionNone, 0, true)
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeBody(rec.Schema(), plain, nil)
			if err != nil {
				t.Fatalf("decode plain body: %v", err)
			}
			defer got.Release()
			if !array.RecordEqual(got, rec) {
				t.Fatalf("plain body decodes to a different record")
			}
			if !bytes.Equal(plain, ref) {
				t.Logf("plain body (%d bytes) differs from arrow-go's (%d bytes)", len(plain), len(ref))
			}
		})
	}
}

func TestPlainBodyFallback(t *testing.T) {
	rec := SampleRecord(10, 1)
	defer rec.Release()
	sliced := rec.NewSlice(2, 5)
	defer sliced.Release()
	empty := rec.NewSlice(0, 0)
	defer empty.Release()
	lb := array.NewListBuilder(memory.DefaultAllocator, arrow.PrimitiveTypes.Int32)
	defer lb.Release()
	lb.Append(true)
	lb.ValueBuilder().(*array.Int32Builder).Append(1)
	la := lb.NewArray()
	defer la.Release()
	nested := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "l", Type: la.DataType()}}, nil), []arrow.Array{la}, 1)
	defer nested.Release()
	for name, r := range map[string]arrow.Record{"sliced": sliced, "empty": empty, "nested": nested} {
		if _, ok := appendPlainBody(nil, r); ok {
			t.Errorf("%s: plain encoder accepted it", name)
		}
		// EncodeBody still encodes it (with arrow-go) and it decodes back.
		body, err := EncodeBody(r, CompressionNone, 0)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := DecodeBody(r.Schema(), body, nil)
		if err != nil {
			t.Fatalf("%s: decode: %v", name, err)
		}
		if !array.RecordEqual(got, r) {
			t.Errorf("%s: round trip differs", name)
		}
		got.Release()
	}
}
