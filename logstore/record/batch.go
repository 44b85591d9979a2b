package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
)

// Compression is the buffer compression of a batch body (attribute bits 0-1).
type Compression uint8

const (
	CompressionNone     Compression = 0
	CompressionLZ4Frame Compression = 1
	CompressionZSTD     Compression = 2
)

// String returns the Fluss property spelling: NONE, LZ4_FRAME or ZSTD.
func (c Compression) String() string {
	switch c {
	case CompressionNone:
		return "NONE"
	case CompressionLZ4Frame:
		return "LZ4_FRAME"
	case CompressionZSTD:
		return "ZSTD"
	}
	return fmt.Sprintf("Compression(%d)", uint8(c))
}

// ErrBadCompression reports an unknown compression name.
var ErrBadCompression = errors.New("bad compression")

// ParseCompression parses "NONE", "LZ4_FRAME" or "ZSTD" (case-insensitive;
// "LZ4" is accepted for LZ4_FRAME and "" for NONE).
func ParseCompression(s string) (Compression, error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "NONE", "":
		return CompressionNone, nil
	case "LZ4_FRAME", "LZ4":
		return CompressionLZ4Frame, nil
	case "ZSTD":
		return CompressionZSTD, nil
	}
	return 0, fmt.Errorf("%w %q: want NONE, LZ4_FRAME or ZSTD", ErrBadCompression, s)
}

// Batch attribute bits.
const (
	AttrCompressionMask uint16 = 0x3
	AttrChangeType      uint16 = 1 << 2
	AttrStats           uint16 = 1 << 3
	attrKnown                  = AttrCompressionMask | AttrChangeType | AttrStats
)

const (
	// BatchMagic is the first byte of every batch.
	BatchMagic byte = 0xFB
	// BatchVersion is the batch format version written by this code.
	BatchVersion byte = 1
	// BatchFixedHeaderLen is the size of the fixed part of the header.
	BatchFixedHeaderLen = 52
	// MinBatchHeaderLen is the smallest legal header length (fixed part
	// padded to 8 bytes).
	MinBatchHeaderLen = 56

	offMagic       = 0
	offVersion     = 1
	offAttributes  = 2
	offHeaderLen   = 4
	offCRC         = 8
	offBaseOffset  = 12
	offRecordCount = 20
	offCommitTs    = 24
	offWriterID    = 32
	offBatchSeq    = 40
	offSchemaID    = 44
	offBodyLen     = 48
	crcStart       = 12
)

// ErrCorruptBatch wraps every batch parse failure.
var ErrCorruptBatch = errors.New("corrupt record batch")

// ErrTruncatedBatch reports input shorter than the batch its header
// announces. It wraps ErrCorruptBatch; a log reader treats it at the tail of
// a segment as a torn write.
var ErrTruncatedBatch = fmt.Errorf("%w: truncated", ErrCorruptBatch)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// BatchHeader holds the header fields of a batch other than lengths and CRC.
type BatchHeader struct {
	Attributes      uint16
	BaseOffset      int64
	RecordCount     int32
	CommitTimestamp int64
	WriterID        int64
	BatchSequence   int32
	SchemaID        int32
}

// Compression returns the body compression named by the attributes.
func (h *BatchHeader) Compression() Compression {
	return Compression(h.Attributes & AttrCompressionMask)
}

// HasChangeType reports attribute bit 2.
func (h *BatchHeader) HasChangeType() bool { return h.Attributes&AttrChangeType != 0 }

// LastOffset is the offset of the batch's last record (BaseOffset-1 when empty).
func (h *BatchHeader) LastOffset() int64 { return h.BaseOffset + int64(h.RecordCount) - 1 }

// Batch is a parsed batch. Body (and the MinBytes/MaxBytes of Stats) alias
// the parsed input: they are valid as long as it is and must not be modified.
type Batch struct {
	BatchHeader
	// Stats has one entry per column, or is nil when the batch has none.
	Stats []ColumnStats
	// Body is the encapsulated Arrow record-batch message.
	Body []byte
}

// AppendBatch appends one batch to dst and returns the extended slice. The
// stats attribute bit is set iff stats is non-nil (whatever h.Attributes
// says); bits outside the known set are dropped. body is copied.
func AppendBatch(dst []byte, h BatchHeader, stats []ColumnStats, body []byte) []byte {
	start := len(dst)
	attrs := h.Attributes & (AttrCompressionMask | AttrChangeType)
	if stats != nil {
		attrs |= AttrStats
	}
	dst = h.appendFixed(dst, attrs)
	binary.LittleEndian.PutUint32(dst[start+offBodyLen:], uint32(len(body)))
	if stats != nil {
		dst = appendStatsBlock(dst, stats)
	}
	for (len(dst)-start)%8 != 0 {
		dst = append(dst, 0)
	}
	binary.LittleEndian.PutUint32(dst[start+offHeaderLen:], uint32(len(dst)-start))
	dst = append(dst, body...)
	binary.LittleEndian.PutUint32(dst[start+offCRC:], batchCRC(dst[start:]))
	return dst
}

// appendFixed appends the batch's fixed header with attrs, its header
// length, body length and CRC zero: the writer patches them in once known.
func (h BatchHeader) appendFixed(dst []byte, attrs uint16) []byte {
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
	return append(dst, fixed[:]...)
}

// batchCRC is the CRC-32C of a whole batch except its CRC field.
func batchCRC(b []byte) uint32 {
	return crc32.Update(crc32.Checksum(b[:offCRC], castagnoli), castagnoli, b[crcStart:])
}

// BatchLen returns the total length of the batch that starts at b[0], read
// from the header alone (no CRC check). It needs BatchFixedHeaderLen bytes.
func BatchLen(b []byte) (int, error) {
	if len(b) < BatchFixedHeaderLen {
		return 0, fmt.Errorf("%w: %d bytes, a batch header needs %d", ErrTruncatedBatch, len(b), BatchFixedHeaderLen)
	}
	if b[offMagic] != BatchMagic {
		return 0, fmt.Errorf("%w: magic byte 0x%02x, want 0x%02x", ErrCorruptBatch, b[offMagic], BatchMagic)
	}
	if b[offVersion] != BatchVersion {
		return 0, fmt.Errorf("%w: version %d, this server reads version %d", ErrCorruptBatch, b[offVersion], BatchVersion)
	}
	hl := binary.LittleEndian.Uint32(b[offHeaderLen:])
	if hl < MinBatchHeaderLen || hl%8 != 0 {
		return 0, fmt.Errorf("%w: header length %d (want a multiple of 8, at least %d)", ErrCorruptBatch, hl, MinBatchHeaderLen)
	}
	total := uint64(hl) + uint64(binary.LittleEndian.Uint32(b[offBodyLen:]))
	if total > uint64(maxInt) {
		return 0, fmt.Errorf("%w: batch length %d too large", ErrCorruptBatch, total)
	}
	return int(total), nil
}

const maxInt = int(^uint(0) >> 1)

// ParseBatch parses the batch at the start of b and returns it with the
// number of bytes it occupies. It validates magic, version, attributes,
// lengths, CRC and the stats block; every error wraps ErrCorruptBatch
// (ErrTruncatedBatch when b ends inside the batch). It never panics and
// never reads beyond the announced length.
func ParseBatch(b []byte) (Batch, int, error) { return parseBatch(b, true) }

// CheckBatch validates the batch at the start of b exactly as ParseBatch
// does and returns it without its stats (Stats is nil), allocating
// nothing: for a write path that stores the batch as it is.
func CheckBatch(b []byte) (Batch, int, error) { return parseBatch(b, false) }

func parseBatch(b []byte, keepStats bool) (Batch, int, error) {
	n, err := BatchLen(b)
	if err != nil {
		return Batch{}, 0, err
	}
	if n > len(b) {
		return Batch{}, 0, fmt.Errorf("%w: batch is %d bytes, only %d present", ErrTruncatedBatch, n, len(b))
	}
	b = b[:n]
	if want, got := binary.LittleEndian.Uint32(b[offCRC:]), batchCRC(b); want != got {
		return Batch{}, 0, fmt.Errorf("%w: CRC 0x%08x, computed 0x%08x", ErrCorruptBatch, want, got)
	}
	var bt Batch
	bt.Attributes = binary.LittleEndian.Uint16(b[offAttributes:])
	if bt.Attributes&^attrKnown != 0 {
		return Batch{}, 0, fmt.Errorf("%w: unknown attribute bits 0x%04x", ErrCorruptBatch, bt.Attributes&^attrKnown)
	}
	if bt.Attributes&AttrCompressionMask == 3 {
		return Batch{}, 0, fmt.Errorf("%w: compression code 3 is not defined", ErrCorruptBatch)
	}
	bt.BaseOffset = int64(binary.LittleEndian.Uint64(b[offBaseOffset:]))
	bt.RecordCount = int32(binary.LittleEndian.Uint32(b[offRecordCount:]))
	if bt.RecordCount < 0 {
		return Batch{}, 0, fmt.Errorf("%w: negative record count %d", ErrCorruptBatch, bt.RecordCount)
	}
	bt.CommitTimestamp = int64(binary.LittleEndian.Uint64(b[offCommitTs:]))
	bt.WriterID = int64(binary.LittleEndian.Uint64(b[offWriterID:]))
	bt.BatchSequence = int32(binary.LittleEndian.Uint32(b[offBatchSeq:]))
	bt.SchemaID = int32(binary.LittleEndian.Uint32(b[offSchemaID:]))
	hl := int(binary.LittleEndian.Uint32(b[offHeaderLen:]))
	if bt.Attributes&AttrStats != 0 {
		stats, used, err := parseStatsBlock(b[BatchFixedHeaderLen:hl], keepStats)
		if err != nil {
			return Batch{}, 0, err
		}
		if want := (BatchFixedHeaderLen + used + 7) &^ 7; want != hl {
			return Batch{}, 0, fmt.Errorf("%w: header length %d, the stats block ends at %d", ErrCorruptBatch, hl, BatchFixedHeaderLen+used)
		}
		bt.Stats = stats
	} else if hl != MinBatchHeaderLen {
		return Batch{}, 0, fmt.Errorf("%w: header length %d without a stats block", ErrCorruptBatch, hl)
	}
	bt.Body = b[hl:n:n]
	return bt, n, nil
}

// Restamp sets the base offset and commit timestamp of the batch at the
// start of b in place and recomputes its CRC. b must hold a whole batch that
// ParseBatch accepted; Restamp does not re-validate it (it is a no-op on
// input shorter than the announced length).
func Restamp(b []byte, baseOffset, commitTs int64) {
	n, err := BatchLen(b)
	if err != nil || n > len(b) {
		return
	}
	binary.LittleEndian.PutUint64(b[offBaseOffset:], uint64(baseOffset))
	binary.LittleEndian.PutUint64(b[offCommitTs:], uint64(commitTs))
	binary.LittleEndian.PutUint32(b[offCRC:], batchCRC(b[:n]))
}

// NextBatch parses the first batch of b and returns it with the rest of b.
// ok is false (with a nil error) when b is empty; on error rest is b.
func NextBatch(b []byte) (bt Batch, rest []byte, ok bool, err error) {
	if len(b) == 0 {
		return Batch{}, nil, false, nil
	}
	bt, n, err := ParseBatch(b)
	if err != nil {
		return Batch{}, b, false, err
	}
	return bt, b[n:], true, nil
}

// BatchIter iterates over concatenated batches held in one byte slice:
//
//	it := NewBatchIter(buf)
//	for it.Next() { use(it.Batch()) }
//	if err := it.Err(); err != nil { ... }
//
// Batches alias buf. Iteration stops at the first bad batch; Pos then tells
// where the good prefix ends (a torn tail yields ErrTruncatedBatch).
type BatchIter struct {
	buf []byte
	pos int
	cur Batch
	err error
}

// NewBatchIter returns an iterator over buf.
func NewBatchIter(buf []byte) *BatchIter { return &BatchIter{buf: buf} }

// Next advances to the next batch; it returns false at the end or on error.
func (it *BatchIter) Next() bool {
	if it.err != nil || it.pos >= len(it.buf) {
		return false
	}
	bt, n, err := ParseBatch(it.buf[it.pos:])
	if err != nil {
		it.err = fmt.Errorf("at byte %d: %w", it.pos, err)
		return false
	}
	it.cur = bt
	it.pos += n
	return true
}

// Batch is the current batch.
func (it *BatchIter) Batch() *Batch { return &it.cur }

// Pos is the byte position after the current batch (the end of the valid
// prefix once Next returned false).
func (it *BatchIter) Pos() int { return it.pos }

// Err is the error that stopped the iteration, or nil at a clean end.
func (it *BatchIter) Err() error { return it.err }
