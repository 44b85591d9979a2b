package record

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"

	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

// Stats block tags (FORMAT.md §1).
const (
	statTagNone    = 0
	statTagInt     = 1
	statTagFloat   = 2
	statTagDecimal = 3
	statTagBytes   = 4
)

// ComputeStats returns one ColumnStats per column of rec. STRING/BYTES
// bounds are copied (they do not alias rec).
func ComputeStats(rec arrow.Record) []ColumnStats {
	out := make([]ColumnStats, rec.NumCols())
	for i := range out {
		out[i] = columnStats(rec.Column(i))
		if st := &out[i]; st.MinBytes != nil {
			// One allocation for both bounds, each with its own capacity.
			b := make([]byte, 0, len(st.MinBytes)+len(st.MaxBytes))
			b = append(append(b, st.MinBytes...), st.MaxBytes...)
			st.MinBytes, st.MaxBytes = b[:len(st.MinBytes):len(st.MinBytes)], b[len(st.MinBytes):]
		}
	}
	return out
}

// colBuffers is one flat column as its Arrow buffers: the validity bitmap
// (nil without nulls), the values (fixed-width values or the boolean
// bitmap; for STRING/BYTES the int32 offsets) and the variable-length data.
// Element j is element off+j of the buffers, as in an array.Data with that
// offset; offsets index data absolutely.
type colBuffers struct {
	n, nulls, off int
	valid         []byte
	vals          []byte
	data          []byte
}

func (c *colBuffers) isNull(j int) bool {
	return c.nulls > 0 && c.valid != nil && !bitutil.BitIsSet(c.valid, c.off+j)
}

// arrayBuffers is the colBuffers view of a.
func arrayBuffers(a arrow.Array) colBuffers {
	d := a.Data()
	c := colBuffers{n: a.Len(), nulls: a.NullN(), off: d.Offset()}
	for i, b := range d.Buffers() {
		if b == nil || i > 2 {
			continue
		}
		switch i {
		case 0:
			c.valid = b.Bytes()
		case 1:
			c.vals = b.Bytes()
		case 2:
			c.data = b.Bytes()
		}
	}
	return c
}

// columnStats computes the stats of one column of a record.
func columnStats(a arrow.Array) ColumnStats { return bufferStats(a.DataType(), arrayBuffers(a)) }

// bufferStats computes the stats of a column of type dt from its buffers:
// the one implementation behind both records (columnStats) and columns
// still in the JSON decoder's buffers. Types without stats, and buffers
// too short for c.n values, give the null count alone.
func bufferStats(dt arrow.DataType, c colBuffers) ColumnStats {
	st := ColumnStats{NullCount: int32(c.nulls)}
	if c.nulls == c.n {
		return st
	}
	lo, hi := c.off, c.off+c.n
	switch dt.ID() {
	case arrow.BOOL:
		if len(c.vals)*8 < hi {
			return st
		}
		seen0, seen1 := false, false
		for j := 0; j < c.n; j++ {
			if c.isNull(j) {
				continue
			}
			if bitutil.BitIsSet(c.vals, lo+j) {
				seen1 = true
			} else {
				seen0 = true
			}
		}
		st.HasMinMax = true
		st.MinInt, st.MaxInt = 1, 0
		if seen0 {
			st.MinInt = 0
		}
		if seen1 {
			st.MaxInt = 1
		}
	case arrow.INT8:
		intStats(fixed[int8](c.vals, lo, hi), &c, &st)
	case arrow.INT16:
		intStats(fixed[int16](c.vals, lo, hi), &c, &st)
	case arrow.INT32, arrow.DATE32, arrow.TIME32:
		intStats(fixed[int32](c.vals, lo, hi), &c, &st)
	case arrow.INT64, arrow.TIME64, arrow.TIMESTAMP:
		intStats(fixed[int64](c.vals, lo, hi), &c, &st)
	case arrow.FLOAT32:
		floatStats(fixed[float32](c.vals, lo, hi), &c, &st)
	case arrow.FLOAT64:
		floatStats(fixed[float64](c.vals, lo, hi), &c, &st)
	case arrow.DECIMAL128:
		first := true
		for j, v := range fixed[decimal128.Num](c.vals, lo, hi) {
			if c.isNull(j) {
				continue
			}
			if first {
				st.MinDecimal, st.MaxDecimal, first = v, v, false
				continue
			}
			if v.Less(st.MinDecimal) {
				st.MinDecimal = v
			}
			if st.MaxDecimal.Less(v) {
				st.MaxDecimal = v
			}
		}
		st.HasMinMax = !first
	case arrow.STRING, arrow.BINARY:
		offs := fixed[int32](c.vals, lo, hi+1)
		if len(offs) == 0 || offs[0] < 0 || offs[0] > offs[len(offs)-1] || int(offs[len(offs)-1]) > len(c.data) {
			return st
		}
		bytesStats(&c, func(j int) []byte { return c.data[offs[j]:offs[j+1]] }, &st)
	}
	return st
}

// fixed returns elements [lo, hi) of the little-endian values in b as a
// []T (aliasing b), or nil when b is too short.
func fixed[T int8 | int16 | int32 | int64 | float32 | float64 | decimal128.Num](b []byte, lo, hi int) []T {
	var zero T
	w := int(unsafe.Sizeof(zero))
	if len(b) < hi*w || lo > hi {
		return nil
	}
	b = b[lo*w : hi*w]
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), hi-lo)
}

func intStats[T int8 | int16 | int32 | int64](vals []T, c *colBuffers, st *ColumnStats) {
	if mn, mx, ok := minMax(vals, c); ok {
		st.HasMinMax, st.MinInt, st.MaxInt = true, int64(mn), int64(mx)
	}
}

func floatStats[T float32 | float64](vals []T, c *colBuffers, st *ColumnStats) {
	if mn, mx, ok := minMax(vals, c); ok {
		st.HasMinMax, st.MinFloat, st.MaxFloat = true, float64(mn), float64(mx)
	}
}

// minMax returns the least and the greatest of the non-null values of
// vals, NaNs left out (of equal values, the first seen); ok is false when
// there is none.
func minMax[T int8 | int16 | int32 | int64 | float32 | float64](vals []T, c *colBuffers) (mn, mx T, ok bool) {
	for j, v := range vals {
		if c.isNull(j) || v != v {
			continue
		}
		if !ok {
			mn, mx, ok = v, v, true
			continue
		}
		if v < mn {
			mn = v
		}
		if v > mx {
			mx = v
		}
	}
	return mn, mx, ok
}

func bytesStats(c *colBuffers, val func(int) []byte, st *ColumnStats) {
	var mn, mx []byte
	first := true
	for j := 0; j < c.n; j++ {
		if c.isNull(j) {
			continue
		}
		v := val(j)
		if first {
			mn, mx, first = v, v, false
			continue
		}
		if bytes.Compare(v, mn) < 0 {
			mn = v
		}
		if bytes.Compare(v, mx) > 0 {
			mx = v
		}
	}
	if first || len(mn) > MaxStatBytes || len(mx) > MaxStatBytes {
		return
	}
	st.HasMinMax = true
	// Non-nil even when empty: statTag tells bytes bounds by non-nil.
	st.MinBytes = mn[:len(mn):len(mn)]
	st.MaxBytes = mx[:len(mx):len(mx)]
	if st.MinBytes == nil {
		st.MinBytes = []byte{}
	}
	if st.MaxBytes == nil {
		st.MaxBytes = []byte{}
	}
}

// statTag decides the block encoding of one ColumnStats. A ColumnStats does
// not carry its kind, so the tag follows from which fields are set: bytes
// first, then decimal, float, int.
func statTag(st *ColumnStats) byte {
	switch {
	case !st.HasMinMax:
		return statTagNone
	case st.MinBytes != nil || st.MaxBytes != nil:
		if len(st.MinBytes) > MaxStatBytes || len(st.MaxBytes) > MaxStatBytes {
			return statTagNone
		}
		return statTagBytes
	case st.MinDecimal != (decimal128.Num{}) || st.MaxDecimal != (decimal128.Num{}):
		return statTagDecimal
	case st.MinFloat != 0 || st.MaxFloat != 0:
		return statTagFloat
	}
	return statTagInt
}

// appendStatsBlock encodes stats as FORMAT.md §1 describes. A column whose
// min/max are all zero is written as an int column (0, 0), which a reader of
// any kind interprets as the same bounds.
func appendStatsBlock(dst []byte, stats []ColumnStats) []byte {
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(stats)))
	for i := range stats {
		dst = appendColumnStats(dst, &stats[i])
	}
	return dst
}

// appendColumnStats appends the stats block entry of one column.
func appendColumnStats(dst []byte, st *ColumnStats) []byte {
	tag := statTag(st)
	dst = append(dst, tag)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(st.NullCount))
	switch tag {
	case statTagInt:
		dst = binary.LittleEndian.AppendUint64(dst, uint64(st.MinInt))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(st.MaxInt))
	case statTagFloat:
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(st.MinFloat))
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(st.MaxFloat))
	case statTagDecimal:
		dst = binary.LittleEndian.AppendUint64(dst, st.MinDecimal.LowBits())
		dst = binary.LittleEndian.AppendUint64(dst, uint64(st.MinDecimal.HighBits()))
		dst = binary.LittleEndian.AppendUint64(dst, st.MaxDecimal.LowBits())
		dst = binary.LittleEndian.AppendUint64(dst, uint64(st.MaxDecimal.HighBits()))
	case statTagBytes:
		dst = append(dst, byte(len(st.MinBytes)))
		dst = append(dst, st.MinBytes...)
		dst = append(dst, byte(len(st.MaxBytes)))
		dst = append(dst, st.MaxBytes...)
	}
	return dst
}

// parseStatsBlock decodes a stats block from the start of b and returns the
// number of bytes used. Bytes bounds alias b. Without keep it only
// validates the block and returns nil stats, allocating nothing.
func parseStatsBlock(b []byte, keep bool) ([]ColumnStats, int, error) {
	bad := func(what string) ([]ColumnStats, int, error) {
		return nil, 0, fmt.Errorf("%w: stats block: %s", ErrCorruptBatch, what)
	}
	if len(b) < 2 {
		return bad("missing column count")
	}
	n := int(binary.LittleEndian.Uint16(b))
	// Each column needs at least 5 bytes: bound the allocation by the input.
	if n*5 > len(b)-2 {
		return bad(fmt.Sprintf("%d columns do not fit in %d bytes", n, len(b)))
	}
	var out []ColumnStats
	if keep {
		out = make([]ColumnStats, n)
	}
	var scratch ColumnStats
	p := 2
	for i := range n {
		if len(b)-p < 5 {
			return bad(fmt.Sprintf("column %d truncated", i))
		}
		tag := b[p]
		nc := int32(binary.LittleEndian.Uint32(b[p+1:]))
		if nc < 0 {
			return bad(fmt.Sprintf("column %d: negative null count", i))
		}
		p += 5
		st := &scratch
		if keep {
			st = &out[i]
		}
		st.NullCount = nc
		switch tag {
		case statTagNone:
		case statTagInt, statTagFloat:
			if len(b)-p < 16 {
				return bad(fmt.Sprintf("column %d truncated", i))
			}
			lo, hi := binary.LittleEndian.Uint64(b[p:]), binary.LittleEndian.Uint64(b[p+8:])
			p += 16
			st.HasMinMax = true
			if tag == statTagInt {
				st.MinInt, st.MaxInt = int64(lo), int64(hi)
			} else {
				st.MinFloat, st.MaxFloat = math.Float64frombits(lo), math.Float64frombits(hi)
			}
		case statTagDecimal:
			if len(b)-p < 32 {
				return bad(fmt.Sprintf("column %d truncated", i))
			}
			st.HasMinMax = true
			st.MinDecimal = decimal128.New(int64(binary.LittleEndian.Uint64(b[p+8:])), binary.LittleEndian.Uint64(b[p:]))
			st.MaxDecimal = decimal128.New(int64(binary.LittleEndian.Uint64(b[p+24:])), binary.LittleEndian.Uint64(b[p+16:]))
			p += 32
		case statTagBytes:
			for k := 0; k < 2; k++ {
				if len(b)-p < 1 {
					return bad(fmt.Sprintf("column %d truncated", i))
				}
				l := int(b[p])
				p++
				if l > MaxStatBytes || len(b)-p < l {
					return bad(fmt.Sprintf("column %d: bound of %d bytes", i, l))
				}
				v := b[p : p+l : p+l]
				p += l
				if k == 0 {
					st.MinBytes = v
				} else {
					st.MaxBytes = v
				}
			}
			st.HasMinMax = true
		default:
			return bad(fmt.Sprintf("column %d: unknown tag %d", i, tag))
		}
	}
	return out, p, nil
}
