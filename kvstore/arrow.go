package kvstore

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/fluss-node/fluss-node/logstore/record"
)

// ChangeTypeColumn is the last column of every stored changelog batch of a
// primary-key table: the change type as TINYINT (0 +I, 1 -U, 2 +U, 3 -D,
// the ChangeType values). DESIGN §7: "change types as an extra column".
const ChangeTypeColumn = "_change_type"

// changelogSchemas caches ChangelogArrowSchema per *record.Schema (catalog
// schemas are immutable).
var changelogSchemas record.Memo[*record.Schema, *arrow.Schema]

// ChangelogArrowSchema is the Arrow schema of the stored changelog batches
// of a primary-key table with schema s: s's columns, then _change_type int8
// NOT NULL. Shared; callers must not modify it.
func ChangelogArrowSchema(s *record.Schema) *arrow.Schema {
	return changelogSchemas.Get(s, func() *arrow.Schema {
		base := s.ArrowSchema()
		fields := make([]arrow.Field, 0, base.NumFields()+1)
		fields = append(fields, base.Fields()...)
		fields = append(fields, arrow.Field{Name: ChangeTypeColumn, Type: arrow.PrimitiveTypes.Int8})
		return arrow.NewSchema(fields, nil)
	})
}

// RowsFromRecord converts the first len(s.Columns) columns of rec (in
// schema order, with s's Arrow types) into rows appended to dst. STRING and
// BYTES values are copied: the rows outlive rec.
func RowsFromRecord(dst []Row, s *record.Schema, rec arrow.Record) ([]Row, error) {
	if int(rec.NumCols()) < len(s.Columns) {
		return dst, fmt.Errorf("%w: record has %d columns, schema %d", ErrBadRow, rec.NumCols(), len(s.Columns))
	}
	n := int(rec.NumRows())
	start := len(dst)
	flat := make([]Value, n*len(s.Columns))
	for r := 0; r < n; r++ {
		dst = append(dst, flat[r*len(s.Columns):(r+1)*len(s.Columns):(r+1)*len(s.Columns)])
	}
	rows := dst[start:]
	for c := range s.Columns {
		if err := readColumn(rows, c, rec.Column(c)); err != nil {
			return dst[:start], fmt.Errorf("column %q: %w", s.Columns[c].Name, err)
		}
	}
	return dst, nil
}

// readColumn fills value c of every row from a.
func readColumn(rows []Row, c int, a arrow.Array) error {
	switch a := a.(type) {
	case *array.String:
		setVar(rows, c, a, a.ValueBytes(), a.ValueOffsets())
		return nil
	case *array.Binary:
		setVar(rows, c, a, a.ValueBytes(), a.ValueOffsets())
		return nil
	}
	for r := range rows {
		v, err := ValueAt(a, r)
		if err != nil {
			return err
		}
		rows[r][c] = v
	}
	return nil
}

// ValueAt returns value r of a, an array of one of the Arrow types of a
// schema column (record.Schema.ArrowSchema). A STRING or BYTES value
// aliases a's buffer.
func ValueAt(a arrow.Array, r int) (Value, error) {
	if a.IsNull(r) {
		return Null(), nil
	}
	switch a := a.(type) {
	case *array.Boolean:
		return Bool(a.Value(r)), nil
	case *array.Int8:
		return Int(int64(a.Value(r))), nil
	case *array.Int16:
		return Int(int64(a.Value(r))), nil
	case *array.Int32:
		return Int(int64(a.Value(r))), nil
	case *array.Int64:
		return Int(a.Value(r)), nil
	case *array.Date32:
		return Int(int64(a.Value(r))), nil
	case *array.Time32:
		return Int(int64(a.Value(r))), nil
	case *array.Time64:
		return Int(int64(a.Value(r))), nil
	case *array.Timestamp:
		return Int(int64(a.Value(r))), nil
	case *array.Float32:
		return Float(float64(a.Value(r))), nil
	case *array.Float64:
		return Float(a.Value(r)), nil
	case *array.Decimal128:
		v := a.Value(r)
		return Dec(v.HighBits(), v.LowBits()), nil
	case *array.String:
		offs := a.ValueOffsets()
		return Value{B: a.ValueBytes()[offs[r]-offs[0] : offs[r+1]-offs[0]]}, nil
	case *array.Binary:
		return Value{B: a.Value(r)}, nil
	}
	return Value{}, fmt.Errorf("%w: unsupported Arrow type %s", ErrBadRow, a.DataType())
}

// setVar fills value c of every row from a STRING or BYTES column with one
// copy of its value bytes, sliced per row.
func setVar(rows []Row, c int, a arrow.Array, values []byte, offs []int32) {
	data := append([]byte(nil), values...)
	for r := range rows {
		if a.IsNull(r) {
			rows[r][c] = Null()
			continue
		}
		s, e := offs[r]-offs[0], offs[r+1]-offs[0]
		rows[r][c] = Value{B: data[s:e:e]}
	}
}

// ChangelogRecord builds the Arrow record (ChangelogArrowSchema(s)) of a
// changelog. The caller releases it. mem nil means the Go allocator.
func ChangelogRecord(s *record.Schema, changes []Change, mem memory.Allocator) (arrow.Record, error) {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	b := array.NewRecordBuilder(mem, ChangelogArrowSchema(s))
	defer b.Release()
	b.Reserve(len(changes))
	for c := range s.Columns {
		if err := appendColumn(b.Field(c), changes, c); err != nil {
			return nil, fmt.Errorf("column %q: %w", s.Columns[c].Name, err)
		}
	}
	ct := b.Field(len(s.Columns)).(*array.Int8Builder)
	for _, ch := range changes {
		ct.Append(int8(ch.Type))
	}
	return b.NewRecord(), nil
}

// appendColumn appends value c of every change's row to fb.
func appendColumn(fb array.Builder, changes []Change, c int) error {
	each := func(f func(v Value)) {
		for _, ch := range changes {
			if len(ch.Row) <= c || ch.Row[c].Null {
				fb.AppendNull()
				continue
			}
			f(ch.Row[c])
		}
	}
	switch b := fb.(type) {
	case *array.BooleanBuilder:
		each(func(v Value) { b.Append(v.I != 0) })
	case *array.Int8Builder:
		each(func(v Value) { b.Append(int8(v.I)) })
	case *array.Int16Builder:
		each(func(v Value) { b.Append(int16(v.I)) })
	case *array.Int32Builder:
		each(func(v Value) { b.Append(int32(v.I)) })
	case *array.Int64Builder:
		each(func(v Value) { b.Append(v.I) })
	case *array.Date32Builder:
		each(func(v Value) { b.Append(arrow.Date32(v.I)) })
	case *array.Time32Builder:
		each(func(v Value) { b.Append(arrow.Time32(v.I)) })
	case *array.Time64Builder:
		each(func(v Value) { b.Append(arrow.Time64(v.I)) })
	case *array.TimestampBuilder:
		each(func(v Value) { b.Append(arrow.Timestamp(v.I)) })
	case *array.Float32Builder:
		each(func(v Value) { b.Append(float32(v.F)) })
	case *array.Float64Builder:
		each(func(v Value) { b.Append(v.F) })
	case *array.Decimal128Builder:
		each(func(v Value) { b.Append(decimal128.New(v.Hi, uint64(v.I))) })
	case *array.StringBuilder:
		each(func(v Value) { b.BinaryBuilder.Append(v.B) })
	case *array.BinaryBuilder:
		each(func(v Value) { b.Append(v.B) })
	default:
		return fmt.Errorf("%w: unsupported Arrow builder %T", ErrBadRow, fb)
	}
	return nil
}

// ChangesFromRecord decodes a changelog record (ChangelogArrowSchema(s))
// into changes appended to dst. The rows do not alias rec.
func ChangesFromRecord(dst []Change, s *record.Schema, rec arrow.Record) ([]Change, error) {
	if int(rec.NumCols()) != len(s.Columns)+1 {
		return dst, fmt.Errorf("%w: changelog record has %d columns, want %d", ErrCorrupt, rec.NumCols(), len(s.Columns)+1)
	}
	ct, ok := rec.Column(len(s.Columns)).(*array.Int8)
	if !ok {
		return dst, fmt.Errorf("%w: %s column is %s, want int8", ErrCorrupt, ChangeTypeColumn, rec.Column(len(s.Columns)).DataType())
	}
	rows, err := RowsFromRecord(nil, s, rec)
	if err != nil {
		return dst, err
	}
	for i, row := range rows {
		if ct.IsNull(i) || ct.Value(i) < int8(Insert) || ct.Value(i) > int8(Delete) {
			return dst, fmt.Errorf("%w: row %d: bad change type", ErrCorrupt, i)
		}
		dst = append(dst, Change{Type: ChangeType(ct.Value(i)), Row: row})
	}
	return dst, nil
}
