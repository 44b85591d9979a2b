package record

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestAppendRecordBatchMatchesAppendBatch(t *testing.T) {
	for _, rows := range []int{0, 1, 7, 300} {
		for _, c := range []Compression{CompressionNone, CompressionLZ4Frame, CompressionZSTD} {
			t.Run(fmt.Sprintf("%s/%d", c, rows), func(t *testing.T) {
				rec := SampleRecord(rows, int64(rows)+1)
				defer rec.Release()
				h := BatchHeader{Attributes: AttrChangeType | 0x3, BaseOffset: 9, RecordCount: int32(rows), CommitTimestamp: 5, WriterID: 77, BatchSequence: 3, SchemaID: 2}
				body, err := EncodeBody(rec, c, 3)
				if err != nil {
					t.Fatal(err)
				}
				wh := h
				wh.Attributes = h.Attributes&AttrChangeType | uint16(c)
				want := AppendBatch([]byte("prefix"), wh, ComputeStats(rec), body)
				got, err := AppendRecordBatch([]byte("prefix"), h, rec, c, 3)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("AppendRecordBatch differs from AppendBatch: %d vs %d bytes", len(got), len(want))
				}
				b, n, err := ParseBatch(got[len("prefix"):])
				if err != nil || n != len(got)-len("prefix") {
					t.Fatalf("ParseBatch: n=%d err=%v", n, err)
				}
				if b.Compression() != c || b.Stats == nil {
					t.Fatalf("compression %s stats %v", b.Compression(), b.Stats != nil)
				}
			})
		}
	}
}

func TestAppendRecordBatchBadCompression(t *testing.T) {
	rec := SampleRecord(1, 1)
	defer rec.Release()
	dst := []byte("keep")
	for _, tc := range []struct {
		c     Compression
		level int
	}{{3, 0}, {CompressionZSTD, 99}, {CompressionZSTD, -1}} {
		got, err := AppendRecordBatch(dst, BatchHeader{}, rec, tc.c, tc.level)
		if !errors.Is(err, ErrBadCompression) {
			t.Fatalf("%v/%d: err %v, want ErrBadCompression", tc.c, tc.level, err)
		}
		if string(got) != "keep" {
			t.Fatalf("dst changed on error: %q", got)
		}
	}
}

func TestComputeStatsDoesNotAlias(t *testing.T) {
	rec := SampleRecord(20, 3)
	defer rec.Release()
	stats := ComputeStats(rec)
	var found bool
	for i, st := range stats {
		if st.MinBytes == nil {
			continue
		}
		found = true
		min, max := bytes.Clone(st.MinBytes), bytes.Clone(st.MaxBytes)
		// Appending to MinBytes must not overwrite MaxBytes.
		_ = append(st.MinBytes, 'x', 'y', 'z')
		if !bytes.Equal(st.MaxBytes, max) || !bytes.Equal(st.MinBytes, min) {
			t.Fatalf("column %d: bounds share memory", i)
		}
	}
	if !found {
		t.Fatal("SampleRecord has no string column stats")
	}
}

func TestSchemaStateCached(t *testing.T) {
	s := SampleSchema()
	a1, a2 := s.ArrowSchema(), s.ArrowSchema()
	if a1 != a2 {
		t.Fatal("ArrowSchema is rebuilt on every call")
	}
	// Replacing the columns (not done by the catalog, but possible) gives a
	// fresh Arrow schema.
	s.Columns = append([]Column(nil), s.Columns[:3]...)
	if a3 := s.ArrowSchema(); a3 == a1 || a3.NumFields() != 3 {
		t.Fatalf("stale Arrow schema after Columns changed: %d fields", a3.NumFields())
	}
}

// A failed decode leaves its pooled builder empty: the next decode of the
// same schema has exactly its own rows.
func TestDecodeJSONRowsAfterFailure(t *testing.T) {
	s := SampleSchema()
	good := SampleJSON(3, 1)
	for i := 0; i < 5; i++ {
		// Row 1 is bad after row 0 filled every column.
		bad := []byte(`[{"event_id":1,"user_id":2,"ts":3,"event_type":"a","country":"x","amount":"1.5","quantity":1,"price":1.5,"session":"s","is_mobile":true},{"event_id":"nope"}]`)
		if _, err := DecodeJSONRows(s, bad, nil); !errors.Is(err, ErrBadRow) {
			t.Fatalf("bad rows: err %v", err)
		}
		rec, err := DecodeJSONRows(s, good, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		if rec.NumRows() != 3 {
			t.Fatalf("%d rows, want 3", rec.NumRows())
		}
		for c := 0; c < int(rec.NumCols()); c++ {
			if rec.Column(c).Len() != 3 {
				t.Fatalf("column %d has %d values, want 3", c, rec.Column(c).Len())
			}
		}
		ref := SampleRecord(3, 1)
		want := AppendJSONRows(nil, ref, 0, 3, nil)
		ref.Release()
		if got := AppendJSONRows(nil, rec, 0, 3, nil); !bytes.Equal(got, want) {
			t.Fatalf("decoded rows differ:\n%s\n%s", got, want)
		}
		rec.Release()
	}
}

// Concurrent decodes and encodes of one schema share its cached state
// (run with -race).
func TestSchemaStateConcurrent(t *testing.T) {
	s := SampleSchema()
	js := SampleJSON(4, 2)
	ref, err := DecodeJSONRows(s, js, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := AppendRecordBatch(nil, BatchHeader{RecordCount: 4}, ref, CompressionNone, 0)
	ref.Release()
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		go func() {
			for i := 0; i < 50; i++ {
				rec, err := DecodeJSONRows(s, js, nil)
				if err != nil {
					errs <- err
					return
				}
				got, err := AppendRecordBatch(nil, BatchHeader{RecordCount: 4}, rec, CompressionNone, 0)
				rec.Release()
				if err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(got, want) {
					errs <- fmt.Errorf("goroutine batch differs")
					return
				}
			}
			errs <- nil
		}()
	}
	for g := 0; g < 8; g++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
