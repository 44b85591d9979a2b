package arrowipc

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// benchBatch is a 1000-row, 20-column ZSTD batch of mixed flat types.
type benchBatch struct {
	schema    *arrow.Schema
	rec       arrow.RecordBatch
	schemaMsg []byte
	batch     []byte
	layout    *Layout
	keep      []int
}

func newBenchBatch(b *testing.B) *benchBatch {
	b.Helper()
	fields := make([]arrow.Field, 20)
	for i := range fields {
		f := flatFields[i%len(flatFields)]
		f.Name = fmt.Sprintf("%s_%d", f.Name, i)
		fields[i] = f
	}
	schema := arrow.NewSchema(fields, nil)
	rec := randomRecord(b, rand.New(rand.NewPCG(42, 42)), schema, 1000, 10)
	schemaMsg, batches, err := SplitStream(writeStream(b, schema, []ipc.Option{ipc.WithZstd()}, rec))
	if err != nil {
		b.Fatal(err)
	}
	layout, err := LayoutOf(schemaMsg)
	if err != nil {
		b.Fatal(err)
	}
	// An int64 and a string column.
	return &benchBatch{schema, rec, schemaMsg, batches[0], layout, []int{4, 8}}
}

// BenchmarkProject: buffer-level projection of 2 of 20 columns. The
// decode-based benchmarks below use the int64+string pair.
func BenchmarkProject(b *testing.B) {
	bb := newBenchBatch(b)
	defer bb.rec.Release()
	for _, tc := range []struct {
		name string
		keep []int
	}{
		{"int64+string", bb.keep},
		{"int32+double", []int{3, 6}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var out []byte
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if out, err = Project(out[:0], bb.batch, tc.keep, bb.layout); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(out)), "bytes_moved/op")
			b.ReportMetric(100*float64(len(out))/float64(len(bb.batch)), "%_of_full")
		})
	}
}

// BenchmarkDecodeAll: arrow-go decodes (and decompresses) the whole batch,
// which is what a server without buffer-level pruning must do first.
func BenchmarkDecodeAll(b *testing.B) {
	bb := newBenchBatch(b)
	defer bb.rec.Release()
	stream := AppendStream(nil, bb.schemaMsg, bb.batch)
	b.ReportAllocs()
	for b.Loop() {
		r, err := ipc.NewReader(bytes.NewReader(stream))
		if err != nil {
			b.Fatal(err)
		}
		if !r.Next() {
			b.Fatal(r.Err())
		}
		r.Release()
	}
	b.ReportMetric(float64(len(bb.batch)), "bytes_moved/op")
}

// BenchmarkDecodeProjectEncode: the full alternative to Project — decode
// everything, keep 2 columns, re-encode them with ZSTD.
func BenchmarkDecodeProjectEncode(b *testing.B) {
	bb := newBenchBatch(b)
	defer bb.rec.Release()
	stream := AppendStream(nil, bb.schemaMsg, bb.batch)
	pschema := arrow.NewSchema([]arrow.Field{bb.schema.Field(bb.keep[0]), bb.schema.Field(bb.keep[1])}, nil)
	var buf bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		r, err := ipc.NewReader(bytes.NewReader(stream))
		if err != nil {
			b.Fatal(err)
		}
		if !r.Next() {
			b.Fatal(r.Err())
		}
		rec := r.RecordBatch()
		p := array.NewRecordBatch(pschema, []arrow.Array{rec.Column(bb.keep[0]), rec.Column(bb.keep[1])}, rec.NumRows())
		buf.Reset()
		w := ipc.NewWriter(&buf, ipc.WithSchema(pschema), ipc.WithZstd())
		if err := w.Write(p); err != nil {
			b.Fatal(err)
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		p.Release()
		r.Release()
	}
	b.ReportMetric(float64(buf.Len()), "bytes_moved/op")
}
