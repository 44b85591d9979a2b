package kvstore

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/fluss-node/fluss-node/logstore/record"
)

// The sample schema holds every type; a record → rows → changelog record →
// changes round trip keeps every value and null, and the changelog record
// equals the input record column by column.
func TestChangelogRecordRoundTrip(t *testing.T) {
	s := record.SampleSchema()
	s.PrimaryKey = []string{s.Columns[0].Name}
	rec := record.SampleRecord(300, 7)
	defer rec.Release()
	rows, err := RowsFromRecord(nil, s, rec)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 300 {
		t.Fatalf("%d rows", len(rows))
	}
	changes := make([]Change, len(rows))
	for i, r := range rows {
		changes[i] = Change{Type: ChangeType(i % 4), Row: r}
	}
	cl, err := ChangelogRecord(s, changes, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Release()
	for c := range s.Columns {
		if !array.Equal(rec.Column(c), cl.Column(c)) {
			t.Fatalf("column %s differs after the round trip", s.Columns[c].Name)
		}
	}
	back, err := ChangesFromRecord(nil, s, cl)
	if err != nil {
		t.Fatal(err)
	}
	codec, err := NewCodec(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range changes {
		if back[i].Type != changes[i].Type {
			t.Fatalf("change %d: type %v, want %v", i, back[i].Type, changes[i].Type)
		}
		a, _ := codec.AppendRow(nil, changes[i].Row)
		b, _ := codec.AppendRow(nil, back[i].Row)
		if string(a) != string(b) {
			t.Fatalf("change %d: row %s, want %s", i, fmtRow(s, back[i].Row), fmtRow(s, changes[i].Row))
		}
	}
}

func TestChangesFromRecordRejectsBadChangeType(t *testing.T) {
	s := mkSchema(t, []string{"id"}, "id BIGINT NOT NULL", "v STRING")
	cl, err := ChangelogRecord(s, []Change{{Type: Change{}.Type + 9, Row: Row{Int(1), Str("x")}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Release()
	if _, err := ChangesFromRecord(nil, s, cl); err == nil {
		t.Fatal("change type 9 accepted")
	}
}

// AppendRecordKey, which reads only the key columns of a record row, encodes
// every key (and refuses every null key) exactly as AppendKey does from the
// whole row, for each type a key column can have; AppendRecordBucketKey
// likewise matches AppendBucketKey.
func TestAppendRecordKeyMatchesAppendKey(t *testing.T) {
	base := record.SampleSchema()
	rec := record.SampleRecord(200, 3)
	defer rec.Release()
	tried := 0
	for _, col := range base.Columns {
		s := *base
		s.PrimaryKey = []string{col.Name}
		codec, err := NewCodec(&s, nil)
		if err != nil {
			continue // not a type a key may have
		}
		tried++
		rows, err := RowsFromRecord(nil, &s, rec)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range rows {
			want, wantErr := codec.AppendKey(nil, r)
			got, err := codec.AppendRecordKey(nil, rec, i)
			if (err != nil) != (wantErr != nil) || string(got) != string(want) {
				t.Fatalf("key %s, row %d: got %x, %v; want %x, %v", col.Name, i, got, err, want, wantErr)
			}
		}
	}
	if tried < 5 {
		t.Fatalf("only %d of %d sample columns could be keys", tried, len(base.Columns))
	}

	// A two-column key with the first as bucket key: the record's prefix
	// is AppendBucketKey of that column's value.
	s := *base
	s.PrimaryKey = []string{base.Columns[0].Name, base.Columns[1].Name}
	codec, err := NewCodec(&s, s.PrimaryKey[:1])
	if err != nil {
		t.Fatal(err)
	}
	rows, err := RowsFromRecord(nil, &s, rec)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rows {
		want, wantErr := codec.AppendBucketKey(nil, []Value{r[0]})
		got, err := codec.AppendRecordBucketKey(nil, rec, i)
		if (err != nil) != (wantErr != nil) || string(got) != string(want) {
			t.Fatalf("bucket key, row %d: got %x, %v; want %x, %v", i, got, err, want, wantErr)
		}
	}
}
