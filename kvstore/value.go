package kvstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/fluss-node/fluss-node/logstore/record"
)

// Value is one column value of a Row. Which field holds the value depends on
// the column's record.Kind:
//
//	BOOLEAN                      I (0 or 1)
//	TINYINT..BIGINT, DATE        I
//	TIME, TIMESTAMP(_LTZ)        I, in the column's Arrow unit (record.Type.TimeUnit)
//	FLOAT, DOUBLE                F
//	DECIMAL(p,s)                 unscaled 128-bit two's complement: Hi (high 64 bits), I (low 64 bits)
//	STRING, BYTES                B
//
// Null marks SQL NULL; the other fields are then ignored.
type Value struct {
	Null bool
	I    int64
	Hi   int64
	F    float64
	B    []byte
}

// Row is one table row, one Value per schema column in schema order. A nil
// Row means "no row" (absent key) wherever a Row is optional.
type Row []Value

// Constructors for tests and callers.
func Null() Value                   { return Value{Null: true} }
func Int(v int64) Value             { return Value{I: v} }
func Float(v float64) Value         { return Value{F: v} }
func Str(s string) Value            { return Value{B: []byte(s)} }
func Bin(b []byte) Value            { return Value{B: b} }
func Dec(hi int64, lo uint64) Value { return Value{Hi: hi, I: int64(lo)} }
func Bool(b bool) Value {
	if b {
		return Value{I: 1}
	}
	return Value{I: 0}
}

// Clone returns a deep copy of r (B slices are copied).
func (r Row) Clone() Row {
	if r == nil {
		return nil
	}
	out := make(Row, len(r))
	copy(out, r)
	for i := range out {
		if out[i].B != nil {
			out[i].B = bytes.Clone(out[i].B)
		}
	}
	return out
}

// Sentinel errors of the package.
var (
	// ErrCorrupt reports stored or received bytes that do not decode.
	ErrCorrupt = errors.New("kvstore: corrupt data")
	// ErrBadRow reports a row that does not fit the schema (arity, NOT NULL).
	ErrBadRow = errors.New("kvstore: row does not match schema")
	// ErrNullKey reports a NULL in a primary-key column.
	ErrNullKey = errors.New("kvstore: primary-key column is NULL")
	// ErrNewerRow: a row value has more columns than the codec's schema. It
	// was written with a later schema version (columns are only appended)
	// that this codec's caller has not seen yet; reading it as the older
	// version would drop the newer columns' values.
	ErrNewerRow = errors.New("kvstore: row written with a later schema version")
)

// rowFormatV1 is the first byte of every encoded row value (FORMAT.md).
const rowFormatV1 = 1

// maxVarLen bounds one STRING/BYTES value in a row (64 MiB) so a corrupt
// length cannot make the decoder allocate unbounded memory.
const maxVarLen = 64 << 20

// equalValue reports whether two values of kind k are identical.
func equalValue(k record.Kind, a, b Value) bool {
	if a.Null || b.Null {
		return a.Null == b.Null
	}
	switch k {
	case record.KindFloat:
		return math.Float32bits(float32(a.F)) == math.Float32bits(float32(b.F))
	case record.KindDouble:
		return math.Float64bits(a.F) == math.Float64bits(b.F)
	case record.KindString, record.KindBytes:
		return bytes.Equal(a.B, b.B)
	case record.KindDecimal:
		return a.I == b.I && a.Hi == b.Hi
	}
	return a.I == b.I
}

// AppendRow appends the encoded value of row (FORMAT.md "Row value") to dst.
// The row may have fewer values than the codec's schema has columns: a row
// of an earlier schema version (whose columns are a prefix of this one's)
// is written as it is, and reads back with NULL for the later columns.
func (c *Codec) AppendRow(dst []byte, row Row) ([]byte, error) {
	if len(row) > len(c.kinds) || len(row) < c.minCols {
		return dst, fmt.Errorf("%w: %d values for %d columns", ErrBadRow, len(row), len(c.kinds))
	}
	dst = append(dst, rowFormatV1)
	dst = binary.AppendUvarint(dst, uint64(len(row)))
	bm := len(dst)
	for i := 0; i < (len(row)+7)/8; i++ {
		dst = append(dst, 0)
	}
	for i, v := range row {
		if v.Null {
			dst[bm+i/8] |= 1 << (i % 8)
			continue
		}
		switch c.kinds[i] {
		case record.KindBoolean:
			dst = append(dst, byte(v.I&1))
		case record.KindFloat:
			dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(float32(v.F)))
		case record.KindDouble:
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(v.F))
		case record.KindDecimal:
			dst = binary.LittleEndian.AppendUint64(dst, uint64(v.I))
			dst = binary.LittleEndian.AppendUint64(dst, uint64(v.Hi))
		case record.KindString, record.KindBytes:
			dst = binary.AppendUvarint(dst, uint64(len(v.B)))
			dst = append(dst, v.B...)
		default:
			dst = binary.AppendVarint(dst, v.I)
		}
	}
	return dst, nil
}

// DecodeRow decodes an encoded row value into dst (reused when it has the
// capacity) and returns it. STRING/BYTES values alias data. A row written
// with fewer columns (an older schema) gets NULL for the missing trailing
// columns; a row with more columns than the schema is ErrNewerRow.
func (c *Codec) DecodeRow(dst Row, data []byte) (Row, error) {
	if len(data) == 0 || data[0] != rowFormatV1 {
		return nil, fmt.Errorf("%w: row value: unknown format byte", ErrCorrupt)
	}
	p := 1
	n, w := binary.Uvarint(data[p:])
	if w <= 0 || n > record.MaxColumns {
		return nil, fmt.Errorf("%w: row value: column count", ErrCorrupt)
	}
	if n > uint64(len(c.kinds)) {
		return nil, fmt.Errorf("%w: %d columns, schema version %d has %d", ErrNewerRow, n, c.schema.ID, len(c.kinds))
	}
	p += w
	nb := (int(n) + 7) / 8
	if len(data)-p < nb {
		return nil, fmt.Errorf("%w: row value: short null bitmap", ErrCorrupt)
	}
	bm := data[p : p+nb]
	p += nb
	if cap(dst) >= len(c.kinds) {
		dst = dst[:len(c.kinds)]
	} else {
		dst = make(Row, len(c.kinds))
	}
	for i := range dst {
		dst[i] = Value{}
		if i >= int(n) || bm[i/8]&(1<<(i%8)) != 0 {
			dst[i].Null = true
			continue
		}
		switch c.kinds[i] {
		case record.KindBoolean:
			if p >= len(data) || data[p] > 1 {
				return nil, fmt.Errorf("%w: row value: column %d: bad boolean", ErrCorrupt, i)
			}
			dst[i].I = int64(data[p])
			p++
		case record.KindFloat:
			if len(data)-p < 4 {
				return nil, fmt.Errorf("%w: row value: column %d: short float", ErrCorrupt, i)
			}
			dst[i].F = float64(math.Float32frombits(binary.LittleEndian.Uint32(data[p:])))
			p += 4
		case record.KindDouble:
			if len(data)-p < 8 {
				return nil, fmt.Errorf("%w: row value: column %d: short double", ErrCorrupt, i)
			}
			dst[i].F = math.Float64frombits(binary.LittleEndian.Uint64(data[p:]))
			p += 8
		case record.KindDecimal:
			if len(data)-p < 16 {
				return nil, fmt.Errorf("%w: row value: column %d: short decimal", ErrCorrupt, i)
			}
			dst[i].I = int64(binary.LittleEndian.Uint64(data[p:]))
			dst[i].Hi = int64(binary.LittleEndian.Uint64(data[p+8:]))
			p += 16
		case record.KindString, record.KindBytes:
			l, w := binary.Uvarint(data[p:])
			if w <= 0 || l > maxVarLen || l > uint64(len(data)-p-w) {
				return nil, fmt.Errorf("%w: row value: column %d: bad length", ErrCorrupt, i)
			}
			p += w
			dst[i].B = data[p : p+int(l) : p+int(l)]
			p += int(l)
		default:
			v, w := binary.Varint(data[p:])
			if w <= 0 {
				return nil, fmt.Errorf("%w: row value: column %d: bad varint", ErrCorrupt, i)
			}
			dst[i].I = v
			p += w
		}
	}
	if p != len(data) {
		return nil, fmt.Errorf("%w: row value: %d trailing bytes", ErrCorrupt, len(data)-p)
	}
	return dst, nil
}
