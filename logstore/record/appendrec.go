package record

import (
	"encoding/binary"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
)

// AppendRecordBatch appends to dst the batch of rec with stats and its body
// compressed by c (zstdLevel as EncodeBody). The bytes are those of
//
//	AppendBatch(dst, h', ComputeStats(rec), EncodeBody(rec, c, zstdLevel))
//
// where h' is h with compression c, but the stats and the body are
// written straight into dst: nothing is allocated but dst's growth. On
// error dst is returned unchanged in length.
func AppendRecordBatch(dst []byte, h BatchHeader, rec arrow.Record, c Compression, zstdLevel int) ([]byte, error) {
	return appendBatch(dst, h, recordSource{rec}, c, zstdLevel)
}

// BatchSizeHint guesses the size of rec's batch uncompressed, for sizing
// the buffer AppendRecordBatch appends to so that it rarely grows: header
// and stats, the IPC metadata, and 8 bytes per value plus string data.
func BatchSizeHint(rec arrow.Record) int {
	n := batchHintFixed + int(rec.NumCols())*(batchHintPerColumn+8*int(rec.NumRows()))
	for _, c := range rec.Columns() {
		if b, ok := c.(interface{ ValueBytes() []byte }); ok {
			n += len(b.ValueBytes())
		}
	}
	return min(n, 1<<20)
}

// SizeHint is BatchSizeHint for the rows' batch: the same estimate from
// the decoder's buffers.
func (r JSONRows) SizeHint() int {
	n := batchHintFixed
	for ci := range r.d.cols {
		a := &r.d.cols[ci]
		n += batchHintPerColumn + len(a.valid) + len(a.vals) + len(a.offs) + len(a.data)
	}
	return min(n, 1<<20)
}

// The parts of a batch's size that do not depend on the values: the fixed
// header and IPC message framing, and per column its stats entry, field
// node and buffer entries. Measured on the sample and every-type tables, a
// batch's fixed part is under 96 bytes when the per-column part is 96
// (TestJSONRowsSizeHint); a bigger fixed part only made every 1-row
// batch's buffer ~400 bytes larger than the batch.
const (
	batchHintFixed     = 96
	batchHintPerColumn = 96
)

// batchSource is what a batch is encoded from: a record, or rows still in
// the JSON decoder's column buffers.
type batchSource interface {
	numColumns() int
	// stats returns column i's stats; bounds may alias the source.
	stats(i int) ColumnStats
	appendBody(dst []byte, c Compression, zstdLevel int) ([]byte, error)
}

type recordSource struct{ rec arrow.Record }

func (r recordSource) numColumns() int         { return int(r.rec.NumCols()) }
func (r recordSource) stats(i int) ColumnStats { return columnStats(r.rec.Column(i)) }
func (r recordSource) appendBody(dst []byte, c Compression, zstdLevel int) ([]byte, error) {
	return appendBody(dst, r.rec, c, zstdLevel, false)
}

// appendBatch appends the batch of src: header, stats and body written
// straight into dst. On error dst is returned unchanged in length.
func appendBatch[S batchSource](dst []byte, h BatchHeader, src S, c Compression, zstdLevel int) ([]byte, error) {
	if err := checkCompression(c, zstdLevel); err != nil {
		return dst, err
	}
	start := len(dst)
	attrs := h.Attributes&AttrChangeType | uint16(c) | AttrStats
	dst = h.appendFixed(dst, attrs)
	n := src.numColumns()
	dst = binary.LittleEndian.AppendUint16(dst, uint16(n))
	for i := 0; i < n; i++ {
		st := src.stats(i) // bounds alias the source: used at once
		dst = appendColumnStats(dst, &st)
	}
	for (len(dst)-start)%8 != 0 {
		dst = append(dst, 0)
	}
	hl := len(dst) - start
	out, err := src.appendBody(dst, c, zstdLevel)
	if err != nil {
		return dst[:start], err
	}
	dst = out
	body := len(dst) - start - hl
	if uint64(body) > 0xFFFFFFFF {
		return dst[:start], fmt.Errorf("encode batch: body of %d bytes is too large", body)
	}
	binary.LittleEndian.PutUint32(dst[start+offHeaderLen:], uint32(hl))
	binary.LittleEndian.PutUint32(dst[start+offBodyLen:], uint32(body))
	binary.LittleEndian.PutUint32(dst[start+offCRC:], batchCRC(dst[start:]))
	return dst, nil
}
