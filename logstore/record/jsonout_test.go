package record

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
)

// AppendJSONValue writes every value exactly as AppendJSONRows writes it
// from the value's Arrow column (the form the read path uses: no Types).
func TestAppendJSONValueMatchesAppendJSONRows(t *testing.T) {
	s := allTypesSchema(t)
	var in []byte
	in = append(in, '[')
	for i, r := range canonicalRows {
		if i > 0 {
			in = append(in, ',')
		}
		in = append(in, r...)
	}
	in = append(in, ']')
	rec, err := DecodeJSONRows(s, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	for c, col := range s.Columns {
		a := rec.Column(c)
		for r := 0; r < int(rec.NumRows()); r++ {
			if a.IsNull(r) {
				continue
			}
			row := string(AppendJSONRows(nil, rec, r, r+1, &JSONOptions{Columns: []int{c}}))
			want := row[len(`[{"`+col.Name+`":`) : len(row)-2]
			var i, hi int64
			var f float64
			var b []byte
			switch v := a.(type) {
			case *array.Boolean:
				if v.Value(r) {
					i = 1
				}
			case *array.Int8:
				i = int64(v.Value(r))
			case *array.Int16:
				i = int64(v.Value(r))
			case *array.Int32:
				i = int64(v.Value(r))
			case *array.Int64:
				i = v.Value(r)
			case *array.Float32:
				f = float64(v.Value(r))
			case *array.Float64:
				f = v.Value(r)
			case *array.Decimal128:
				i, hi = int64(v.Value(r).LowBits()), v.Value(r).HighBits()
			case *array.String:
				b = []byte(v.Value(r))
			case *array.Binary:
				b = v.Value(r)
			case *array.Date32:
				i = int64(v.Value(r))
			case *array.Time32:
				i = int64(v.Value(r))
			case *array.Time64:
				i = int64(v.Value(r))
			case *array.Timestamp:
				i = int64(v.Value(r))
			default:
				t.Fatalf("column %s: unexpected array %T", col.Name, a)
			}
			if got := string(AppendJSONValue(nil, col.Type, i, hi, f, b)); got != want {
				t.Errorf("column %s row %d: %s, want %s", col.Name, r, got, want)
			}
		}
	}
}
