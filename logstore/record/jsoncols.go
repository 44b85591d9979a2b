package record

import (
	"encoding/binary"
	"math"
	"math/bits"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// colAcc accumulates one column of decoded JSON rows as the raw Arrow
// buffers (validity bitmap, values, offsets, data) in reusable Go slices,
// so that a decode allocates only the final record: no RecordBuilder, whose
// buffers are given away (and reallocated) with every record.
type colAcc struct {
	width int    // bytes per value; 0: bit-packed boolean; -1: variable length
	valid []byte // validity bitmap, bit i set when row i is not null
	vals  []byte // fixed-width values, or the boolean bitmap
	offs  []byte // int32 little-endian offsets (variable length), starting at 0
	data  []byte // variable-length bytes
}

func accWidth(k Kind, t Type) int {
	switch k {
	case KindBoolean:
		return 0
	case KindTinyInt:
		return 1
	case KindSmallInt:
		return 2
	case KindInt, KindFloat, KindDate:
		return 4
	case KindDecimal:
		return 16
	case KindString, KindBytes:
		return -1
	case KindTime:
		if t.TimeUnit() == arrow.Millisecond {
			return 4
		}
		return 8
	}
	return 8 // BIGINT, DOUBLE, TIMESTAMP(_LTZ)
}

func (a *colAcc) reset(width int) {
	a.width = width
	a.valid = a.valid[:0]
	a.vals = a.vals[:0]
	a.data = a.data[:0]
	a.offs = a.offs[:0]
	if width < 0 {
		a.offs = append(a.offs, 0, 0, 0, 0)
	}
}

// setBit sets or clears bit i of *bm, growing it by whole bytes.
func setBit(bm *[]byte, i int, v bool) {
	for len(*bm) <= i>>3 {
		*bm = append(*bm, 0)
	}
	if v {
		(*bm)[i>>3] |= 1 << (i & 7)
	}
}

// The append methods add row `row` (rows are appended in order).

func (a *colAcc) appendNull(row int) {
	setBit(&a.valid, row, false)
	switch {
	case a.width == 0:
		setBit(&a.vals, row, false)
	case a.width < 0:
		a.offs = binary.LittleEndian.AppendUint32(a.offs, uint32(len(a.data)))
	default:
		for k := 0; k < a.width; k++ {
			a.vals = append(a.vals, 0)
		}
	}
}

func (a *colAcc) appendBool(row int, v bool) {
	setBit(&a.valid, row, true)
	setBit(&a.vals, row, v)
}

// appendFixed appends the low a.width bytes of u, little-endian.
func (a *colAcc) appendFixed(row int, u uint64) {
	setBit(&a.valid, row, true)
	switch a.width {
	case 1:
		a.vals = append(a.vals, byte(u))
	case 2:
		a.vals = binary.LittleEndian.AppendUint16(a.vals, uint16(u))
	case 4:
		a.vals = binary.LittleEndian.AppendUint32(a.vals, uint32(u))
	default:
		a.vals = binary.LittleEndian.AppendUint64(a.vals, u)
	}
}

func (a *colAcc) appendDecimal(row int, n decimal128.Num) {
	setBit(&a.valid, row, true)
	a.vals = binary.LittleEndian.AppendUint64(a.vals, n.LowBits())
	a.vals = binary.LittleEndian.AppendUint64(a.vals, uint64(n.HighBits()))
}

// appendBytes appends a variable-length value; it reports false when the
// column's data would pass the int32 offsets of Arrow String/Binary.
func (a *colAcc) appendBytes(row int, b []byte) bool {
	if len(a.data)+len(b) > math.MaxInt32 {
		return false
	}
	setBit(&a.valid, row, true)
	a.data = append(a.data, b...)
	a.offs = binary.LittleEndian.AppendUint32(a.offs, uint32(len(a.data)))
	return true
}

// buffers returns the column's Arrow buffers' contents for n rows: the
// validity bitmap, then values (or offsets and data).
func (a *colAcc) buffers(n int) [3][]byte {
	nb := (n + 7) / 8
	for len(a.valid) < nb {
		a.valid = append(a.valid, 0)
	}
	if a.width == 0 {
		for len(a.vals) < nb {
			a.vals = append(a.vals, 0)
		}
	}
	if a.width < 0 {
		return [3][]byte{a.valid[:nb], a.offs, a.data}
	}
	if a.width == 0 {
		return [3][]byte{a.valid[:nb], a.vals[:nb], nil}
	}
	return [3][]byte{a.valid[:nb], a.vals, nil}
}

// numBuffers is the number of Arrow buffers of the column: validity and
// values, and for variable-length types offsets and data.
func (a *colAcc) numBuffers() int {
	if a.width < 0 {
		return 3
	}
	return 2
}

// align8 rounds n up to a multiple of 8: the alignment of every Arrow value
// type (Arrow recommends 64 for SIMD; nothing here needs it, and for the
// few rows of a typical request 64 would make the slab several times the
// size of the data).
func align8(n int) int { return (n + 7) &^ 7 }

// newRecord builds the record of the n accumulated rows. On the Go
// allocator every buffer is a slice of one allocation and the Buffer
// headers are one more; another allocator gets one allocation per buffer,
// released with the record.
func (d *jsonDecoder) newRecord(st *schemaState, n int, mem memory.Allocator) arrow.Record {
	var slab []byte
	var headers []memory.Buffer
	if mem == memory.DefaultAllocator {
		total, count := 0, 0
		for ci := range d.cols {
			for _, b := range d.cols[ci].buffers(n) {
				total += align8(len(b))
			}
			count += d.cols[ci].numBuffers()
		}
		slab = make([]byte, total)
		headers = make([]memory.Buffer, 0, count)
	}
	cols := make([]arrow.Array, len(d.cols))
	// NewData keeps the slice it is given: each column gets its own
	// segment of one backing array.
	all := make([]*memory.Buffer, 3*len(d.cols))
	for ci := range d.cols {
		a := &d.cols[ci]
		raw := a.buffers(n)
		nb := a.numBuffers()
		bufs := all[:nb:nb]
		all = all[nb:]
		for k := 0; k < nb; k++ {
			if slab != nil {
				m := copy(slab, raw[k])
				// A zero Buffer reset to bytes is what NewBufferBytes
				// returns: no allocator, released with the slab.
				headers = append(headers, memory.Buffer{})
				bufs[k] = &headers[len(headers)-1]
				bufs[k].Reset(slab[:m:m])
				slab = slab[align8(m):]
				continue
			}
			b := memory.NewResizableBuffer(mem)
			b.Resize(len(raw[k]))
			copy(b.Bytes(), raw[k])
			bufs[k] = b
		}
		nulls := n - popCount(raw[0])
		data := array.NewData(st.arrow.Field(ci).Type, n, bufs, nil, nulls, 0)
		cols[ci] = array.MakeFromData(data)
		data.Release()
		if slab == nil {
			for k := 0; k < nb; k++ {
				bufs[k].Release()
			}
		}
	}
	rec := array.NewRecordBatch(st.arrow, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	return rec
}

// JSONRows are rows decoded from JSON (DecodeJSON) and still in the
// decoder's column buffers: they become an arrow.Record (Record) or are
// encoded as a batch straight from those buffers (AppendBatch). Release
// returns the buffers to a pool: call it exactly once (copies of a
// JSONRows share the buffers), and use no copy after it.
type JSONRows struct {
	d  *jsonDecoder
	st *schemaState
	n  int
}

// DecodeJSON decodes rows as DecodeJSONRows does, without building the
// record.
func DecodeJSON(s *Schema, rows []byte) (JSONRows, error) { return decodeJSON(s, rows, nil) }

// Len is the number of rows.
func (r JSONRows) Len() int { return r.n }

// Record builds the record of the rows (mem nil: the Go allocator), owned
// by the caller.
func (r JSONRows) Record(mem memory.Allocator) arrow.Record {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	return r.d.newRecord(r.st, r.n, mem)
}

// AppendBatch appends the batch of the rows to dst, byte for byte what
// AppendRecordBatch(dst, h, r.Record(nil), c, zstdLevel) appends, without
// building the record.
func (r JSONRows) AppendBatch(dst []byte, h BatchHeader, c Compression, zstdLevel int) ([]byte, error) {
	if r.n == 0 || len(r.d.cols) == 0 || StoredSchema(r.st.arrow) != r.st.arrow {
		// Not a message appendMessage writes (empty, or with dictionary
		// batches): encode the record.
		rec := r.Record(nil)
		defer rec.Release()
		return AppendRecordBatch(dst, h, rec, c, zstdLevel)
	}
	return appendBatch(dst, h, r, c, zstdLevel)
}

// Release returns the decoder's buffers to their pool.
func (r JSONRows) Release() {
	if r.d != nil {
		putJSONDecoder(r.d)
	}
}

func (r JSONRows) numColumns() int { return len(r.d.cols) }

func (r JSONRows) stats(i int) ColumnStats {
	return bufferStats(r.st.arrow.Field(i).Type, r.d.cols[i].view(r.n))
}

func (r JSONRows) appendBody(dst []byte, c Compression, zstdLevel int) ([]byte, error) {
	e := getPlainEncoder()
	defer e.release()
	for ci := range r.d.cols {
		v := r.d.cols[ci].view(r.n)
		e.p.nodes = append(e.p.nodes, [2]int64{int64(r.n), int64(v.nulls)})
		// Validity: omitted (empty) without nulls, as collectPlain does.
		e.p.bufs = append(e.p.bufs, v.valid)
		e.p.bufs = append(e.p.bufs, v.vals)
		if r.d.cols[ci].width < 0 {
			e.p.bufs = append(e.p.bufs, v.data)
		}
	}
	if c == CompressionNone {
		return e.appendMessage(dst, int64(r.n)), nil
	}
	sp := decompressScratch.Get().(*[]byte)
	return compressPlain(dst, sp, e.appendMessage((*sp)[:0], int64(r.n)), c, zstdLevel)
}

// view is the column's buffers for n rows as the record's array would hold
// them: the validity bitmap only with nulls, values (or offsets) and data.
func (a *colAcc) view(n int) colBuffers {
	raw := a.buffers(n)
	c := colBuffers{n: n, nulls: n - popCount(raw[0]), vals: raw[1], data: raw[2]}
	if c.nulls > 0 {
		c.valid = raw[0]
	}
	return c
}

// popCount counts the set bits of bm (bits past the rows are never set).
func popCount(bm []byte) int {
	c := 0
	for _, b := range bm {
		c += bits.OnesCount8(b)
	}
	return c
}

// maxPooledDecoderBytes: decoders that accumulated more are not kept.
const maxPooledDecoderBytes = 1 << 20

var jsonDecoders = sync.Pool{New: func() any { return new(jsonDecoder) }}

func getJSONDecoder(s *Schema, st *schemaState) *jsonDecoder {
	d := jsonDecoders.Get().(*jsonDecoder)
	d.s, d.index = s, st.index
	if cap(d.cols) < len(s.Columns) {
		d.cols = make([]colAcc, len(s.Columns))
	}
	d.cols = d.cols[:len(s.Columns)]
	if cap(d.seen) < len(s.Columns) {
		d.seen = make([]int, len(s.Columns))
	}
	d.seen = d.seen[:len(s.Columns)]
	clear(d.seen)
	for ci := range d.cols {
		c := &s.Columns[ci]
		d.cols[ci].reset(accWidth(c.Type.Kind, c.Type))
	}
	d.allowed = d.allowed[:0]
	d.row, d.ferr = 0, nil
	return d
}

func putJSONDecoder(d *jsonDecoder) {
	size := cap(d.scratch)
	for ci := range d.cols {
		a := &d.cols[ci]
		size += cap(a.valid) + cap(a.vals) + cap(a.offs) + cap(a.data)
	}
	if size > maxPooledDecoderBytes {
		return
	}
	d.s, d.index, d.ferr = nil, nil, nil
	jsonDecoders.Put(d)
}
