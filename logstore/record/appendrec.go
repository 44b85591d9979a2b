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
	if err := checkCompression(c, zstdLevel); err != nil {
		return dst, err
	}
	start := len(dst)
	attrs := h.Attributes&AttrChangeType | uint16(c) | AttrStats
	var fixed [BatchFixedHeaderLen]byte
	fixed[offMagic] = BatchMagic
	fixed[offVersion] = BatchVersion
	binary.LittleEndian.PutUint16(fixed[offAttributes:], attrs)
	binary.LittleEndian.PutUint64(fixed[offBaseOffset:], uint64(h.BaseOffset))
	binary.LittleEndian.PutUint32(fixed[offRecordCount:], uint32(h.RecordCount))
	binary.LittleEndian.PutUint64(fixed[offCommitTs:], uint64(h.CommitTimestamp))
	binary.LittleEndian.PutUint64(fixed[offWriterID:], uint64(h.WriterID))
	binary.LittleEndian.PutUint32(fixed[offBatchSeq:], uint32(h.BatchSequence))
	binary.LittleEndian.PutUint32(fixed[offSchemaID:], uint32(h.SchemaID))
	dst = append(dst, fixed[:]...)
	n := int(rec.NumCols())
	dst = binary.LittleEndian.AppendUint16(dst, uint16(n))
	for i := 0; i < n; i++ {
		st := columnStats(rec.Column(i)) // bounds alias rec: used at once
		dst = appendColumnStats(dst, &st)
	}
	for (len(dst)-start)%8 != 0 {
		dst = append(dst, 0)
	}
	hl := len(dst) - start
	out, err := appendBody(dst, rec, c, zstdLevel, false)
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
