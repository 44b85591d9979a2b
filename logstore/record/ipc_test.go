package record

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/fluss-node/fluss-node/logstore/record/arrowipc"
)

// readArrowGo decodes schema message + body + EOS with arrow-go's reader.
func readArrowGo(t *testing.T, schema *arrow.Schema, body []byte) arrow.Record {
	t.Helper()
	stream := append(append(bytes.Clone(SchemaMessage(schema)), body...), StreamSuffix...)
	r, err := ipc.NewReader(bytes.NewReader(stream))
	if err != nil {
		t.Fatalf("arrow-go reader: %v", err)
	}
	defer r.Release()
	if !r.Next() {
		t.Fatalf("arrow-go read no record: %v", r.Err())
	}
	rec := r.RecordBatch()
	rec.Retain()
	if r.Next() {
		t.Fatalf("arrow-go read an extra record")
	}
	return rec
}

// TestEncodeDecodeBodyEveryTypeCodecLevel: every type × codec × level
// encodes to a body arrow-go's reader decodes, and DecodeBody returns the
// same record.
func TestEncodeDecodeBodyEveryTypeCodecLevel(t *testing.T) {
	s := allTypesSchema(t)
	all, err := DecodeJSONRows(s, []byte("["+strings.Join(canonicalRows, ",")+"]"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer all.Release()
	sample := SampleRecord(1000, 5)
	defer sample.Release()
	for _, rec := range []arrow.Record{all, sample} {
		schema := rec.Schema()
		for _, c := range []Compression{CompressionNone, CompressionLZ4Frame, CompressionZSTD} {
			for _, level := range []int{0, 1, 3, 9, 22} {
				t.Run(fmt.Sprintf("%d-cols/%s/%d", rec.NumCols(), c, level), func(t *testing.T) {
					body, err := EncodeBody(rec, c, level)
					if err != nil {
						t.Fatal(err)
					}
					got := readArrowGo(t, schema, body)
					defer got.Release()
					if !array.RecordApproxEqual(rec, got, array.WithNaNsEqual(true)) {
						t.Fatalf("arrow-go decoded a different record")
					}
					dec, err := DecodeBody(schema, body, nil)
					if err != nil {
						t.Fatal(err)
					}
					defer dec.Release()
					if !array.RecordApproxEqual(rec, dec, array.WithNaNsEqual(true)) {
						t.Fatalf("DecodeBody returned a different record")
					}
				})
			}
		}
	}
}

// TestZSTDLevelIsUsed: higher levels give smaller bodies on sample data,
// and bad levels are rejected.
func TestZSTDLevelIsUsed(t *testing.T) {
	rec := SampleRecord(1000, 1)
	defer rec.Release()
	size := func(level int) int {
		body, err := EncodeBody(rec, CompressionZSTD, level)
		if err != nil {
			t.Fatal(err)
		}
		return len(body)
	}
	l1, l3, l9, l22 := size(1), size(3), size(9), size(22)
	if !(l9 < l1 && l22 < l1 && l3 <= l1) {
		t.Fatalf("zstd body sizes by level 1/3/9/22: %d %d %d %d: the level has no effect", l1, l3, l9, l22)
	}
	if size(0) != l3 {
		t.Fatalf("level 0 is not the default level 3")
	}
	for _, bad := range []int{-1, 23} {
		if _, err := EncodeBody(rec, CompressionZSTD, bad); !errors.Is(err, ErrBadCompression) {
			t.Fatalf("level %d: %v, want ErrBadCompression", bad, err)
		}
	}
}

// TestDecodeBodyArrowGoCompressed: bodies compressed by arrow-go's own
// writer decode with DecodeBody.
func TestDecodeBodyArrowGoCompressed(t *testing.T) {
	rec := SampleRecord(300, 2)
	defer rec.Release()
	schema := rec.Schema()
	for name, opt := range map[string]ipc.Option{"lz4": ipc.WithLZ4(), "zstd": ipc.WithZstd()} {
		var buf bytes.Buffer
		w := ipc.NewWriter(&buf, ipc.WithSchema(schema), opt)
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		_, batches, err := arrowipc.SplitStream(buf.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeBody(schema, batches[0], nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !array.RecordEqual(rec, got) {
			t.Fatalf("%s: decoded record differs", name)
		}
		got.Release()
	}
}

// TestDecodeBodyRejectsBomb: a body declaring more than MaxDecodedBody
// fails before decompression.
func TestDecodeBodyRejectsBomb(t *testing.T) {
	rec := SampleRecord(1000, 3)
	defer rec.Release()
	body, err := EncodeBody(rec, CompressionZSTD, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer func(old int64) { MaxDecodedBody = old }(MaxDecodedBody)
	MaxDecodedBody = 1000
	r, err := DecodeBody(rec.Schema(), body, nil)
	if !errors.Is(err, ErrBadBody) || !errors.Is(err, arrowipc.ErrTooLarge) {
		if r != nil {
			r.Release()
		}
		t.Fatalf("DecodeBody over the limit: %v, want ErrBadBody wrapping ErrTooLarge", err)
	}
}

// FuzzDecodeBody: a body is a client's bytes on the Arrow append path
// (record batch messages are kept as sent). DecodeBody must refuse a
// malformed one with an error wrapping ErrBadBody, never panic, and what it
// accepts must be a record of the schema whose arrays are safe to index.
func FuzzDecodeBody(f *testing.F) {
	sample := SampleRecord(3, 5)
	defer sample.Release()
	schema := sample.Schema()
	for _, c := range []Compression{CompressionNone, CompressionLZ4Frame, CompressionZSTD} {
		body, err := EncodeBody(sample, c, 1)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(body)
	}
	f.Add([]byte{0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, body []byte) { checkDecodeBody(t, schema, body) })
}

// checkDecodeBody is the property of the DecodeBody fuzz targets: an
// error wraps ErrBadBody; a record has schema, and reading every column's
// values is safe (the first 1,000: an all-null column may claim any length
// without a buffer).
func checkDecodeBody(t *testing.T, schema *arrow.Schema, body []byte) {
	rec, err := DecodeBody(schema, body, nil)
	if err != nil {
		if !errors.Is(err, ErrBadBody) {
			t.Fatalf("error %v does not wrap ErrBadBody", err)
		}
		return
	}
	defer rec.Release()
	if !rec.Schema().Equal(schema) {
		t.Fatalf("decoded schema %s, want %s", rec.Schema(), schema)
	}
	for i, col := range rec.Columns() {
		if col.Len() != int(rec.NumRows()) {
			t.Fatalf("column %d has %d values, the record %d rows", i, col.Len(), rec.NumRows())
		}
		for row := range min(col.Len(), 1000) {
			_ = col.ValueStr(row)
		}
	}
}
