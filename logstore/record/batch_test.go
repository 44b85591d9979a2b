package record

import (
	"bytes"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

func sampleBatch(t testing.TB, n int, c Compression, withStats bool) []byte {
	t.Helper()
	rec := SampleRecord(n, 5)
	defer rec.Release()
	body, err := EncodeBody(rec, c, 3)
	if err != nil {
		t.Fatal(err)
	}
	var stats []ColumnStats
	if withStats {
		stats = ComputeStats(rec)
	}
	return AppendBatch(nil, BatchHeader{Attributes: uint16(c), RecordCount: int32(n), SchemaID: 1, WriterID: 77, BatchSequence: 5}, stats, body)
}

func TestParseCompression(t *testing.T) {
	for in, want := range map[string]Compression{"none": CompressionNone, "LZ4_FRAME": CompressionLZ4Frame, "zstd": CompressionZSTD, "Lz4": CompressionLZ4Frame} {
		got, err := ParseCompression(in)
		if err != nil || got != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
		if back, _ := ParseCompression(got.String()); back != got {
			t.Errorf("String/Parse of %v", got)
		}
	}
	if _, err := ParseCompression("snappy"); !errors.Is(err, ErrBadCompression) {
		t.Errorf("snappy: %v", err)
	}
}

func TestBatchHeaderRoundTrip(t *testing.T) {
	stats := []ColumnStats{
		{NullCount: 1, HasMinMax: true, MinInt: -5, MaxInt: 9},
		{NullCount: 0, HasMinMax: true, MinFloat: -1.5, MaxFloat: 2.25},
		{HasMinMax: true, MinDecimal: decimal128.FromI64(-7), MaxDecimal: decimal128.New(3, 4)},
		{NullCount: 2, HasMinMax: true, MinBytes: []byte("a"), MaxBytes: []byte("zz")},
		{NullCount: 3},
	}
	h := BatchHeader{Attributes: uint16(CompressionZSTD) | AttrChangeType, BaseOffset: -1, RecordCount: 10, CommitTimestamp: 123, WriterID: -2, BatchSequence: 1 << 30, SchemaID: 3}
	for _, tc := range []struct {
		name  string
		stats []ColumnStats
	}{{"no stats", nil}, {"stats", stats}, {"empty stats", []ColumnStats{}}} {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte("\xff\xff\xff\xffbody")
			prefix := []byte("prefix")
			b := AppendBatch(append([]byte{}, prefix...), h, tc.stats, body)
			if !bytes.Equal(b[:len(prefix)], prefix) {
				t.Fatal("prefix clobbered")
			}
			b = b[len(prefix):]
			bt, n, err := ParseBatch(b)
			if err != nil {
				t.Fatal(err)
			}
			wantAttrs := h.Attributes
			if tc.stats != nil {
				wantAttrs |= AttrStats
			}
			if n != len(b) || bt.Attributes != wantAttrs || bt.BaseOffset != -1 || bt.RecordCount != 10 || bt.CommitTimestamp != 123 ||
				bt.WriterID != -2 || bt.BatchSequence != 1<<30 || bt.SchemaID != 3 || !bytes.Equal(bt.Body, body) {
				t.Fatalf("parsed %+v n=%d", bt, n)
			}
			if hl, _ := BatchLen(b); hl != len(b) {
				t.Fatalf("BatchLen %d, len %d", hl, len(b))
			}
			if (len(b)-len(body))%8 != 0 {
				t.Fatalf("header length %d not 8-aligned", len(b)-len(body))
			}
			if len(bt.Stats) != len(tc.stats) || (tc.stats == nil) != (bt.Stats == nil) {
				t.Fatalf("stats %v", bt.Stats)
			}
			for i := range tc.stats {
				w, g := tc.stats[i], bt.Stats[i]
				if w.NullCount != g.NullCount || w.HasMinMax != g.HasMinMax || w.MinInt != g.MinInt || w.MaxInt != g.MaxInt ||
					w.MinFloat != g.MinFloat || w.MaxFloat != g.MaxFloat || w.MinDecimal != g.MinDecimal || w.MaxDecimal != g.MaxDecimal ||
					!bytes.Equal(w.MinBytes, g.MinBytes) || !bytes.Equal(w.MaxBytes, g.MaxBytes) {
					t.Errorf("stats %d: got %+v want %+v", i, g, w)
				}
			}
		})
	}
}

func TestBatchCRCDetectsEveryFlippedByte(t *testing.T) {
	b := sampleBatch(t, 20, CompressionLZ4Frame, true)
	if _, _, err := ParseBatch(b); err != nil {
		t.Fatal(err)
	}
	for i := range b {
		for _, mask := range []byte{0x01, 0x80} {
			c := bytes.Clone(b)
			c[i] ^= mask
			if _, _, err := ParseBatch(c); !errors.Is(err, ErrCorruptBatch) {
				t.Fatalf("flip 0x%02x at byte %d of %d not detected: %v", mask, i, len(b), err)
			}
		}
	}
}

func TestBatchTruncated(t *testing.T) {
	b := sampleBatch(t, 5, CompressionNone, true)
	for n := 0; n < len(b); n++ {
		_, _, err := ParseBatch(b[:n])
		if !errors.Is(err, ErrTruncatedBatch) || !errors.Is(err, ErrCorruptBatch) {
			t.Fatalf("prefix of %d bytes: %v", n, err)
		}
	}
}

func TestBatchIterAndRestamp(t *testing.T) {
	var buf []byte
	var ends []int
	for i := 0; i < 3; i++ {
		buf = append(buf, sampleBatch(t, 3+i, CompressionZSTD, i%2 == 0)...)
		ends = append(ends, len(buf))
	}
	// Stamp offsets as a leader would.
	next := int64(100)
	for pos := 0; pos < len(buf); {
		n, err := BatchLen(buf[pos:])
		if err != nil {
			t.Fatal(err)
		}
		Restamp(buf[pos:pos+n], next, 5000+next)
		bt, _, err := ParseBatch(buf[pos:])
		if err != nil {
			t.Fatalf("after Restamp: %v", err)
		}
		next += int64(bt.RecordCount)
		pos += n
	}
	torn := append(bytes.Clone(buf), buf[:30]...)
	it := NewBatchIter(torn)
	var got []int64
	for it.Next() {
		got = append(got, it.Batch().BaseOffset, it.Batch().CommitTimestamp, it.Batch().LastOffset())
		if it.Pos() != ends[len(got)/3-1] {
			t.Fatalf("pos %d", it.Pos())
		}
	}
	want := []int64{100, 5100, 102, 103, 5103, 106, 107, 5107, 111}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v want %v", got, want)
		}
	}
	if !errors.Is(it.Err(), ErrTruncatedBatch) || it.Pos() != len(buf) {
		t.Fatalf("torn tail: err %v pos %d", it.Err(), it.Pos())
	}
	rest := buf
	count := 0
	for {
		_, r, ok, err := NextBatch(rest)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		rest = r
		count++
	}
	if count != 3 {
		t.Fatalf("NextBatch saw %d batches", count)
	}
}

// TestCheckBatchAllocatesNothing: the write path validates every batch
// with CheckBatch; it returns what ParseBatch does but the stats, without
// allocating.
func TestCheckBatchAllocatesNothing(t *testing.T) {
	b := sampleBatch(t, 3, CompressionNone, true)
	want, wn, err := ParseBatch(b)
	if err != nil || len(want.Stats) == 0 {
		t.Fatalf("ParseBatch: %d stats, %v", len(want.Stats), err)
	}
	got, n, err := CheckBatch(b)
	if err != nil || n != wn || got.BatchHeader != want.BatchHeader || got.Stats != nil || !bytes.Equal(got.Body, want.Body) {
		t.Fatalf("CheckBatch = %+v, %d, %v; want %+v, %d without stats", got.BatchHeader, n, err, want.BatchHeader, wn)
	}
	if a := testing.AllocsPerRun(100, func() { CheckBatch(b) }); a != 0 {
		t.Fatalf("CheckBatch allocates %v times per call", a)
	}
}

func TestBatchRejectsBadHeaders(t *testing.T) {
	good := sampleBatch(t, 2, CompressionNone, false)
	tests := []struct {
		name string
		mut  func(b []byte)
	}{
		{"magic", func(b []byte) { b[0] = 0 }},
		{"version", func(b []byte) { b[1] = 2 }},
		{"attr bits", func(b []byte) { b[3] = 0x80 }},
		{"compression 3", func(b []byte) { b[2] |= 3 }},
		{"header length", func(b []byte) { b[4] = 60 }},
		{"negative count", func(b []byte) { b[23] = 0x80 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := bytes.Clone(good)
			tc.mut(b)
			Restamp(b, 0, 0) // fix the CRC so the structural check is what fails
			if _, _, err := ParseBatch(b); !errors.Is(err, ErrCorruptBatch) {
				t.Fatalf("accepted: %v", err)
			}
		})
	}
}

// TestBodyIsArrowStream: schema message + body + EOS is a stream that
// arrow-go's own reader accepts.
func TestBodyIsArrowStream(t *testing.T) {
	s := SampleSchema()
	rec := SampleRecord(50, 9)
	defer rec.Release()
	for _, c := range []Compression{CompressionNone, CompressionLZ4Frame, CompressionZSTD} {
		body, err := EncodeBody(rec, c, 3)
		if err != nil {
			t.Fatal(err)
		}
		body2, err := EncodeBody(rec, c, 3) // pooled encoder path
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(body, body2) {
			t.Fatalf("%v: pooled encoder output differs", c)
		}
		stream := append(append(append([]byte{}, SchemaMessage(s.ArrowSchema())...), body...), StreamSuffix...)
		r, err := ipc.NewReader(bytes.NewReader(stream))
		if err != nil {
			t.Fatal(err)
		}
		if !r.Next() {
			t.Fatalf("%v: no record: %v", c, r.Err())
		}
		if !array.RecordEqual(r.RecordBatch(), rec) {
			t.Fatalf("%v: record differs", c)
		}
		if r.Next() {
			t.Fatalf("%v: extra record", c)
		}
		r.Release()
	}
}

func TestDecodeBodyRejectsGarbage(t *testing.T) {
	s := SampleSchema().ArrowSchema()
	rec := SampleRecord(10, 1)
	defer rec.Release()
	body, _ := EncodeBody(rec, CompressionNone, 0)
	for _, in := range [][]byte{nil, []byte("nope"), body[:len(body)/2], append([]byte{0xff, 0xff, 0xff, 0xff, 4, 0, 0, 0}, 1, 2, 3, 4)} {
		if r, err := DecodeBody(s, in, nil); !errors.Is(err, ErrBadBody) {
			if r != nil {
				r.Release()
			}
			t.Fatalf("accepted %d bytes: %v", len(in), err)
		}
	}
}

func FuzzParseBatch(f *testing.F) {
	f.Add(sampleBatch(f, 3, CompressionNone, true))
	f.Add(sampleBatch(f, 1, CompressionLZ4Frame, false))
	f.Add(AppendBatch(nil, BatchHeader{}, []ColumnStats{{HasMinMax: true, MinBytes: []byte("x"), MaxBytes: []byte("y")}}, nil))
	f.Add([]byte{0xFB, 1})
	s := SampleSchema().ArrowSchema()
	f.Fuzz(func(t *testing.T, data []byte) {
		orig := bytes.Clone(data)
		bt, n, err := ParseBatch(data)
		if !bytes.Equal(orig, data) {
			t.Fatal("ParseBatch modified its input")
		}
		// CheckBatch accepts and refuses exactly what ParseBatch does.
		ct, cn, cerr := CheckBatch(data)
		if (cerr == nil) != (err == nil) || cn != n || ct.BatchHeader != bt.BatchHeader || ct.Stats != nil || !bytes.Equal(ct.Body, bt.Body) {
			t.Fatalf("CheckBatch = %+v, %d, %v; ParseBatch = %+v, %d, %v", ct.BatchHeader, cn, cerr, bt.BatchHeader, n, err)
		}
		if err != nil {
			if !errors.Is(err, ErrCorruptBatch) {
				t.Fatalf("error %v does not wrap ErrCorruptBatch", err)
			}
			return
		}
		if n > len(data) || n < MinBatchHeaderLen || len(bt.Body) > n {
			t.Fatalf("n=%d len=%d body=%d", n, len(data), len(bt.Body))
		}
		// Re-encoding the parsed batch gives the same bytes, up to padding.
		again := AppendBatch(nil, bt.BatchHeader, bt.Stats, bt.Body)
		if len(again) != n {
			t.Fatalf("re-encoded length %d, parsed %d", len(again), n)
		}
		if rec, err := DecodeBody(s, bt.Body, nil); err == nil {
			rec.Release()
		}
	})
}
