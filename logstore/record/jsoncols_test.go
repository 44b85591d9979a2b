package record

import (
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestJSONDecodeOtherAllocator: with an allocator other than the Go one,
// every buffer comes from it, the record equals the Go-allocator one, and
// releasing the record frees everything.
func TestJSONDecodeOtherAllocator(t *testing.T) {
	s := allTypesSchema(t)
	in := []byte("[" + strings.Join(canonicalRows, ",") + "]")
	want, err := DecodeJSONRows(s, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer want.Release()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	got, err := DecodeJSONRows(s, in, mem)
	if err != nil {
		t.Fatal(err)
	}
	if mem.CurrentAlloc() == 0 {
		t.Fatal("nothing allocated from the given allocator")
	}
	if !array.RecordApproxEqual(got, want, array.WithNaNsEqual(true)) {
		t.Fatal("records differ between allocators")
	}
	got.Release()
	mem.AssertSize(t, 0)
}

// TestJSONDecoderReuse: pooled decoders carry nothing from one call into
// the next: not across schemas, not after a failure half-way through a
// row, not from a partial decode into a full one.
func TestJSONDecoderReuse(t *testing.T) {
	wide := allTypesSchema(t)
	narrow := &Schema{ID: 2, Columns: []Column{
		{Name: "id", Type: Type{Kind: KindBigInt}},
		{Name: "s", Type: Type{Kind: KindString}, Nullable: true},
	}}
	wideRows := []byte("[" + strings.Join(canonicalRows, ",") + "]")
	wideOut := func() string {
		rec, err := DecodeJSONRows(wide, wideRows, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer rec.Release()
		return string(AppendJSONRows(nil, rec, 0, int(rec.NumRows()), &JSONOptions{Types: schemaTypes(wide)}))
	}
	first := wideOut()
	steps := []struct {
		name string
		run  func() error
		want string // error text, "" for success
	}{
		{"narrow ok", func() error {
			rec, err := DecodeJSONRows(narrow, []byte(`[{"id":5,"s":"abc"},{"id":6}]`), nil)
			if err != nil {
				return err
			}
			defer rec.Release()
			if got := string(AppendJSONRows(nil, rec, 0, 2, nil)); got != `[{"id":5,"s":"abc"},{"id":6,"s":null}]` {
				t.Errorf("narrow: got %s", got)
			}
			return nil
		}, ""},
		{"fails in second row", func() error {
			_, err := DecodeJSONRows(narrow, []byte(`[{"id":1,"s":"x"},{"s":"y","id":"z"}]`), nil)
			return err
		}, `row 1, column "id"`},
		{"partial fails", func() error {
			_, err := DecodeJSONRowsPartial(narrow, []byte(`[{"id":1,"s":"x"}]`), []int{0}, nil)
			return err
		}, "not one of the target columns"},
		{"full after partial", func() error {
			rec, err := DecodeJSONRows(narrow, []byte(`[{"s":"q","id":7}]`), nil)
			if err != nil {
				return err
			}
			defer rec.Release()
			if got := string(AppendJSONRows(nil, rec, 0, 1, nil)); got != `[{"id":7,"s":"q"}]` {
				t.Errorf("full after partial: got %s", got)
			}
			return nil
		}, ""},
		{"wide again", func() error {
			if got := wideOut(); got != first {
				t.Errorf("wide decode changed after reuse:\n got %s\nwant %s", got, first)
			}
			return nil
		}, ""},
	}
	for round := 0; round < 3; round++ {
		for _, st := range steps {
			err := st.run()
			switch {
			case st.want == "" && err != nil:
				t.Fatalf("round %d %s: %v", round, st.name, err)
			case st.want != "" && (!errors.Is(err, ErrBadRow) || !strings.Contains(err.Error(), st.want)):
				t.Fatalf("round %d %s: error %v, want %q", round, st.name, err, st.want)
			}
		}
	}
}

// TestJSONDecodeNullCounts: null counts and validity match the rows, for
// row counts around byte boundaries of the bitmaps.
func TestJSONDecodeNullCounts(t *testing.T) {
	s := &Schema{ID: 3, Columns: []Column{
		{Name: "b", Type: Type{Kind: KindBoolean}, Nullable: true},
		{Name: "s", Type: Type{Kind: KindString}, Nullable: true},
		{Name: "i", Type: Type{Kind: KindInt}, Nullable: true},
	}}
	for _, n := range []int{0, 1, 7, 8, 9, 17} {
		var sb strings.Builder
		sb.WriteByte('[')
		wantNulls := 0
		for i := 0; i < n; i++ {
			if i > 0 {
				sb.WriteByte(',')
			}
			if i%3 == 0 {
				sb.WriteString(`{}`)
				wantNulls++
			} else {
				sb.WriteString(`{"b":true,"s":"v","i":1}`)
			}
		}
		sb.WriteByte(']')
		rec, err := DecodeJSONRows(s, []byte(sb.String()), nil)
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if err := ValidateRecord(s, rec); err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		for ci, c := range rec.Columns() {
			if c.NullN() != wantNulls {
				t.Errorf("n=%d col %d: %d nulls, want %d", n, ci, c.NullN(), wantNulls)
			}
			for i := 0; i < n; i++ {
				if c.IsNull(i) != (i%3 == 0) {
					t.Errorf("n=%d col %d row %d: IsNull = %v", n, ci, i, c.IsNull(i))
				}
			}
		}
		if b := rec.Column(0).(*array.Boolean); n > 1 && !b.Value(1) {
			t.Errorf("n=%d: boolean row 1 is false", n)
		}
		rec.Release()
	}
}
