package kvstore

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/fluss-node/fluss-node/logstore/record"
)

// Codec encodes the keys and values of one table schema. Key column order is
// the bucket-key columns (in bucket-key order) followed by the remaining
// primary-key columns (in primary-key order), so every row with one
// bucket-key value shares the AppendBucketKey prefix (FORMAT.md "Row key").
// A Codec is immutable and safe for concurrent use.
type Codec struct {
	schema  *record.Schema
	kinds   []record.Kind
	keyCols []int // schema column index per key position
	nBucket int   // leading keyCols that form the bucket key
	isKey   []bool
	minCols int // the narrowest row AppendRow takes: one reaching every key column
}

// NewCodec builds the codec of schema s. bucketKey names the bucket-key
// columns; empty means the whole primary key. Every bucket-key column must
// be a primary-key column (Fluss requires this for PK tables).
func NewCodec(s *record.Schema, bucketKey []string) (*Codec, error) {
	if s == nil || len(s.PrimaryKey) == 0 {
		return nil, fmt.Errorf("%w: kvstore needs a schema with a primary key", ErrBadRow)
	}
	c := &Codec{schema: s, kinds: make([]record.Kind, len(s.Columns)), isKey: make([]bool, len(s.Columns))}
	for i, col := range s.Columns {
		c.kinds[i] = col.Type.Kind
	}
	if len(bucketKey) == 0 {
		bucketKey = s.PrimaryKey
	}
	inBucket := map[int]bool{}
	for _, name := range bucketKey {
		i := s.Index(name)
		if i < 0 || !contains(s.PrimaryKey, name) {
			return nil, fmt.Errorf("%w: bucket key column %q is not a primary-key column", ErrBadRow, name)
		}
		if inBucket[i] {
			return nil, fmt.Errorf("%w: bucket key column %q repeated", ErrBadRow, name)
		}
		inBucket[i] = true
		c.keyCols = append(c.keyCols, i)
	}
	c.nBucket = len(c.keyCols)
	for _, name := range s.PrimaryKey {
		i := s.Index(name)
		if i < 0 {
			return nil, fmt.Errorf("%w: primary-key column %q not in schema", ErrBadRow, name)
		}
		c.isKey[i] = true
		c.minCols = max(c.minCols, i+1)
		if !inBucket[i] {
			c.keyCols = append(c.keyCols, i)
		}
	}
	return c, nil
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// Schema returns the codec's schema.
func (c *Codec) Schema() *record.Schema { return c.schema }

// KeyColumns returns the schema column indexes in key order (bucket key
// first). The caller must not modify the slice.
func (c *Codec) KeyColumns() []int { return c.keyCols }

// AppendKey appends the encoded primary key of row to dst. Like AppendRow
// it takes rows of earlier schema versions (fewer columns).
func (c *Codec) AppendKey(dst []byte, row Row) ([]byte, error) {
	if len(row) > len(c.kinds) || len(row) < c.minCols {
		return dst, fmt.Errorf("%w: %d values for %d columns", ErrBadRow, len(row), len(c.kinds))
	}
	for _, ci := range c.keyCols {
		var err error
		if dst, err = appendKeyValue(dst, c.kinds[ci], row[ci]); err != nil {
			return dst, fmt.Errorf("column %q: %w", c.schema.Columns[ci].Name, err)
		}
	}
	return dst, nil
}

// AppendRecordKey appends the encoded primary key of row r of rec (the
// table's columns in schema order, as RowsFromRecord reads them) to dst.
// Only the key columns are read: a lookup's keys need no whole rows.
func (c *Codec) AppendRecordKey(dst []byte, rec arrow.Record, r int) ([]byte, error) {
	return c.appendRecordCols(dst, rec, r, c.keyCols)
}

// AppendRecordBucketKey appends the encoded bucket-key prefix of row r of
// rec (as AppendRecordKey) to dst: AppendBucketKey of that row's
// bucket-key values.
func (c *Codec) AppendRecordBucketKey(dst []byte, rec arrow.Record, r int) ([]byte, error) {
	return c.appendRecordCols(dst, rec, r, c.keyCols[:c.nBucket])
}

// appendRecordCols appends the key encoding of the columns cols of row r
// of rec to dst.
func (c *Codec) appendRecordCols(dst []byte, rec arrow.Record, r int, cols []int) ([]byte, error) {
	if int(rec.NumCols()) < len(c.kinds) {
		return dst, fmt.Errorf("%w: record has %d columns, schema %d", ErrBadRow, rec.NumCols(), len(c.kinds))
	}
	for _, ci := range cols {
		v, err := ValueAt(rec.Column(ci), r)
		if err == nil {
			dst, err = appendKeyValue(dst, c.kinds[ci], v)
		}
		if err != nil {
			return dst, fmt.Errorf("column %q: %w", c.schema.Columns[ci].Name, err)
		}
	}
	return dst, nil
}

// AppendBucketKey appends the encoded bucket-key prefix of vals (one value
// per bucket-key column, in bucket-key order) to dst. Every row whose key
// starts with these bytes has exactly this bucket-key value.
func (c *Codec) AppendBucketKey(dst []byte, vals []Value) ([]byte, error) {
	if len(vals) != c.nBucket {
		return dst, fmt.Errorf("%w: %d values for %d bucket-key columns", ErrBadRow, len(vals), c.nBucket)
	}
	for j, v := range vals {
		var err error
		if dst, err = appendKeyValue(dst, c.kinds[c.keyCols[j]], v); err != nil {
			return dst, fmt.Errorf("column %q: %w", c.schema.Columns[c.keyCols[j]].Name, err)
		}
	}
	return dst, nil
}

// DecodeKey decodes an encoded primary key into one value per key column,
// in key order (KeyColumns). STRING/BYTES values are fresh copies.
func (c *Codec) DecodeKey(key []byte) ([]Value, error) {
	out := make([]Value, 0, len(c.keyCols))
	for _, ci := range c.keyCols {
		v, n, err := decodeKeyValue(c.kinds[ci], key)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", c.schema.Columns[ci].Name, err)
		}
		out = append(out, v)
		key = key[n:]
	}
	if len(key) != 0 {
		return nil, fmt.Errorf("%w: key: %d trailing bytes", ErrCorrupt, len(key))
	}
	return out, nil
}

// keyWidth is the fixed width of an integer-like kind in a key.
func keyWidth(k record.Kind) int {
	switch k {
	case record.KindBoolean, record.KindTinyInt:
		return 1
	case record.KindSmallInt:
		return 2
	case record.KindInt, record.KindDate, record.KindFloat:
		return 4
	case record.KindDecimal:
		return 16
	}
	return 8
}

func appendKeyValue(dst []byte, k record.Kind, v Value) ([]byte, error) {
	if v.Null {
		return dst, ErrNullKey
	}
	switch k {
	case record.KindBoolean:
		return append(dst, byte(v.I&1)), nil
	case record.KindTinyInt:
		return append(dst, uint8(v.I)^0x80), nil
	case record.KindSmallInt:
		return binary.BigEndian.AppendUint16(dst, uint16(v.I)^0x8000), nil
	case record.KindInt, record.KindDate:
		return binary.BigEndian.AppendUint32(dst, uint32(v.I)^0x80000000), nil
	case record.KindFloat:
		b := math.Float32bits(float32(v.F))
		if b&0x80000000 != 0 {
			b = ^b
		} else {
			b |= 0x80000000
		}
		return binary.BigEndian.AppendUint32(dst, b), nil
	case record.KindDouble:
		b := math.Float64bits(v.F)
		if b&(1<<63) != 0 {
			b = ^b
		} else {
			b |= 1 << 63
		}
		return binary.BigEndian.AppendUint64(dst, b), nil
	case record.KindDecimal:
		dst = binary.BigEndian.AppendUint64(dst, uint64(v.Hi)^(1<<63))
		return binary.BigEndian.AppendUint64(dst, uint64(v.I)), nil
	case record.KindString, record.KindBytes:
		for _, b := range v.B {
			if b == 0 {
				dst = append(dst, 0, 0xff)
			} else {
				dst = append(dst, b)
			}
		}
		return append(dst, 0, 1), nil
	}
	// BIGINT, TIME, TIMESTAMP, TIMESTAMP_LTZ
	return binary.BigEndian.AppendUint64(dst, uint64(v.I)^(1<<63)), nil
}

func decodeKeyValue(k record.Kind, b []byte) (Value, int, error) {
	if k == record.KindString || k == record.KindBytes {
		out := make([]byte, 0, 16)
		for i := 0; i < len(b); i++ {
			if b[i] != 0 {
				out = append(out, b[i])
				continue
			}
			if i+1 >= len(b) {
				break
			}
			switch b[i+1] {
			case 0xff:
				out = append(out, 0)
				i++
			case 1:
				return Value{B: out}, i + 2, nil
			default:
				return Value{}, 0, fmt.Errorf("%w: key: bad escape 0x00 0x%02x", ErrCorrupt, b[i+1])
			}
		}
		return Value{}, 0, fmt.Errorf("%w: key: unterminated string", ErrCorrupt)
	}
	w := keyWidth(k)
	if len(b) < w {
		return Value{}, 0, fmt.Errorf("%w: key: short %s value", ErrCorrupt, k)
	}
	switch k {
	case record.KindBoolean:
		if b[0] > 1 {
			return Value{}, 0, fmt.Errorf("%w: key: bad boolean", ErrCorrupt)
		}
		return Value{I: int64(b[0])}, 1, nil
	case record.KindTinyInt:
		return Value{I: int64(int8(b[0] ^ 0x80))}, 1, nil
	case record.KindSmallInt:
		return Value{I: int64(int16(binary.BigEndian.Uint16(b) ^ 0x8000))}, 2, nil
	case record.KindInt, record.KindDate:
		return Value{I: int64(int32(binary.BigEndian.Uint32(b) ^ 0x80000000))}, 4, nil
	case record.KindFloat:
		u := binary.BigEndian.Uint32(b)
		if u&0x80000000 != 0 {
			u &^= 0x80000000
		} else {
			u = ^u
		}
		return Value{F: float64(math.Float32frombits(u))}, 4, nil
	case record.KindDouble:
		u := binary.BigEndian.Uint64(b)
		if u&(1<<63) != 0 {
			u &^= 1 << 63
		} else {
			u = ^u
		}
		return Value{F: math.Float64frombits(u)}, 8, nil
	case record.KindDecimal:
		return Value{Hi: int64(binary.BigEndian.Uint64(b) ^ (1 << 63)), I: int64(binary.BigEndian.Uint64(b[8:]))}, 16, nil
	}
	return Value{I: int64(binary.BigEndian.Uint64(b) ^ (1 << 63))}, 8, nil
}
