package record

import (
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

func BenchmarkDecodeJSONRows(b *testing.B) {
	s := SampleSchema()
	js := SampleJSON(1000, 1)
	b.ReportAllocs()
	b.SetBytes(int64(len(js)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rec, err := DecodeJSONRows(s, js, nil)
		if err != nil {
			b.Fatal(err)
		}
		rec.Release()
	}
	b.ReportMetric(float64(b.N)*1000/b.Elapsed().Seconds(), "rows/s")
}

func BenchmarkEncodeBody(b *testing.B) {
	for _, rows := range []int{1, 256, 1000} {
		rec := SampleRecord(rows, 1)
		defer rec.Release()
		for _, c := range []Compression{CompressionNone, CompressionLZ4Frame, CompressionZSTD} {
			b.Run(fmt.Sprintf("%s/%d-rows", c, rows), func(b *testing.B) {
				b.ReportAllocs()
				var n int
				for i := 0; i < b.N; i++ {
					body, err := EncodeBody(rec, c, 3)
					if err != nil {
						b.Fatal(err)
					}
					n = len(body)
				}
				b.ReportMetric(float64(n)/float64(rows), "bytes/row")
				b.ReportMetric(float64(b.N)*float64(rows)/b.Elapsed().Seconds(), "rows/s")
			})
		}
	}
}

func BenchmarkDecodeBody(b *testing.B) {
	s := SampleSchema().ArrowSchema()
	for _, rows := range []int{1, 1000} {
		rec := SampleRecord(rows, 1)
		defer rec.Release()
		for _, c := range []Compression{CompressionNone, CompressionLZ4Frame, CompressionZSTD} {
			body, err := EncodeBody(rec, c, 3)
			if err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("%s/%d-rows", c, rows), func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					r, err := DecodeBody(s, body, nil)
					if err != nil {
						b.Fatal(err)
					}
					r.Release()
				}
				b.ReportMetric(float64(len(body))/float64(rows), "bytes/row")
				b.ReportMetric(float64(b.N)*float64(rows)/b.Elapsed().Seconds(), "rows/s")
			})
		}
	}
}

// BenchmarkZSTDLevel reports bytes/row of SampleRecord(1000) per zstd level
// (level 0 here = uncompressed Arrow, for comparison), plain and with
// event_type and country dictionary-encoded.
func BenchmarkZSTDLevel(b *testing.B) {
	plain := SampleRecord(1000, 1)
	defer plain.Release()
	dict := dictSample(b, dictSampleSchema(), 1000, 1)
	defer dict.Release()
	for _, enc := range []struct {
		name string
		rec  arrow.Record
	}{{"plain", plain}, {"dictionary", dict}} {
		for _, level := range []int{0, 1, 3, 9} {
			c := CompressionZSTD
			if level == 0 {
				c = CompressionNone
			}
			b.Run(fmt.Sprintf("%s/level-%d", enc.name, level), func(b *testing.B) {
				b.ReportAllocs()
				var n int
				for i := 0; i < b.N; i++ {
					body, err := EncodeBody(enc.rec, c, level)
					if err != nil {
						b.Fatal(err)
					}
					n = len(body)
				}
				b.ReportMetric(float64(n)/1000, "bytes/row")
			})
		}
	}
}

func BenchmarkComputeStats(b *testing.B) {
	rec := SampleRecord(1000, 1)
	defer rec.Release()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = ComputeStats(rec)
	}
}

func BenchmarkAppendJSONRows(b *testing.B) {
	rec := SampleRecord(1000, 1)
	defer rec.Release()
	var buf []byte
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		buf = AppendJSONRows(buf[:0], rec, 0, 1000, nil)
	}
	b.SetBytes(int64(len(buf)))
	b.ReportMetric(float64(b.N)*1000/b.Elapsed().Seconds(), "rows/s")
}

func BenchmarkParseBatch(b *testing.B) {
	batch := sampleBatch(b, 1000, CompressionLZ4Frame, true)
	b.ReportAllocs()
	b.SetBytes(int64(len(batch)))
	for i := 0; i < b.N; i++ {
		if _, _, err := ParseBatch(batch); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSplitByBucket(b *testing.B) {
	rec := SampleRecord(1000, 1)
	defer rec.Release()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		parts, err := SplitByBucket(rec, []int{1}, 16, nil)
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range parts {
			if p != nil {
				p.Release()
			}
		}
	}
}

// BenchmarkAppendPath1Row is the server's work for a 1-row JSON Append:
// decode the row, encode the uncompressed body, compute stats and frame
// the batch, then parse it back as the log does.
func BenchmarkAppendPath1Row(b *testing.B) {
	s := SampleSchema()
	js := SampleJSON(1, 1)
	b.ReportAllocs()
	var buf []byte
	for b.Loop() {
		rec, err := DecodeJSONRows(s, js, nil)
		if err != nil {
			b.Fatal(err)
		}
		body, err := EncodeBody(rec, CompressionNone, 0)
		if err != nil {
			b.Fatal(err)
		}
		buf = AppendBatch(buf[:0], BatchHeader{RecordCount: 1, SchemaID: s.ID}, ComputeStats(rec), body)
		rec.Release()
		if _, _, err := ParseBatch(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeJSON1Row: DecodeJSONRows of one row.
func BenchmarkDecodeJSON1Row(b *testing.B) {
	s := SampleSchema()
	js := SampleJSON(1, 1)
	b.ReportAllocs()
	for b.Loop() {
		rec, err := DecodeJSONRows(s, js, nil)
		if err != nil {
			b.Fatal(err)
		}
		rec.Release()
	}
}

// BenchmarkStats1Row: ComputeStats plus the stats block round trip of one row.
func BenchmarkStats1Row(b *testing.B) {
	rec := SampleRecord(1, 1)
	defer rec.Release()
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = appendStatsBlock(buf[:0], ComputeStats(rec))
		if _, _, err := parseStatsBlock(buf, true); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendRecordBatch1Row is BenchmarkAppendPath1Row with the
// one-pass AppendRecordBatch the write path uses.
func BenchmarkAppendRecordBatch1Row(b *testing.B) {
	s := SampleSchema()
	js := SampleJSON(1, 1)
	b.ReportAllocs()
	var buf []byte
	for b.Loop() {
		rec, err := DecodeJSONRows(s, js, nil)
		if err != nil {
			b.Fatal(err)
		}
		buf, err = AppendRecordBatch(buf[:0], BatchHeader{RecordCount: 1, SchemaID: s.ID}, rec, CompressionNone, 0)
		rec.Release()
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := ParseBatch(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkJSONRowsAppendBatch1Row is BenchmarkAppendRecordBatch1Row the
// way the write path now goes for one bucket: the batch is encoded straight
// from the decoder's buffers (JSONRows), then validated as the replica does.
func BenchmarkJSONRowsAppendBatch1Row(b *testing.B) {
	s := SampleSchema()
	js := SampleJSON(1, 1)
	b.ReportAllocs()
	var buf []byte
	for b.Loop() {
		rows, err := DecodeJSON(s, js)
		if err != nil {
			b.Fatal(err)
		}
		buf, err = rows.AppendBatch(buf[:0], BatchHeader{RecordCount: 1, SchemaID: s.ID}, CompressionNone, 0)
		rows.Release()
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := CheckBatch(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeJSONLarge decodes 20,000 sample rows (~4 MB of JSON) as
// a request does above maxPooledParserInput (row by row), and with the
// whole parse for comparison of time only: its parser, pooled here with
// the values of the whole array, is never used on such sizes.
func BenchmarkDecodeJSONLarge(b *testing.B) {
	s := SampleSchema()
	js := SampleJSON(20000, 1)
	for _, tc := range []struct {
		name   string
		decode func(*Schema, []byte, []int) (JSONRows, error)
	}{{"row-by-row", decodeJSONRowByRow}, {"whole", decodeJSONWhole}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(js)))
			for b.Loop() {
				r, err := tc.decode(s, js, nil)
				if err != nil {
					b.Fatal(err)
				}
				r.Release()
			}
		})
	}
}
