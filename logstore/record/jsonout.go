package record

import (
	"encoding/base64"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

// ExtraColumns adds members to every row object written by AppendJSONRows:
// Names[i] is the member name and Append appends the JSON value of member
// i for row (a complete JSON value: number, "string", null…).
type ExtraColumns struct {
	Names  []string
	Append func(dst []byte, row, i int) []byte
}

// JSONOptions tunes AppendJSONRows. The zero value writes every column
// under its Arrow field name.
type JSONOptions struct {
	// Columns selects and orders the record columns to write; nil = all.
	Columns []int
	// Names overrides the member names, one per written column; nil = the
	// Arrow field names.
	Names []string
	// Rows, when non-nil, lists the rows to write (in that order) instead
	// of the range [from, to).
	Rows []int
	// Leading and Trailing members come before and after the columns.
	Leading, Trailing ExtraColumns
	// NDJSON writes one object per line instead of a JSON array.
	NDJSON bool
	// Types, when non-nil, gives the table type of each written column;
	// TIME/TIMESTAMP then print exactly Type.Precision fraction digits
	// (without it: the digits of the Arrow unit, 3, 6 or 9).
	Types []Type
}

// AppendJSONRows appends rows [from, to) of rec (or o.Rows) to dst as a JSON
// array of objects (FORMAT.md §2 lists the emitted forms) and returns the
// extended buffer. o may be nil. Row indexes must be within rec.
func AppendJSONRows(dst []byte, rec arrow.Record, from, to int, o *JSONOptions) []byte {
	if o == nil {
		o = &JSONOptions{}
	}
	cols := o.Columns
	if cols == nil {
		cols = make([]int, rec.NumCols())
		for i := range cols {
			cols[i] = i
		}
	}
	// Pre-escape member names once: `"name":`.
	keys := make([][]byte, len(cols))
	for k, ci := range cols {
		name := rec.Schema().Field(ci).Name
		if o.Names != nil {
			name = o.Names[k]
		}
		keys[k] = append(appendJSONString(nil, name), ':')
	}
	writers := make([]valueWriter, len(cols))
	for k, ci := range cols {
		prec := -1
		if o.Types != nil {
			prec = o.Types[k].Precision
		}
		writers[k] = newValueWriter(rec.Column(ci), prec)
	}
	n := to - from
	if o.Rows != nil {
		n = len(o.Rows)
	}
	if !o.NDJSON {
		dst = append(dst, '[')
	}
	for k := 0; k < n; k++ {
		row := from + k
		if o.Rows != nil {
			row = o.Rows[k]
		}
		if k > 0 && !o.NDJSON {
			dst = append(dst, ',')
		}
		dst = append(dst, '{')
		first := true
		for i, name := range o.Leading.Names {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = appendJSONString(dst, name)
			dst = append(dst, ':')
			dst = o.Leading.Append(dst, row, i)
		}
		for c, w := range writers {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = append(dst, keys[c]...)
			dst = w(dst, row)
		}
		for i, name := range o.Trailing.Names {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = appendJSONString(dst, name)
			dst = append(dst, ':')
			dst = o.Trailing.Append(dst, row, i)
		}
		dst = append(dst, '}')
		if o.NDJSON {
			dst = append(dst, '\n')
		}
	}
	if !o.NDJSON {
		dst = append(dst, ']')
	}
	return dst
}

type valueWriter func(dst []byte, row int) []byte

func nullable(a arrow.Array, w valueWriter) valueWriter {
	if a.NullN() == 0 {
		return w
	}
	return func(dst []byte, row int) []byte {
		if a.IsNull(row) {
			return append(dst, "null"...)
		}
		return w(dst, row)
	}
}

func newValueWriter(a arrow.Array, prec int) valueWriter {
	fixPrec := func(unitPrec int) int {
		if prec >= 0 && prec <= unitPrec {
			return prec
		}
		return unitPrec
	}
	var w valueWriter
	switch c := a.(type) {
	case *array.Boolean:
		w = func(dst []byte, row int) []byte { return strconv.AppendBool(dst, c.Value(row)) }
	case *array.Int8:
		w = func(dst []byte, row int) []byte { return strconv.AppendInt(dst, int64(c.Value(row)), 10) }
	case *array.Int16:
		w = func(dst []byte, row int) []byte { return strconv.AppendInt(dst, int64(c.Value(row)), 10) }
	case *array.Int32:
		w = func(dst []byte, row int) []byte { return strconv.AppendInt(dst, int64(c.Value(row)), 10) }
	case *array.Int64:
		w = func(dst []byte, row int) []byte { return strconv.AppendInt(dst, c.Value(row), 10) }
	case *array.Float32:
		w = func(dst []byte, row int) []byte { return appendJSONFloat(dst, float64(c.Value(row)), 32) }
	case *array.Float64:
		w = func(dst []byte, row int) []byte { return appendJSONFloat(dst, c.Value(row), 64) }
	case *array.Decimal128:
		scale := int(c.DataType().(*arrow.Decimal128Type).Scale)
		w = func(dst []byte, row int) []byte {
			dst = append(dst, '"')
			dst = appendDecimal(dst, c.Value(row), scale)
			return append(dst, '"')
		}
	case *array.String:
		w = func(dst []byte, row int) []byte { return appendJSONString(dst, c.Value(row)) }
	case *array.Binary:
		w = func(dst []byte, row int) []byte {
			v := c.Value(row)
			dst = append(dst, '"')
			dst = base64.StdEncoding.AppendEncode(dst, v)
			return append(dst, '"')
		}
	case *array.Date32:
		w = func(dst []byte, row int) []byte {
			dst = append(dst, '"')
			dst = appendDate(dst, int64(c.Value(row)))
			return append(dst, '"')
		}
	case *array.Time32:
		prec := fixPrec(unitPrecision(c.DataType().(*arrow.Time32Type).Unit))
		mul := nanosPerSec / unitsPerSecond(c.DataType().(*arrow.Time32Type).Unit)
		w = func(dst []byte, row int) []byte {
			dst = append(dst, '"')
			dst = appendTimeOfDay(dst, int64(c.Value(row))*mul, prec)
			return append(dst, '"')
		}
	case *array.Time64:
		prec := fixPrec(unitPrecision(c.DataType().(*arrow.Time64Type).Unit))
		mul := nanosPerSec / unitsPerSecond(c.DataType().(*arrow.Time64Type).Unit)
		w = func(dst []byte, row int) []byte {
			dst = append(dst, '"')
			dst = appendTimeOfDay(dst, int64(c.Value(row))*mul, prec)
			return append(dst, '"')
		}
	case *array.Timestamp:
		tt := c.DataType().(*arrow.TimestampType)
		prec := fixPrec(unitPrecision(tt.Unit))
		ups := unitsPerSecond(tt.Unit)
		ltz := tt.TimeZone != ""
		w = func(dst []byte, row int) []byte {
			dst = append(dst, '"')
			dst = appendTimestamp(dst, int64(c.Value(row)), ups, prec)
			if ltz {
				dst = append(dst, 'Z')
			}
			return append(dst, '"')
		}
	default:
		// Types outside the table type system (nested…): emit null rather
		// than fail a read path.
		return func(dst []byte, row int) []byte { return append(dst, "null"...) }
	}
	return nullable(a, w)
}

// unitPrecision is the number of fraction digits a unit holds. The table
// precision may be lower (TIMESTAMP(2) is stored in ms); values are exact at
// the table precision, so the extra digits are zeros and round-trip.
func unitPrecision(u arrow.TimeUnit) int {
	switch u {
	case arrow.Second:
		return 0
	case arrow.Millisecond:
		return 3
	case arrow.Microsecond:
		return 6
	}
	return 9
}

func appendTimeOfDay(dst []byte, nanos int64, prec int) []byte {
	_, nanos = floorDiv(nanos, secondsPerDay*nanosPerSec)
	return appendClock(dst, nanos, prec)
}

func appendTimestamp(dst []byte, v, ups int64, prec int) []byte {
	sec, r := floorDiv(v, ups)
	day, sod := floorDiv(sec, secondsPerDay)
	dst = appendDate(dst, day)
	dst = append(dst, 'T')
	return appendClock(dst, sod*nanosPerSec+r*(nanosPerSec/ups), prec)
}

func appendJSONFloat(dst []byte, f float64, bitSize int) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(dst, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(dst, `"-Infinity"`...)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, bitSize)
}

// appendDecimal appends the unscaled value n at scale as a plain decimal
// with exactly scale fraction digits.
func appendDecimal(dst []byte, n decimal128.Num, scale int) []byte {
	if n.Sign() < 0 {
		dst = append(dst, '-')
		n = n.Negate() // -2^127 does not occur within 38 digits
	}
	hi, lo := uint64(n.HighBits()), n.LowBits()
	var buf [48]byte
	i := len(buf)
	for hi != 0 || lo != 0 {
		// divide (hi, lo) by 10^19 with 64-bit pieces
		const chunk = 10_000_000_000_000_000_000
		var r uint64
		qhi := hi / chunk
		r = hi % chunk
		qlo, rem := bits.Div64(r, lo, chunk)
		hi, lo = qhi, qlo
		for k := 0; k < 19; k++ {
			i--
			buf[i] = byte('0' + rem%10)
			rem /= 10
			if hi == 0 && lo == 0 && rem == 0 {
				break
			}
		}
	}
	digitsStr := buf[i:]
	if len(digitsStr) <= scale {
		dst = append(dst, '0')
		if scale > 0 {
			dst = append(dst, '.')
			for k := len(digitsStr); k < scale; k++ {
				dst = append(dst, '0')
			}
			dst = append(dst, digitsStr...)
		}
		return dst
	}
	dst = append(dst, digitsStr[:len(digitsStr)-scale]...)
	if scale > 0 {
		dst = append(dst, '.')
		dst = append(dst, digitsStr[len(digitsStr)-scale:]...)
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string literal. Quotes, backslashes
// and control characters are escaped; invalid UTF-8 becomes U+FFFD.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, "\ufffd"...)
			i++
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendJSONValue appends the JSON form of one non-NULL value of type t,
// exactly as AppendJSONRows writes it from an Arrow column of t's Arrow
// type: i holds BOOLEAN (0 or 1), the integers, DATE (days), TIME and
// TIMESTAMP(_LTZ) (in t's Arrow unit) and the low 64 bits of a DECIMAL's
// unscaled value (hi the high 64); f holds FLOAT and DOUBLE; b STRING and
// BYTES. It lets stores that keep rows outside Arrow (the primary-key
// state) answer in the same JSON without building Arrow arrays.
func AppendJSONValue(dst []byte, t Type, i, hi int64, f float64, b []byte) []byte {
	switch t.Kind {
	case KindBoolean:
		return strconv.AppendBool(dst, i != 0)
	case KindTinyInt, KindSmallInt, KindInt, KindBigInt:
		return strconv.AppendInt(dst, i, 10)
	case KindFloat:
		return appendJSONFloat(dst, float64(float32(f)), 32)
	case KindDouble:
		return appendJSONFloat(dst, f, 64)
	case KindDecimal:
		dst = append(dst, '"')
		dst = appendDecimal(dst, decimal128.New(hi, uint64(i)), t.Scale)
		return append(dst, '"')
	case KindString:
		return appendJSONString(dst, string(b))
	case KindBytes:
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, b)
		return append(dst, '"')
	case KindDate:
		dst = append(dst, '"')
		dst = appendDate(dst, i)
		return append(dst, '"')
	case KindTime:
		u := t.TimeUnit()
		dst = append(dst, '"')
		dst = appendTimeOfDay(dst, i*(nanosPerSec/unitsPerSecond(u)), unitPrecision(u))
		return append(dst, '"')
	case KindTimestamp, KindTimestampLTZ:
		u := t.TimeUnit()
		dst = append(dst, '"')
		dst = appendTimestamp(dst, i, unitsPerSecond(u), unitPrecision(u))
		if t.Kind == KindTimestampLTZ {
			dst = append(dst, 'Z')
		}
		return append(dst, '"')
	}
	return append(dst, "null"...)
}
