package record

import (
	"encoding/binary"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	flatbuffers "github.com/google/flatbuffers/go"
)

// Flatbuffer slots of the Arrow IPC Message and RecordBatch tables
// (format/Message.fbs).
const (
	fbMsgVersion       = 0
	fbMsgHeaderType    = 1
	fbMsgHeader        = 2
	fbMsgBodyLength    = 3
	fbRBLength         = 0
	fbRBNodes          = 1
	fbRBBuffers        = 2
	fbMetadataV5       = 4
	fbHeaderRecord     = 3
	fbHeaderDictionary = 2
	fbDBID             = 0 // DictionaryBatch table slots
	fbDBData           = 1
	fbStructSize       = 16 // FieldNode and Buffer: two int64
)

// plainEncoder is the pooled scratch state of appendPlainBody.
type plainEncoder struct {
	b *flatbuffers.Builder
	p plainBuffers
}

var plainEncoders = sync.Pool{New: func() any { return &plainEncoder{b: flatbuffers.NewBuilder(512)} }}

// plainBuffers collects, per column, the field node and the buffers of an
// uncompressed record-batch message.
type plainBuffers struct {
	nodes [][2]int64 // length, null count
	bufs  [][]byte
}

// collectPlain lists rec's field nodes and buffers as arrow-go's writer
// would send them, for flat columns with zero offsets only; ok is false for
// anything else (nested types, slices, short buffers, empty records), which
// the caller then encodes with arrow-go.
func collectPlain(rec arrow.Record, p *plainBuffers) (ok bool) {
	n := int(rec.NumRows())
	if n == 0 || rec.NumCols() == 0 {
		return false
	}
	for _, col := range rec.Columns() {
		d := col.Data()
		if d.Offset() != 0 || d.Len() != n {
			return false
		}
		bufs := d.Buffers()
		nulls := col.NullN()
		p.nodes = append(p.nodes, [2]int64{int64(n), int64(nulls)})
		// Validity: omitted (empty) without nulls.
		if nulls == 0 {
			p.bufs = append(p.bufs, nil)
		} else {
			if len(bufs) < 1 || bufs[0] == nil || bufs[0].Len() < int(bitutil.BytesForBits(int64(n))) {
				return false
			}
			p.bufs = append(p.bufs, bufs[0].Bytes()[:bitutil.BytesForBits(int64(n))])
		}
		switch dt := d.DataType().(type) {
		case *arrow.BooleanType:
			w := int(bitutil.BytesForBits(int64(n)))
			if len(bufs) < 2 || bufs[1] == nil || bufs[1].Len() < w {
				return false
			}
			p.bufs = append(p.bufs, bufs[1].Bytes()[:w])
		case *arrow.StringType, *arrow.BinaryType:
			if len(bufs) < 3 || bufs[1] == nil || bufs[1].Len() < 4*(n+1) {
				return false
			}
			offs := bufs[1].Bytes()[:4*(n+1)]
			first := int32(binary.LittleEndian.Uint32(offs))
			last := int32(binary.LittleEndian.Uint32(offs[4*n:]))
			if first != 0 || last < 0 {
				return false
			}
			var data []byte
			if last > 0 {
				if bufs[2] == nil || bufs[2].Len() < int(last) {
					return false
				}
				data = bufs[2].Bytes()[:last]
			}
			p.bufs = append(p.bufs, offs, data)
		case *arrow.DictionaryType: // the indices (the dictionary is its own message)
			w := 4 * n
			if dt.IndexType.ID() != arrow.INT32 || len(bufs) < 2 || bufs[1] == nil || bufs[1].Len() < w {
				return false
			}
			p.bufs = append(p.bufs, bufs[1].Bytes()[:w])
		case arrow.FixedWidthDataType:
			switch dt.ID() {
			case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.FLOAT32, arrow.FLOAT64,
				arrow.DATE32, arrow.TIME32, arrow.TIME64, arrow.TIMESTAMP, arrow.DECIMAL128:
			default:
				return false
			}
			w := n * dt.BitWidth() / 8
			if len(bufs) < 2 || bufs[1] == nil || bufs[1].Len() < w {
				return false
			}
			p.bufs = append(p.bufs, bufs[1].Bytes()[:w])
		default:
			return false
		}
	}
	return true
}

func pad8(n int) int { return (n + 7) &^ 7 }

// appendPlainBody appends the uncompressed encapsulated record-batch
// message of rec to dst without arrow-go's writer, for the flat column
// types of a table (see collectPlain). ok is false (dst unchanged) when rec
// needs the general encoder.
func appendPlainBody(dst []byte, rec arrow.Record) (out []byte, ok bool) {
	e := getPlainEncoder()
	defer e.release()
	if !collectPlain(rec, &e.p) {
		return dst, false
	}
	return e.appendMessage(dst, rec.NumRows()), true
}

func getPlainEncoder() *plainEncoder { return plainEncoders.Get().(*plainEncoder) }

func (e *plainEncoder) release() {
	clear(e.p.bufs) // do not keep the record's memory alive
	e.p.nodes, e.p.bufs = e.p.nodes[:0], e.p.bufs[:0]
	plainEncoders.Put(e)
}

// appendMessage appends the message of the collected field nodes and
// buffers (e.p) of a record batch of rows rows.
func (e *plainEncoder) appendMessage(dst []byte, rows int64) []byte {
	return e.appendMessageAs(dst, rows, -1)
}

// appendPlainDictionaryBody is appendPlainBody for a record with
// dictionary-encoded columns (int32 indices): a dictionary batch per such
// column, its id the column's rank among them (as arrow-go numbers them),
// then the record batch.
func appendPlainDictionaryBody(dst []byte, rec arrow.Record) (out []byte, ok bool) {
	start := len(dst)
	var id int64
	for _, col := range rec.Columns() {
		d, isDict := col.(*array.Dictionary)
		if !isDict {
			continue
		}
		dict := d.Dictionary()
		one := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "d", Type: dict.DataType(), Nullable: true}}, nil),
			[]arrow.Array{dict}, int64(dict.Len()))
		e := getPlainEncoder()
		ok := collectPlain(one, &e.p)
		if ok {
			dst = e.appendMessageAs(dst, int64(dict.Len()), id)
		}
		e.release()
		one.Release()
		if !ok {
			return dst[:start], false
		}
		id++
	}
	e := getPlainEncoder()
	defer e.release()
	if !collectPlain(rec, &e.p) {
		return dst[:start], false
	}
	return e.appendMessageAs(dst, rec.NumRows(), -1), true
}

// appendMessageAs is appendMessage, for a dictionary batch with id dictID
// when dictID >= 0.
func (e *plainEncoder) appendMessageAs(dst []byte, rows int64, dictID int64) []byte {
	p := &e.p
	b := e.b
	b.Reset()

	var body int64
	for _, buf := range p.bufs {
		body += int64(pad8(len(buf)))
	}
	b.StartVector(fbStructSize, len(p.bufs), 8)
	off := body
	for i := len(p.bufs) - 1; i >= 0; i-- {
		off -= int64(pad8(len(p.bufs[i])))
		b.Prep(8, fbStructSize)
		b.PrependInt64(int64(len(p.bufs[i])))
		b.PrependInt64(off)
	}
	buffersVec := b.EndVector(len(p.bufs))
	b.StartVector(fbStructSize, len(p.nodes), 8)
	for i := len(p.nodes) - 1; i >= 0; i-- {
		b.Prep(8, fbStructSize)
		b.PrependInt64(p.nodes[i][1])
		b.PrependInt64(p.nodes[i][0])
	}
	nodesVec := b.EndVector(len(p.nodes))
	b.StartObject(5)
	b.PrependInt64Slot(fbRBLength, rows, 0)
	b.PrependUOffsetTSlot(fbRBNodes, nodesVec, 0)
	b.PrependUOffsetTSlot(fbRBBuffers, buffersVec, 0)
	batch := b.EndObject()
	header := byte(fbHeaderRecord)
	if dictID >= 0 {
		b.StartObject(3)
		b.PrependInt64Slot(fbDBID, dictID, 0)
		b.PrependUOffsetTSlot(fbDBData, batch, 0)
		batch, header = b.EndObject(), fbHeaderDictionary
	}
	b.StartObject(5)
	b.PrependInt16Slot(fbMsgVersion, fbMetadataV5, 0)
	b.PrependByteSlot(fbMsgHeaderType, header, 0)
	b.PrependUOffsetTSlot(fbMsgHeader, batch, 0)
	b.PrependInt64Slot(fbMsgBodyLength, body, 0)
	b.Finish(b.EndObject())
	meta := b.FinishedBytes()

	metaLen := pad8(8+len(meta)) - 8
	dst = binary.LittleEndian.AppendUint32(dst, 0xFFFFFFFF)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(metaLen))
	dst = append(dst, meta...)
	dst = appendZeros(dst, metaLen-len(meta))
	for _, buf := range p.bufs {
		dst = append(dst, buf...)
		dst = appendZeros(dst, pad8(len(buf))-len(buf))
	}
	return dst
}

func appendZeros(dst []byte, n int) []byte {
	for ; n > 0; n-- {
		dst = append(dst, 0)
	}
	return dst
}
