package record

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TakeRows returns a new record holding rows idx of rec, in that order.
// Indexes must be within rec. It supports every column type of the table
// type system (and int8 change-type columns). mem nil = Go allocator.
func TakeRows(rec arrow.Record, idx []int, mem memory.Allocator) (arrow.Record, error) {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	cols := make([]arrow.Array, rec.NumCols())
	release := func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}
	for i := range cols {
		a, err := takeArray(rec.Column(i), idx, mem)
		if err != nil {
			release()
			return nil, fmt.Errorf("take rows: column %q: %w", rec.Schema().Field(i).Name, err)
		}
		cols[i] = a
	}
	out := array.NewRecordBatch(rec.Schema(), cols, int64(len(idx)))
	release()
	return out, nil
}

type valuer[T any] interface {
	arrow.Array
	Value(int) T
}

func takeFixed[T any, B interface {
	array.Builder
	Append(T)
}](src valuer[T], b B, idx []int) arrow.Array {
	defer b.Release()
	b.Reserve(len(idx))
	for _, r := range idx {
		if src.IsNull(r) {
			b.AppendNull()
		} else {
			b.Append(src.Value(r))
		}
	}
	return b.NewArray()
}

func takeArray(a arrow.Array, idx []int, mem memory.Allocator) (arrow.Array, error) {
	dt := a.DataType()
	switch c := a.(type) {
	case *array.Boolean:
		return takeFixed[bool](c, array.NewBooleanBuilder(mem), idx), nil
	case *array.Int8:
		return takeFixed[int8](c, array.NewInt8Builder(mem), idx), nil
	case *array.Int16:
		return takeFixed[int16](c, array.NewInt16Builder(mem), idx), nil
	case *array.Int32:
		return takeFixed[int32](c, array.NewInt32Builder(mem), idx), nil
	case *array.Int64:
		return takeFixed[int64](c, array.NewInt64Builder(mem), idx), nil
	case *array.Float32:
		return takeFixed[float32](c, array.NewFloat32Builder(mem), idx), nil
	case *array.Float64:
		return takeFixed[float64](c, array.NewFloat64Builder(mem), idx), nil
	case *array.Date32:
		return takeFixed[arrow.Date32](c, array.NewDate32Builder(mem), idx), nil
	case *array.Time32:
		return takeFixed[arrow.Time32](c, array.NewTime32Builder(mem, dt.(*arrow.Time32Type)), idx), nil
	case *array.Time64:
		return takeFixed[arrow.Time64](c, array.NewTime64Builder(mem, dt.(*arrow.Time64Type)), idx), nil
	case *array.Timestamp:
		return takeFixed[arrow.Timestamp](c, array.NewTimestampBuilder(mem, dt.(*arrow.TimestampType)), idx), nil
	case *array.Decimal128:
		return takeFixed[decimal128.Num](c, array.NewDecimal128Builder(mem, dt.(*arrow.Decimal128Type)), idx), nil
	case *array.String:
		return takeFixed[string](c, array.NewStringBuilder(mem), idx), nil
	case *array.Binary:
		return takeFixed[[]byte](c, array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary), idx), nil
	}
	return nil, fmt.Errorf("type %s is not supported", dt)
}
